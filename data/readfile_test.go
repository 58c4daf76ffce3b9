//go:build unix

package data

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trainer/trainer/internal/bounded"
)

// TestReadImageFile: ImageFolder's reader gives package os's bytes for roots written in any form
// (relative, absolute, unclean, empty), and refuses what is not a regular file (a directory, a
// device, a named pipe without blocking, a link to any of them, a missing file) with the same error,
// word for word, as the reader built on package os (bounded.Open), before allocating for it.
func TestReadImageFile(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a"}, 2, 12, 10)
	want, err := os.ReadFile(filepath.Join(root, "a", "img00.png"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	for _, r := range []string{root, root + "/", root + "/./a/..", "", ".", "a/..", filepath.Dir(root) + "//" + filepath.Base(root)} {
		buf := []byte("stale")
		got, err := readImageFile(r, filepath.Join("a", "img00.png"), buf)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("root %q: %d bytes, %v; want the file's %d", r, len(got), err, len(want))
		}
	}
	os.Mkdir(filepath.Join(root, "a", "dir.jpg"), 0o755)
	os.Symlink("/dev/zero", filepath.Join(root, "a", "zero.jpg"))
	os.Symlink(filepath.Join(root, "a", "dir.jpg"), filepath.Join(root, "a", "linkdir.jpg"))
	os.Symlink("nowhere", filepath.Join(root, "a", "dangling.jpg"))
	fifo := syscall.Mkfifo(filepath.Join(root, "a", "pipe.jpg"), 0o644) == nil
	cases := []struct {
		name       string
		notRegular bool
	}{{"dir.jpg", true}, {"zero.jpg", true}, {"linkdir.jpg", true}, {"dangling.jpg", false}, {"missing.jpg", false}}
	if fifo {
		cases = append(cases, struct {
			name       string
			notRegular bool
		}{"pipe.jpg", true})
	}
	for _, tc := range cases {
		name := filepath.Join("a", tc.name)
		_, errOS := readImageFileOS(root, name, nil)
		_, err := readImageFile(root, name, make([]byte, 0, 1<<10))
		if err == nil || errOS == nil || err.Error() != errOS.Error() {
			t.Errorf("%s: %v, want package os's %v", tc.name, err, errOS)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Join(root, name)) || errors.Is(err, bounded.ErrNotRegular) != tc.notRegular {
			t.Errorf("%s: %v: want the path named, not a regular file: %v", tc.name, err, tc.notRegular)
		}
	}
	if f, err := OpenImageFolder(root); err == nil {
		for i := range f.Len() {
			if _, err := f.Example(i, nil); err != nil && !strings.HasPrefix(err.Error(), "data: ") {
				t.Errorf("%s: %v, want it to start with data:", f.Describe(i), err)
			}
		}
	}
}
