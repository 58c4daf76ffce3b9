package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idxBytes builds an idx file: magic, the dimensions, then payload.
func idxBytes(magic uint32, dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	binary.Write(&b, binary.BigEndian, dims)
	b.Write(payload)
	return b.Bytes()
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testImages returns n images of rows x cols whose pixel j of image i is byte(7*i + j).
func testImages(n, rows, cols int) []byte {
	p := make([]byte, n*rows*cols)
	for i := range n {
		for j := range rows * cols {
			p[i*rows*cols+j] = byte(7*i + j)
		}
	}
	return p
}

// writeSplit writes the images and labels files of split into dir, gzip-compressed (".gz") or raw,
// and returns their paths.
func writeSplit(t *testing.T, dir, split string, gz bool, n, rows, cols int, labels []byte) (string, string) {
	t.Helper()
	names := mnistFiles[split]
	im := idxBytes(IDXImagesMagic, []uint32{uint32(n), uint32(rows), uint32(cols)}, testImages(n, rows, cols))
	lb := idxBytes(IDXLabelsMagic, []uint32{uint32(len(labels))}, labels)
	suffix := ""
	if gz {
		im, lb, suffix = gzipBytes(t, im), gzipBytes(t, lb), ".gz"
	}
	return writeFile(t, filepath.Join(dir, names[0]+suffix), im), writeFile(t, filepath.Join(dir, names[1]+suffix), lb)
}

func TestIDXRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeSplit(t, dir, "train", true, 3, 4, 5, []byte{0, 9, 4})
	writeSplit(t, dir, "test", false, 2, 6, 2, []byte{7, 1})
	for _, tc := range []struct {
		split            string
		n, rows, cols    int
		labels           []int32
		wantImagesSuffix string
	}{
		{"train", 3, 4, 5, []int32{0, 9, 4}, ".gz"},
		{"test", 2, 6, 2, []int32{7, 1}, ""},
	} {
		ds, err := LoadMNIST(dir, tc.split)
		if err != nil {
			t.Fatalf("%s: %v", tc.split, err)
		}
		if ds.N != tc.n || ds.Height != tc.rows || ds.Width != tc.cols || ds.Channels != 1 || ds.NumClasses != 10 ||
			ds.Split != tc.split || ds.Name != "mnist" {
			t.Errorf("%s: got %+v", tc.split, *ds)
		}
		if !bytes.Equal(ds.Images, testImages(tc.n, tc.rows, tc.cols)) {
			t.Errorf("%s: pixels differ", tc.split)
		}
		if got := ds.Image(1); len(got) != tc.rows*tc.cols || got[0] != 7 || got[1] != 8 {
			t.Errorf("%s: Image(1) = %v", tc.split, got)
		}
		if len(ds.Labels) != tc.n {
			t.Fatalf("%s: %d labels", tc.split, len(ds.Labels))
		}
		for i, l := range tc.labels {
			if ds.Labels[i] != l {
				t.Errorf("%s: label %d = %d, want %d", tc.split, i, ds.Labels[i], l)
			}
		}
	}
}

// Compression is detected from the content, not the name.
func TestIDXGzipDetectedByMagic(t *testing.T) {
	dir := t.TempDir()
	gzNoSuffix := writeFile(t, filepath.Join(dir, "imgs"), gzipBytes(t, idxBytes(IDXImagesMagic, []uint32{2, 2, 2}, testImages(2, 2, 2))))
	rawWithSuffix := writeFile(t, filepath.Join(dir, "labels.gz"), idxBytes(IDXLabelsMagic, []uint32{2}, []byte{3, 4}))
	im, err := ReadIDXImages(gzNoSuffix)
	if err != nil || im.N != 2 || !bytes.Equal(im.Pixels, testImages(2, 2, 2)) {
		t.Errorf("gzip without .gz: %+v, %v", im, err)
	}
	lb, err := ReadIDXLabels(rawWithSuffix)
	if err != nil || !bytes.Equal(lb, []byte{3, 4}) {
		t.Errorf("raw with .gz: %v, %v", lb, err)
	}
}

