package gomlxfix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The bridges into unexported internals, and the module versions they were written for. Each reads
// fields or tables no public API offers, so any other version must be checked against them by hand
// (their guard tests say which field moved) before this table is changed.
var bridges = []struct {
	module, version string
	files           []string
}{
	{"github.com/gomlx/gomlx", "v0.26.0", []string{
		"graphs/gomlxfix/gomlx_internals.go", "gobackend/simplego_internals.go", "backend/pjrtplugin/xla_internals.go"}},
	{"github.com/gomlx/go-xla", "v0.1.4", []string{"backend/pjrtplugin/xla_internals.go"}},
}

// TestBridgesMatchGoMLXVersion fails, naming the bridge files, when the module builds with another
// GoMLX or go-xla than the one they were written for. It reads go.mod, whose requirements are the
// versions every build of the module links (test binaries carry no dependency list in their build
// info); a replace directive counts as another version.
func TestBridgesMatchGoMLXVersion(t *testing.T) {
	const path = "../../go.mod"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mod.Module == nil || mod.Module.Mod.Path != "github.com/trainer/trainer" {
		t.Fatalf("%s is not the trainer module's go.mod", filepath.Clean(path))
	}
	required := map[string]string{}
	for _, r := range mod.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range mod.Replace {
		required[r.Old.Path] = "replaced by " + r.New.Path + " " + r.New.Version
	}
	for _, b := range bridges {
		got, ok := required[b.module]
		switch {
		case !ok:
			t.Errorf("go.mod does not require %s; the bridges %s were written for %s",
				b.module, strings.Join(b.files, ", "), b.version)
		case got != b.version:
			t.Errorf("go.mod has %s %s, but %s read its internals as of %s: check each against the new "+
				"version (their guard tests name the fields that moved), then update this table",
				b.module, got, strings.Join(b.files, ", "), b.version)
		}
	}
}
