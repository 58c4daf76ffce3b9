package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
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