func TestIDXErrors(t *testing.T) {
	full := idxBytes(IDXImagesMagic, []uint32{3, 4, 5}, testImages(3, 4, 5))
	labels := idxBytes(IDXLabelsMagic, []uint32{3}, []byte{1, 2, 3})
	for _, tc := range []struct {
		name      string
		images    []byte // written to the train images file; nil: not written
		labels    []byte // written to the train labels file; nil: not written
		bad       string // "images" or "labels": the file the error must name
		substr    []string
		notSubstr string
	}{
		{name: "truncated images", images: full[:16+50], labels: labels, bad: "images",
			substr: []string{"truncated: header says 3 images of 4x5 (60 bytes), found 50"}},
		{name: "truncated gzip images", images: gzipBytes(t, full)[:30], labels: labels, bad: "images",
			substr: []string{"truncated", "3 images of 4x5 (60 bytes)"}},
		{name: "oversized images", images: append(append([]byte{}, full...), 1, 2, 3, 4, 5, 6, 7), labels: labels, bad: "images",
			substr: []string{"oversized: header says 3 images of 4x5 (60 bytes), found 67", "7 extra bytes"}},
		{name: "truncated labels", images: full, labels: labels[:8+2], bad: "labels",
			substr: []string{"truncated: header says 3 labels (3 bytes), found 2"}},
		{name: "oversized labels", images: full, labels: append(append([]byte{}, labels...), 0), bad: "labels",
			substr: []string{"oversized: header says 3 labels (3 bytes), found 4"}},
		{name: "labels file as images", images: labels, labels: labels, bad: "images",
			substr: []string{"wrong magic 0x00000801, want 0x00000803 (idx3 images)", "this is an idx1 labels file"}},
		{name: "images file as labels", images: full, labels: full, bad: "labels",
			substr: []string{"wrong magic 0x00000803, want 0x00000801 (idx1 labels)"}},
		{name: "short header", images: full[:5], labels: labels, bad: "images",
			substr: []string{"truncated header: want 16 bytes (magic, count, rows, cols), found 5"}},
		{name: "empty labels", images: full, labels: []byte{}, bad: "labels",
			substr: []string{"truncated header: want 8 bytes (magic, count), found 0"}},
		{name: "zero rows", images: idxBytes(IDXImagesMagic, []uint32{3, 0, 5}, nil), labels: labels, bad: "images",
			substr: []string{"image size 0x5"}},
		{name: "absurd header", images: idxBytes(IDXImagesMagic, []uint32{1 << 31, 1 << 16, 1 << 16}, nil), labels: labels, bad: "images",
			substr: []string{"bad header", "byte limit"}},
		{name: "missing labels", images: full, bad: "labels",
			substr: []string{"file not found", "want train-labels-idx1-ubyte.gz or train-labels-idx1-ubyte in"}},
		{name: "missing images", labels: labels, bad: "images",
			substr: []string{"file not found", "want train-images-idx3-ubyte.gz or train-images-idx3-ubyte in"}},
		{name: "count mismatch", images: full, labels: idxBytes(IDXLabelsMagic, []uint32{2}, []byte{1, 2}), bad: "labels",
			substr: []string{"count mismatch", "holds 3 images", "holds 2 labels", "train-images-idx3-ubyte"}},
		{name: "label out of range", images: full, labels: idxBytes(IDXLabelsMagic, []uint32{3}, []byte{1, 12, 3}), bad: "labels",
			substr: []string{"label 12 of example 1, want labels in [0, 10)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			imagesPath := filepath.Join(dir, "train-images-idx3-ubyte")
			labelsPath := filepath.Join(dir, "train-labels-idx1-ubyte")
			if tc.images != nil {
				writeFile(t, imagesPath, tc.images)
			}
			if tc.labels != nil {
				writeFile(t, labelsPath, tc.labels)
			}
			ds, err := LoadMNIST(dir, "train")
			if err == nil {
				t.Fatalf("no error, got %d examples", ds.N)
			}
			msg := err.Error()
			want := map[string]string{"images": imagesPath, "labels": labelsPath}[tc.bad]
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %s", msg, want)
			}
			if strings.Count(msg, "data:") != 1 {
				t.Errorf("error %q is not one error (prefix repeated)", msg)
			}
			for _, s := range tc.substr {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q lacks %q", msg, s)
				}
			}
		})
	}
}

// A gzip file whose CRC does not match its content is an error, not silently accepted.
func TestIDXGzipChecksum(t *testing.T) {
	z := gzipBytes(t, idxBytes(IDXLabelsMagic, []uint32{3}, []byte{1, 2, 3}))
	z[len(z)-8] ^= 0xff // CRC-32 is the trailer's first 4 bytes
	p := writeFile(t, filepath.Join(t.TempDir(), "l.gz"), z)
	_, err := ReadIDXLabels(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupt CRC: got %v", err)
	}
}

func TestUnknownSplitAndSource(t *testing.T) {
	if _, err := LoadMNIST(t.TempDir(), "val"); err == nil || !strings.Contains(err.Error(), `"val", want train or test`) {
		t.Errorf("split val: %v", err)
	}
	_, err := Open("cifar", "", "train")
	if err == nil || !strings.Contains(err.Error(), `unknown source "cifar"`) || !strings.Contains(err.Error(), "mnist, fashion-mnist") {
		t.Errorf("source cifar: %v", err)
	}
}
