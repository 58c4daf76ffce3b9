package atomicfile

import (
	"os"
	"path/filepath"
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
