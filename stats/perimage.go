package stats

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/trainer/trainer/internal/atomicfile"
)

// The per-image result file (docs/data.md#per-image-results): a 24-byte header, then one 4-byte record
// per image in the order the eval split is read. All integers are little-endian.
//
//	offset 0  [4]byte  magic "TRPI"
//	offset 4  uint32   format version, 1
//	offset 8  uint32   number of classes (at most MaxPerImageClasses)
//	offset 12 uint32   zero (reserved)
//	offset 16 uint64   number of records
//	record    uint16 label, uint16 predicted class
//
// An image counts as right when predicted == label. The label rides along so that two files can be
// checked to be the same images in the same order before they are paired.
const (
	perImageMagic      = "TRPI"
	perImageVersion    = 1
	perImageHeaderSize = 24
	perImageRecordSize = 4
	// MaxPerImageClasses is the most classes a label or prediction can name in a uint16.
	MaxPerImageClasses = 1 << 16
)

// PerImageWriter streams per-image records to a file that appears, complete, only on Close.
type PerImageWriter struct {
	f       *atomicfile.File
	w       *bufio.Writer
	path    string
	classes int
	count   uint64
	err     error
}

// CreatePerImage starts the per-image file at path for a net with the given number of classes.
func CreatePerImage(path string, classes int) (*PerImageWriter, error) {
	if classes < 1 || classes > MaxPerImageClasses {
		return nil, fmt.Errorf("per-image file %s: %d classes; the format holds 1 to %d", path, classes, MaxPerImageClasses)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("per-image file: %w", err)
	}
	w := &PerImageWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), path: path, classes: classes}
	w.err = w.header(w.w) // the count is filled in by Close
	return w, nil
}

func (w *PerImageWriter) header(dst io.Writer) error {
	var h [perImageHeaderSize]byte
	copy(h[:4], perImageMagic)
	binary.LittleEndian.PutUint32(h[4:], perImageVersion)
	binary.LittleEndian.PutUint32(h[8:], uint32(w.classes))
	binary.LittleEndian.PutUint64(h[16:], w.count)
	_, err := dst.Write(h[:])
	return err
}

// Add appends one image's label and predicted class.
func (w *PerImageWriter) Add(label, predicted int) error {
	if w.err != nil {
		return w.err
	}
	if label < 0 || label >= w.classes || predicted < 0 || predicted >= w.classes {
		w.err = fmt.Errorf("per-image file %s: record %d: label %d, prediction %d outside [0, %d)", w.path, w.count, label, predicted, w.classes)
		return w.err
	}
	var r [perImageRecordSize]byte
	binary.LittleEndian.PutUint16(r[0:], uint16(label))
	binary.LittleEndian.PutUint16(r[2:], uint16(predicted))
	if _, err := w.w.Write(r[:]); err != nil {
		w.err = fmt.Errorf("per-image file %s: %w", w.path, err)
	}
	w.count++
	return w.err
}

// Close writes the record count into the header and puts the file at its path; after an error in Add
// (or in Close) nothing is left at the path.
func (w *PerImageWriter) Close() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err == nil {
		_, w.err = w.f.Seek(0, io.SeekStart)
	}
	if w.err == nil {
		w.err = w.header(w.f)
	}
	if w.err != nil {
		w.f.Abort()
		return fmt.Errorf("per-image file %s: %w", w.path, w.err)
	}
	if err := w.f.Commit(); err != nil {
		return fmt.Errorf("per-image file %s: %w", w.path, err)
	}
	return nil
}

// Abort drops the file being written.
func (w *PerImageWriter) Abort() { w.f.Abort() }

// PerImageReader streams the records of a per-image file.
type PerImageReader struct {
	Path    string
	Classes int
	Count   uint64 // records in the file
	f       *os.File
	r       *bufio.Reader
	read    uint64
}

