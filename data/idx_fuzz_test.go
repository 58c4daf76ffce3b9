package data

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadIDX feeds arbitrary bytes, raw and gzip-wrapped, to both idx readers: they must return an
// error or a result whose size matches its header, never panic or over-allocate. `go test` runs the
// seeds; `go test ./data -run XXX -fuzz FuzzReadIDX` explores.
func FuzzReadIDX(f *testing.F) {
	f.Add(idxBytes(IDXImagesMagic, []uint32{2, 2, 3}, make([]byte, 12)), false)
	f.Add(idxBytes(IDXImagesMagic, []uint32{2, 2, 3}, make([]byte, 11)), true)
	f.Add(idxBytes(IDXLabelsMagic, []uint32{3}, []byte{1, 2, 3}), false)
	f.Add(idxBytes(IDXLabelsMagic, []uint32{3}, []byte{1, 2, 3, 4}), true)
	f.Add(idxBytes(IDXImagesMagic, []uint32{1 << 30, 1 << 16, 1 << 16}, nil), false)
	f.Add([]byte{0x1f, 0x8b, 0, 0}, false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, content []byte, wrap bool) {
		if wrap {
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			w.Write(content)
			w.Close()
			content = z.Bytes()
		}
		path := filepath.Join(t.TempDir(), "fuzz.idx")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if images, err := ReadIDXImages(path); err == nil {
			if len(images.Pixels) != images.N*images.Rows*images.Cols {
				t.Fatalf("%d pixels for a %dx%dx%d header", len(images.Pixels), images.N, images.Rows, images.Cols)
			}
		}
		if labels, err := ReadIDXLabels(path); err == nil && 8+len(labels) != len(content) && !wrap {
			t.Fatalf("%d labels from a %d-byte file (8 header bytes)", len(labels), len(content))
		}
	})
}
