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

// TestCleanPath: the in-place cleaning is filepath.Clean on every path of up to 6 pieces from
// "/", ".", "..", "a", "bc" and "d." (leading, repeated and trailing slashes, ".." past the root and
// past the start of a relative path, names that only start with a dot).
func TestCleanPath(t *testing.T) {
	pieces := []string{"/", ".", "..", "a", "bc", "d.", "//"}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if prefix != "" {
			got := string(cleanPath([]byte(prefix)))
			if want := filepath.Clean(prefix); got != want {
				t.Fatalf("cleanPath(%q) = %q, want %q", prefix, got, want)
			}
		}
		if depth == 0 {
			return
		}
		for _, p := range pieces {
			walk(prefix+p, depth-1)
		}
	}
	walk("", 6)
	for _, tc := range [][2]string{{"/", "/tmp/x.jpg"}, {"", "a/b.jpg"}, {"root/", "c/x.jpg"}, {"./r/../s", "c/x.jpg"}, {"r", ""}, {"", ""}} {
		got := string(joinPath(nil, tc[0], tc[1]))
		if want := filepath.Join(tc[0], tc[1]) + "\x00"; got != want {
			t.Errorf("joinPath(%q, %q) = %q, want %q", tc[0], tc[1], got, want)
		}
	}
}
