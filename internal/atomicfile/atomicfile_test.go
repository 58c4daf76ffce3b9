package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	for _, content := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only f.bin", len(entries))
	}
}

func TestWriteIntoMissingDirectoryFailsWithoutWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "f.bin")
	if err := Write(path, []byte("x")); err == nil {
		t.Fatal("wrote into a directory that does not exist")
	}
}

// A written file is the user's, as os.Create makes it: 0666 less the umask, 0644 under umask 022 (not
// os.CreateTemp's 0600, which hid plots, metrics and exports from the user's group).
func TestWriteRespectsTheUmask(t *testing.T) {
	for _, tc := range []struct{ umask, want os.FileMode }{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		old := syscall.Umask(int(tc.umask))
		path := filepath.Join(t.TempDir(), "f.bin")
		err := Write(path, []byte("x"))
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != tc.want {
			t.Errorf("umask %03o: mode %03o, want %03o", tc.umask, got, tc.want)
		}
	}
}

// TestWriteReplacesOnlyRegularFiles: a symbolic link (to a file outside, which must stay as it was),
// a named pipe and a directory are refused and left in place; nothing is written beside them.
// (A device node is refused the same way; the test does not make one, which needs root.)
func TestWriteReplacesOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(outside, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo, sub, "/dev/null"} {
		before, _ := os.Lstat(p)
		err := Write(p, []byte("new"))
		if !errors.Is(err, ErrNotReplaceable) || !strings.Contains(err.Error(), p) {
			t.Errorf("Write(%s): %v; want it refused, named", p, err)
		}
		if after, err := os.Lstat(p); err != nil || after.Mode() != before.Mode() {
			t.Errorf("%s changed: %v, %v", p, after, err)
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep me" {
		t.Errorf("the link's target holds %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("the directory holds %d entries, want the 3 made", len(entries))
	}
}

// TestReplaceDirSwapsWholeDirectories: the staged tree takes dir's name whole and the old tree is gone.
func TestReplaceDirSwapsWholeDirectories(t *testing.T) {
	parent := t.TempDir()
	dir, staged := filepath.Join(parent, "out"), filepath.Join(parent, ".out.new")
	for _, f := range []struct{ path, body string }{{"out/train/a", "old a"}, {"out/val/b", "old b"},
		{".out.new/train/a", "new a"}, {".out.new/val/c", "new c"}} {
		p := filepath.Join(parent, f.path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ReplaceDir(staged, dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"train/a": "new a", "val/c": "new c"} {
		if got, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "val/b")); err == nil {
		t.Error("the old tree's val/b survived")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("the parent holds %d entries, want only out", len(entries))
	}
}