// OpenPerImage opens a per-image file and checks its header and that its length is the header's
// record count, so a truncated or foreign file is refused before any record is read.
func OpenPerImage(path string) (*PerImageReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := readPerImageHeader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func readPerImageHeader(f *os.File, path string) (*PerImageReader, error) {
	var h [perImageHeaderSize]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return nil, fmt.Errorf("%s: not a per-image result file (shorter than its %d-byte header)", path, perImageHeaderSize)
	}
	if string(h[:4]) != perImageMagic {
		return nil, fmt.Errorf("%s: not a per-image result file (magic %q, want %q)", path, h[:4], perImageMagic)
	}
	if v := binary.LittleEndian.Uint32(h[4:]); v != perImageVersion {
		return nil, fmt.Errorf("%s: per-image format version %d; this trainer reads version %d", path, v, perImageVersion)
	}
	classes := binary.LittleEndian.Uint32(h[8:])
	if classes < 1 || classes > MaxPerImageClasses {
		return nil, fmt.Errorf("%s: header says %d classes; the format holds 1 to %d", path, classes, MaxPerImageClasses)
	}
	count := binary.LittleEndian.Uint64(h[16:])
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if want := uint64(perImageHeaderSize) + count*perImageRecordSize; count > 1<<40 || uint64(info.Size()) != want {
		return nil, fmt.Errorf("%s: header says %d records (%d bytes), the file has %d bytes: truncated or not written by trainer eval",
			path, count, perImageHeaderSize+count*perImageRecordSize, info.Size())
	}
	return &PerImageReader{Path: path, Classes: int(classes), Count: count, f: f, r: bufio.NewReaderSize(f, 1<<16)}, nil
}

// Next returns the next record; ok is false after the last one.
func (r *PerImageReader) Next() (label, predicted int, ok bool, err error) {
	if r.read == r.Count {
		return 0, 0, false, nil
	}
	var rec [perImageRecordSize]byte
	if _, err := io.ReadFull(r.r, rec[:]); err != nil {
		return 0, 0, false, fmt.Errorf("%s: record %d: %w", r.Path, r.read, err)
	}
	label, predicted = int(binary.LittleEndian.Uint16(rec[0:])), int(binary.LittleEndian.Uint16(rec[2:]))
	if label >= r.Classes || predicted >= r.Classes {
		return 0, 0, false, fmt.Errorf("%s: record %d: label %d, prediction %d outside the header's %d classes", r.Path, r.read, label, predicted, r.Classes)
	}
	r.read++
	return label, predicted, true, nil
}

// Close closes the file.
func (r *PerImageReader) Close() error { return r.f.Close() }

// Paired is two evaluations of the same images compared image by image.
type Paired struct {
	Images                             int
	BothRight, OnlyA, OnlyB, BothWrong int
}

// RightA is the number of images the first evaluation got right.
func (p Paired) RightA() int { return p.BothRight + p.OnlyA }

// RightB is the number of images the second evaluation got right.
func (p Paired) RightB() int { return p.BothRight + p.OnlyB }

// PValue is McNemar's exact two-sided p-value of the pairing.
func (p Paired) PValue() float64 { return McNemarExact(p.OnlyA, p.OnlyB) }

// ComparePerImage pairs the per-image files at pathA and pathB record by record, streaming both; it
// refuses files of different class counts, lengths, or labels at any position (not the same images in
// the same order).
func ComparePerImage(pathA, pathB string) (Paired, error) {
	a, err := OpenPerImage(pathA)
	if err != nil {
		return Paired{}, err
	}
	defer a.Close()
	b, err := OpenPerImage(pathB)
	if err != nil {
		return Paired{}, err
	}
	defer b.Close()
	if a.Classes != b.Classes {
		return Paired{}, fmt.Errorf("%s has %d classes, %s has %d: not evaluations of the same task", pathA, a.Classes, pathB, b.Classes)
	}
	if a.Count != b.Count {
		return Paired{}, fmt.Errorf("%s holds %d images, %s holds %d: not evaluations of the same split", pathA, a.Count, pathB, b.Count)
	}
	var p Paired
	for {
		la, pa, ok, err := a.Next()
		if err != nil {
			return Paired{}, err
		}
		lb, pb, _, err := b.Next()
		if err != nil {
			return Paired{}, err
		}
		if !ok {
			break
		}
		if la != lb {
			return Paired{}, fmt.Errorf("image %d is labelled %d in %s and %d in %s: not the same images in the same order",
				p.Images, la, pathA, lb, pathB)
		}
		ra, rb := pa == la, pb == lb
		switch {
		case ra && rb:
			p.BothRight++
		case ra:
			p.OnlyA++
		case rb:
			p.OnlyB++
		default:
			p.BothWrong++
		}
		p.Images++
	}
	if p.Images == 0 {
		return p, errors.New("the per-image files hold no images")
	}
	return p, nil
}
