package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileRefusesDevicesAndLargeFiles: /dev/zero (directly or through a link), a named pipe and
// a directory are refused at once as not regular files; a file over the limit is refused by its
// stat'ed size; a file within it is read whole.
func TestReadFileRefusesDevicesAndLargeFiles(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "ckpt-000000001.tckpt")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", "/dev/urandom", link, fifo, dir} {
		start := time.Now()
		_, err := ReadFile(p, 1<<20)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadFile(%s): %v; want a not-a-regular-file error naming it", p, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ReadFile(%s) took %v", p, d)
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big, 1000); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "2000 bytes") {
		t.Errorf("2000 bytes with a limit of 1000: %v", err)
	}
	data, err := ReadFile(big, 2000)
	if err != nil || len(data) != 2000 {
		t.Errorf("2000 bytes with a limit of 2000: %d bytes, %v", len(data), err)
	}
}
