package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// bombPNG is a small PNG whose header declares w×h pixels (its data is a 4×4 image's): what a
// decompression bomb looks like to the header reader.
func bombPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Signature (8), IHDR length (4), "IHDR" (4), width, height, ...; the CRC covers type and data.
	binary.BigEndian.PutUint32(b[16:], uint32(w))
	binary.BigEndian.PutUint32(b[20:], uint32(h))
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// bombJPEG is a small JPEG whose start-of-frame declares w×h pixels.
func bombJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, testImage(16, 16, 1), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	sof := bytes.Index(b, []byte{0xff, 0xc0})
	if sof < 0 {
		t.Fatal("no SOF0 marker")
	}
	// Marker (2), length (2), precision (1), height (2), width (2).
	binary.BigEndian.PutUint16(b[sof+5:], uint16(h))
	binary.BigEndian.PutUint16(b[sof+7:], uint16(w))
	return b
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestImagesAbovePixelLimitAreRefusedFromTheHeader: a PNG or JPEG declaring 20000×20000 pixels (a
// 400 M-pixel decode: 1.6 GB as RGBA) is refused by every decoder before it allocates the image, with
// an error naming the size and the limit; the limit is configurable, and 0 means Pillow's default.
func TestImagesAbovePixelLimitAreRefusedFromTheHeader(t *testing.T) {
	for name, b := range map[string][]byte{"png": bombPNG(t, 20000, 20000), "jpeg": bombJPEG(t, 20000, 20000)} {
		var err error
		n := allocated(func() { _, err = decodePixels(b, 3, nil, 0) })
		if !errors.Is(err, ErrTooManyPixels) || !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "20000x20000 is 400000000 pixels, more than 89478485") {
			t.Errorf("%s: %v, want a bad record above the pixel limit", name, err)
		}
		if n > 16<<20 {
			t.Errorf("%s: refusing it allocated %d bytes", name, n)
		}
		path := filepath.Join(t.TempDir(), "bomb."+name)
		os.WriteFile(path, b, 0o644)
		n = allocated(func() { _, err = LoadImage(path, 0) })
		if !errors.Is(err, ErrTooManyPixels) || !strings.Contains(err.Error(), path) || n > 16<<20 {
			t.Errorf("%s: LoadImage: %v after %d bytes", name, err, n)
		}
		tr := Transform{Size: 8, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}}
		var sc augScratch
		n = allocated(func() { _, err = tr.decodeApply(b, 3, 0, rand.NewPCG(1, 2), &sc) })
		if !errors.Is(err, ErrTooManyPixels) || n > 16<<20 {
			t.Errorf("%s: decodeApply: %v after %d bytes", name, err, n)
		}
	}
	// A configured limit: 16×16 = 256 pixels pass at 256 and are refused at 255.
	small := bombJPEG(t, 16, 16)
	if _, err := decodePixels(small, 3, nil, 256); err != nil {
		t.Errorf("16x16 at a limit of 256: %v", err)
	}
	if _, err := decodePixels(small, 3, nil, 255); !errors.Is(err, ErrTooManyPixels) || !strings.Contains(err.Error(), "more than 255") {
		t.Errorf("16x16 at a limit of 255: %v", err)
	}
	if _, _, err := DecodeImage(bombPNG(t, 16, 17), 256); !errors.Is(err, ErrTooManyPixels) {
		t.Errorf("DecodeImage 16x17 at 256: %v", err)
	}
}

// TestPackAndLoaderRefuseImagesAbovePixelLimit: `data pack` stops naming the file; the loader stops
// naming it, or skips it under SkipBadRecords.
func TestPackAndLoaderRefuseImagesAbovePixelLimit(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a"}, 4, 8, 8)
	bomb := filepath.Join(root, "a", "img00.png")
	os.WriteFile(bomb, bombPNG(t, 20000, 20000), 0o644)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	n = allocated(func() { _, err = Pack(src, t.TempDir(), "x", PackOptions{}) })
	if !errors.Is(err, ErrTooManyPixels) || !strings.Contains(err.Error(), bomb) || n > 16<<20 {
		t.Errorf("pack: %v after %d bytes", err, n)
	}
	if _, err := Pack(src, t.TempDir(), "x", PackOptions{MaxImagePixels: 8 * 8}); !strings.Contains(err.Error(), "more than 64") {
		t.Errorf("pack at a limit of 64: %v", err)
	}
	opts := LoaderOptions{BatchSize: 2, Workers: 1, Transform: &Transform{Size: 4}}
	l, err := NewSourceLoader(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0, 0); !errors.Is(err, ErrTooManyPixels) || !strings.Contains(err.Error(), bomb) {
		t.Errorf("loader: %v", err)
	}
	opts.SkipBadRecords = true
	if l, err = NewSourceLoader(src, opts); err != nil {
		t.Fatal(err)
	}
	b, err := l.Batch(0, 0)
	if err != nil || b.Size != 1 || len(b.Skipped) != 1 || !strings.Contains(b.Skipped[0].Error(), bomb) {
		t.Errorf("loader skipping: size %d, skipped %v, %v", b.Size, b.Skipped, err)
	}
}
