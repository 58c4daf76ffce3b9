package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainer/trainer/internal/bounded"
)

// CIFAR10Classes are CIFAR-10's label names (batches.meta.txt).
var CIFAR10Classes = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

// cifarRecord is one record of CIFAR-10's binary batches: a label byte, then 32x32 pixels per channel
// (all of R, then G, then B).
const cifarRecord = 1 + 3*32*32

// LoadCIFAR10 loads split "train" (data_batch_1..5.bin) or "test" (test_batch.bin) of CIFAR-10's binary
// version from dir, or from dir/cifar-10-batches-bin as the archive unpacks. Pixels become HWC.
func LoadCIFAR10(dir, split string) (*Dataset, error) {
	var names []string
	switch split {
	case "train":
		for i := 1; i <= 5; i++ {
			names = append(names, fmt.Sprintf("data_batch_%d.bin", i))
		}
	case "test", "val":
		names = []string{"test_batch.bin"}
	default:
		return nil, fmt.Errorf("data: CIFAR-10: unknown split %q, want train or test", split)
	}
	if _, err := os.Stat(filepath.Join(dir, names[0])); err != nil {
		if sub := filepath.Join(dir, "cifar-10-batches-bin"); fileExists(filepath.Join(sub, names[0])) {
			dir = sub
		}
	}
	ds := &Dataset{Name: "cifar10", Split: split, Height: 32, Width: 32, Channels: 3, NumClasses: 10,
		ClassNames: CIFAR10Classes}
	for _, name := range names {
		path := filepath.Join(dir, name)
		raw, err := bounded.ReadFile(path, 0)
		if err != nil {
			return nil, fmt.Errorf("data: CIFAR-10 %s: %w (want the binary version, cifar-10-binary.tar.gz, unpacked)", split, err)
		}
		if len(raw)%cifarRecord != 0 {
			return nil, fmt.Errorf("data: %s: %d bytes is not a whole number of %d-byte CIFAR-10 records (truncated?)",
				path, len(raw), cifarRecord)
		}
		if err := appendCHW(ds, raw, path, 1, 32, 32); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// appendCHW appends records of (labelBytes label, 3 planes of h×w) to ds, converting to HWC.
func appendCHW(ds *Dataset, raw []byte, path string, labelBytes, h, w int) error {
	rec := labelBytes + 3*h*w
	n := len(raw) / rec
	plane := h * w
	base := len(ds.Images)
	ds.Images = append(ds.Images, make([]uint8, n*3*plane)...)
	for i := range n {
		r := raw[i*rec : (i+1)*rec]
		label := int(r[labelBytes-1])
		if label >= ds.NumClasses {
			return fmt.Errorf("data: %s: record %d has label %d, want labels in [0, %d)", path, i, label, ds.NumClasses)
		}
		ds.Labels = append(ds.Labels, int32(label))
		dst := ds.Images[base+i*3*plane : base+(i+1)*3*plane]
		px := r[labelBytes:]
		for p := range plane {
			dst[3*p], dst[3*p+1], dst[3*p+2] = px[p], px[plane+p], px[2*plane+p]
		}
	}
	ds.N += n
	return nil
}

// ImagenetteClasses are Imagenette's ten ImageNet synsets in folder (byte) order, which is the label order.
var ImagenetteClasses = []string{"n01440764", "n02102040", "n02979186", "n03000684", "n03028079",
	"n03394916", "n03417042", "n03425413", "n03445777", "n03888605"}

// LoadImagenetteBin reads the book's prepared Imagenette files (train.bin, val.bin): a little-endian
// uint32 count, then count records of one label byte and 3×height×width uint8 pixels, channel-major
// (CHW). height and width 0 infer a square size from the file length; the error says what was found
// when they cannot be inferred or do not match. Labels must be below numClasses (0: 10, Imagenette).
func LoadImagenetteBin(path string, height, width, numClasses int) (*Dataset, error) {
	if numClasses <= 0 {
		numClasses = 10
	}
	f, _, err := bounded.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: imagenette-bin: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	var head [4]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return nil, fmt.Errorf("data: %s: %d bytes, too short for the uint32 count", path, st.Size())
	}
	count := int64(binary.LittleEndian.Uint32(head[:]))
	body := st.Size() - 4
	if count == 0 || body%count != 0 {
		return nil, fmt.Errorf("data: %s: count %d does not divide the %d bytes after it into whole records "+
			"(want a little-endian uint32 count, then records of 1 label byte + 3*H*W pixels)", path, count, body)
	}
	pix := body/count - 1
	switch {
	case height > 0 && width > 0:
		if pix != int64(3*height*width) {
			return nil, fmt.Errorf("data: %s: records hold %d pixel bytes, the configured %dx%d RGB image needs %d",
				path, pix, height, width, 3*height*width)
		}
	default:
		side := int64(math.Round(math.Sqrt(float64(pix) / 3)))
		if pix%3 != 0 || 3*side*side != pix {
			return nil, fmt.Errorf("data: %s: records hold %d pixel bytes, not a square RGB image: give its height and width", path, pix)
		}
		height, width = int(side), int(side)
	}
	raw := make([]byte, body)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("data: reading %s: %w", path, err)
	}
	split := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	ds := &Dataset{Name: "imagenette-bin", Split: split, Height: height, Width: width, Channels: 3, NumClasses: numClasses}
	if numClasses == len(ImagenetteClasses) {
		ds.ClassNames = ImagenetteClasses
	}
	if err := appendCHW(ds, raw, path, 1, height, width); err != nil {
		return nil, err
	}
	return ds, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
