//go:build linux && (amd64 || arm64)

package data

import (
	"path/filepath"
	"testing"
)

// TestImageFolderExampleAllocs: reading an ImageFolder's file allocates nothing once the worker's
// buffer holds the largest file (package os allocates 10 times a file, about 1.1 KB), with a root
// that filepath.Join has to clean too.
func TestImageFolderExampleAllocs(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b"}, 3, 40, 30)
	f, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	f.Root += "//./"
	buf := make([]byte, 0, 1<<16)
	i := 0
	if a := testing.AllocsPerRun(50, func() {
		ex, err := f.Example(i%f.Len(), buf)
		if err != nil || len(ex.Encoded) == 0 {
			t.Fatalf("%s: %d bytes, %v", f.Describe(i%f.Len()), len(ex.Encoded), err)
		}
		buf = ex.Encoded
		i++
	}); a != 0 {
		t.Errorf("%v allocations per ImageFolder.Example, want 0", a)
	}
}

// TestJoinPath: the path built in the read buffer is filepath.Join's for every root of up to 5
// pieces from "/", ".", "..", "a", "bc", "d." and "//" (leading, repeated and trailing slashes, ".."
// past the root and past the start of a relative path) and names clean or not.
func TestJoinPath(t *testing.T) {
	pieces := []string{"/", ".", "..", "a", "bc", "d.", "//"}
	names := []string{"c/x.jpg", "x.jpg", "", ".", "..", "../x.jpg", "c//x.jpg", "./c/x.jpg", "/abs/x.jpg", "c/../x.jpg"}
	var walk func(root string, depth int)
	walk = func(root string, depth int) {
		for _, name := range names {
			if got, want := string(joinPath(nil, root, name)), filepath.Join(root, name)+"\x00"; got != want {
				t.Fatalf("joinPath(%q, %q) = %q, want %q", root, name, got, want)
			}
		}
		if depth == 0 {
			return
		}
		for _, p := range pieces {
			walk(root+p, depth-1)
		}
	}
	walk("", 5)
}
