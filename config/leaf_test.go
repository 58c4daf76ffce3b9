package config

import (
	"go/build"
	"path"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/trainer/trainer"

// leafImports are the imports config may have beyond the standard library: YAML, and packages of this
// module that are leaves themselves. Anything that knows the nets, the data, the weights or the
// backends belongs to recipe, which imports config.
var leafImports = []string{"go.yaml.in/yaml/v3", module + "/internal/bounded", module + "/internal/echo"}

// foreignImports walks the non-test files of the package in dir and of every leafImports package of
// this module it reaches, and returns each import beyond the standard library and leafImports, as
// "importer -> imported".
func foreignImports(t *testing.T, importPath, dir string) []string {
	seen := map[string]bool{}
	var foreign []string
	var visit func(importPath, dir string)
	visit = func(importPath, dir string) {
		if seen[importPath] {
			return
		}
		seen[importPath] = true
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", importPath, err)
		}
		for _, imp := range pkg.Imports {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case !strings.Contains(first, "."): // the standard library
			case !slices.Contains(leafImports, imp):
				foreign = append(foreign, importPath+" -> "+imp)
			case strings.HasPrefix(imp, module+"/"):
				visit(imp, path.Join("..", strings.TrimPrefix(imp, module+"/")))
			}
		}
	}
	visit(importPath, dir)
	return foreign
}

// TestConfigIsALeaf: config, and the packages of this module it imports, import nothing beyond the
// standard library and leafImports, so importing the schema pulls in no backend, no GoMLX and no
// registry. The same walk over recipe, which resolves configs against all of those, finds them.
func TestConfigIsALeaf(t *testing.T) {
	if foreign := foreignImports(t, module+"/config", "."); len(foreign) > 0 {
		t.Errorf("config must stay a leaf (beyond the standard library only %v): %v", leafImports, foreign)
	}
	if foreign := foreignImports(t, module+"/recipe", "../recipe"); !slices.Contains(foreign, module+"/recipe -> "+module+"/graphs") {
		t.Errorf("the walk over recipe found %v, want its import of graphs among them", foreign)
	}
}
