package kernels

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package's promise (doc.go): no file, whatever its build constraints, imports GoMLX or any other
// package of this module, so the kernels stay usable under another backend.
func TestImportsNoGoMLX(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the package's files: %v (%d files)", err, len(files))
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/gomlx/") || strings.HasPrefix(path, "github.com/trainer/trainer") {
				t.Errorf("%s imports %s", f, path)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d non-test files checked", checked)
	}
}
