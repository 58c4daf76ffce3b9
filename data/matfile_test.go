package data

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// TestReadMATSciPy: the devkit stand-ins that SciPy wrote (scripts/make_meta_mat.py), compressed and
// not, decode to the same synsets: the leaves' IDs map to their WordNet IDs, text in UTF-16 too.
func TestReadMATSciPy(t *testing.T) {
	want := map[int]string{1: "n03000003", 2: "n01000001", 3: "n02000002"}
	for _, name := range []string{"meta_plain.mat", "meta_compressed.mat"} {
		b, err := os.ReadFile(filepath.Join("testdata", "devkit", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := leafSynsets(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: leaves %v, want %v", name, got, want)
		}
		vars, _ := readMAT(b)
		s := vars["synsets"]
		if len(s.elems) != 5 || len(s.fields) != 8 || s.dims[0] != 5 || s.dims[1] != 1 {
			t.Fatalf("%s: synsets %v with %d fields", name, s.dims, len(s.fields))
		}
		if g := s.field(2, "gloss").text; g != "a leaf, named in UTF-16: café" {
			t.Errorf("%s: gloss %q", name, g)
		}
		if c := s.field(3, "children").num; len(c) != 2 || c[0] != 1 || c[1] != 2 {
			t.Errorf("%s: children of the parent %v, want [1 2]", name, c)
		}
		if c := s.field(0, "children"); len(c.num) != 0 {
			t.Errorf("%s: a leaf's children %v, want none", name, c.num)
		}
		// Every truncation is an error or a smaller result, never a panic.
		for n := range len(b) {
			readMAT(b[:n])
		}
	}
}

// FuzzReadMAT: no input makes the MAT-file reader panic or allocate past its input's bounds.
func FuzzReadMAT(f *testing.F) {
	for _, name := range []string{"meta_plain.mat", "meta_compressed.mat"} {
		b, err := os.ReadFile(filepath.Join("testdata", "devkit", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		readMAT(b)
	})
}
