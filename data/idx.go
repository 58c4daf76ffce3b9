package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/trainer/trainer/internal/bounded"
)

// Magic numbers of the idx format: 0x08 (unsigned byte) then the number of dimensions.
const (
	IDXImagesMagic = 0x00000803 // idx3-ubyte: count, rows, cols, then count*rows*cols pixels
	IDXLabelsMagic = 0x00000801 // idx1-ubyte: count, then count labels
)

// maxIDXBytes bounds what a header may promise (8 GiB), so a corrupt header is reported instead of
// exhausting memory.
const maxIDXBytes = 8 << 30

// IDXImages is the content of an idx3-ubyte file: N images of Rows x Cols bytes, row-major.
type IDXImages struct {
	N, Rows, Cols int
	Pixels        []uint8 // len N*Rows*Cols
}

// ReadIDXImages reads an idx3-ubyte images file, gzip-compressed (detected by its magic bytes) or raw.
// The error for a missing, short, oversized or wrong-magic file names the path and what was expected.
func ReadIDXImages(path string) (*IDXImages, error) {
	r, closeFn, err := openMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var h [3]uint32
	if err := readHeader(r, path, IDXImagesMagic, "idx3 images", h[:], "magic, count, rows, cols"); err != nil {
		return nil, err
	}
	n, rows, cols := uint64(h[0]), uint64(h[1]), uint64(h[2])
	if rows == 0 || cols == 0 || rows > 1<<16 || cols > 1<<16 {
		return nil, fmt.Errorf("data: %s: bad header: image size %dx%d, want both in [1, 65536]", path, rows, cols)
	}
	want := n * rows * cols
	what := fmt.Sprintf("%d images of %dx%d (%d bytes)", n, rows, cols, want)
	if want > maxIDXBytes {
		return nil, fmt.Errorf("data: %s: bad header: %s, more than the %d-byte limit", path, what, uint64(maxIDXBytes))
	}
	pix, err := readPayload(r, path, int64(want), what)
	if err != nil {
		return nil, err
	}
	return &IDXImages{N: int(n), Rows: int(rows), Cols: int(cols), Pixels: pix}, nil
}

// ReadIDXLabels reads an idx1-ubyte labels file, gzip-compressed or raw, with the same checks as
// ReadIDXImages.
func ReadIDXLabels(path string) ([]uint8, error) {
	r, closeFn, err := openMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var h [1]uint32
	if err := readHeader(r, path, IDXLabelsMagic, "idx1 labels", h[:], "magic, count"); err != nil {
		return nil, err
	}
	n := uint64(h[0])
	return readPayload(r, path, int64(n), fmt.Sprintf("%d labels (%d bytes)", n, n))
}

// openMaybeGzip opens path and, when it starts with the gzip magic 0x1f 0x8b, wraps it in a gzip
// reader. The returned reader reports the path in none of its errors: callers add it.
func openMaybeGzip(path string) (io.Reader, func(), error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("data: %s: file not found: %w", path, err)
		}
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("data: %s: starts with the gzip magic but its gzip header is unreadable: %w", path, err)
		}
		return z, func() { z.Close(); f.Close() }, nil
	}
	return br, func() { f.Close() }, nil
}

// readHeader reads the magic number, checks it, then reads len(dims) dimensions.
func readHeader(r io.Reader, path string, magic uint32, kind string, dims []uint32, fields string) error {
	buf := make([]byte, 4+4*len(dims))
	n, err := io.ReadFull(r, buf[:4])
	if err == nil {
		if got := binary.BigEndian.Uint32(buf); got != magic {
			return wrongMagic(path, got, magic, kind)
		}
		var m int
		m, err = io.ReadFull(r, buf[4:])
		n += m
	}
	if err != nil {
		return fmt.Errorf("data: %s: truncated header: want %d bytes (%s), found %d%s",
			path, len(buf), fields, n, streamErr(err))
	}
	for i := range dims {
		dims[i] = binary.BigEndian.Uint32(buf[4+4*i:])
	}
	return nil
}

func wrongMagic(path string, got, want uint32, kind string) error {
	hint := ""
	switch got {
	case IDXImagesMagic:
		hint = " (this is an idx3 images file)"
	case IDXLabelsMagic:
		hint = " (this is an idx1 labels file)"
	}
	return fmt.Errorf("data: %s: wrong magic 0x%08x, want 0x%08x (%s)%s", path, got, want, kind, hint)
}

// readPayload reads exactly want bytes after the header and checks nothing follows.
func readPayload(r io.Reader, path string, want int64, what string) ([]uint8, error) {
	// Grow as data arrives rather than trusting the header with one big allocation.
	buf := make([]byte, 0, min(want, 64<<20))
	for int64(len(buf)) < want {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), want-int64(len(buf)))))
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), want)])
		buf = buf[:len(buf)+n]
		if err != nil && int64(len(buf)) < want {
			if err == io.EOF {
				err = nil
			}
			return nil, fmt.Errorf("data: %s: truncated: header says %s, found %d%s", path, what, len(buf), streamErr(err))
		}
	}
	extra, err := io.Copy(io.Discard, r)
	if extra > 0 {
		return nil, fmt.Errorf("data: %s: oversized: header says %s, found %d (%d extra bytes after the data)",
			path, what, want+extra, extra)
	}
	if err != nil {
		return nil, fmt.Errorf("data: %s: reading past the %s: %w", path, what, err)
	}
	return buf, nil
}

// streamErr describes why a read stopped early, when it was not a plain end of file.
func streamErr(err error) string {
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return ""
	}
	return " (" + err.Error() + ")"
}
