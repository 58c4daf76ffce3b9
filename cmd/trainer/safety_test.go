package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trainer/trainer/data"
)

// TestDataInspectEscapesClassNames: class names holding terminal escape sequences (from a shard
// someone else packed) are printed escaped, not sent raw to the terminal.
func TestDataInspectEscapesClassNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x-00000-of-00001.shard")
	w, err := data.CreateShard(p, data.ShardPixels, []string{"cat\x1b]0;pwned\x07", "dog\x1b[2J"}, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := w.Add(int32(i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(0, 1); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := cmdData([]string{"inspect", p}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) || !strings.Contains(out, `"dog\x1b[2J"`) {
		t.Errorf("inspect printed control characters or did not escape them:\n%q", out)
	}
}

// TestOutNeverReplacesASpecialFile: --out naming a pipe or a link (a device such as /dev/null is
// refused the same way, by internal/atomicfile) is refused by plot and emit, and left as it was.
func TestOutNeverReplacesASpecialFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.png")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fifo, link} {
		err := cmdPlot([]string{"schedule", "../../configs/mnist_cnn_adamw_ema.yaml", "--out", out}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "not written") {
			t.Errorf("plot --out %s: %v", out, err)
		}
		err = cmdEmit([]string{"linear", "--batch", "2", "--out", out}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "not written") {
			t.Errorf("emit --out %s: %v", out, err)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v, %v", st, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
		t.Error("a write went through the link")
	}
}
