package atomicfile

import (
	"os"
	"path/filepath"
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
