package data

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/trainer/trainer/internal/bounded"
)

// Source is what a Loader reads: a fixed list of labelled examples addressed by index. Each example is
// either decoded pixels or encoded image bytes (JPEG or PNG) that the loader decodes.
//
// Example may be called from several goroutines at once.
type Source interface {
	// Len is the number of examples.
	Len() int
	// NumClasses is the number of labels; every Label is in [0, NumClasses).
	NumClasses() int
	// ClassNames names the classes (folder names, CIFAR's names), or returns nil when the source has none.
	ClassNames() []string
	// Label returns the label of example i without reading its image.
	Label(i int) int32
	// Example returns example i. buf is scratch the source may fill and return inside the Example
	// (so a caller that passes its last Example's Encoded back reuses one buffer); the Example is valid
	// until buf is reused, and its slices must not be modified.
	Example(i int, buf []byte) (Example, error)
	// Describe names example i for error messages: a file path, or "FILE record N".
	Describe(i int) string
}

// Example is one labelled image: Pixels (uint8 HWC, Height*Width*Channels bytes) when decoded, or
// Encoded bytes (JPEG or PNG) with Pixels nil.
type Example struct {
	Label                   int32
	Pixels                  []uint8
	Height, Width, Channels int
	Encoded                 []byte
}

// FixedShape is implemented by sources whose examples are all decoded pixels of one size; a loader
// without a Transform needs it.
type FixedShape interface {
	Shape() (height, width, channels int)
}

// DatasetSource presents an in-memory Dataset as a Source.
type DatasetSource struct{ *Dataset }

// NewDatasetSource wraps ds.
func NewDatasetSource(ds *Dataset) DatasetSource { return DatasetSource{ds} }

func (s DatasetSource) Len() int             { return s.N }
func (s DatasetSource) NumClasses() int      { return s.Dataset.NumClasses }
func (s DatasetSource) ClassNames() []string { return s.Dataset.ClassNames }
func (s DatasetSource) Label(i int) int32    { return s.Labels[i] }
func (s DatasetSource) Describe(i int) string {
	return fmt.Sprintf("%s %s example %d", s.Name, s.Split, i)
}
func (s DatasetSource) Shape() (int, int, int) {
	return s.Height, s.Width, s.Channels
}
func (s DatasetSource) Example(i int, _ []byte) (Example, error) {
	return Example{Label: s.Labels[i], Pixels: s.Image(i), Height: s.Height, Width: s.Width, Channels: s.Channels}, nil
}

// ImageFolder is a split laid out as Imagenette and ImageNet unpack: ROOT/<class>/<image>, one folder
// per class. Classes are the folder names in byte order (torchvision's ImageFolder order); images are
// the files ending in .jpeg, .jpg or .png (any case), also in byte order. Files are read on demand.
type ImageFolder struct {
	Root    string
	Classes []string
	Files   []string // paths relative to Root
	Labels  []int32
}

// imageExts are the file extensions an ImageFolder lists.
var imageExts = []string{".jpeg", ".jpg", ".png"}

// OpenImageFolder lists root. An empty class folder, a root without class folders or a missing root is
// an error naming the path.
func OpenImageFolder(root string) (*ImageFolder, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("data: image folder %s: %w", root, err)
	}
	f := &ImageFolder{Root: root}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		class := e.Name()
		files, err := os.ReadDir(filepath.Join(root, class))
		if err != nil {
			return nil, fmt.Errorf("data: image folder %s: %w", root, err)
		}
		label := int32(len(f.Classes))
		n := 0
		for _, file := range files {
			if file.IsDir() || !slices.Contains(imageExts, strings.ToLower(filepath.Ext(file.Name()))) {
				continue
			}
			f.Files = append(f.Files, filepath.Join(class, file.Name()))
			f.Labels = append(f.Labels, label)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("data: image folder %s: class folder %q holds no .jpeg, .jpg or .png file "+
				"(every class needs at least one image; remove the folder if the class is unused)", root, class)
		}
		f.Classes = append(f.Classes, class)
	}
	if len(f.Classes) == 0 {
		return nil, fmt.Errorf("data: image folder %s: no class folders (want ROOT/<class>/<image>.jpeg)", root)
	}
	if len(f.Classes) > 1<<16 {
		return nil, fmt.Errorf("data: image folder %s: %d classes, at most 65536 supported", root, len(f.Classes))
	}
	return f, nil
}

func (f *ImageFolder) Len() int              { return len(f.Files) }
func (f *ImageFolder) NumClasses() int       { return len(f.Classes) }
func (f *ImageFolder) ClassNames() []string  { return f.Classes }
func (f *ImageFolder) Label(i int) int32     { return f.Labels[i] }
func (f *ImageFolder) Describe(i int) string { return filepath.Join(f.Root, f.Files[i]) }

// Example reads the file of example i into buf (grown as needed): only a regular file, checked by
// its path before it is opened (a named pipe cannot block it, a device is not opened) and again
// once open, as bounded.Open does. readImageFile does it without allocating where it can (Linux).
func (f *ImageFolder) Example(i int, buf []byte) (Example, error) {
	b, err := readImageFile(f.Root, f.Files[i], buf)
	if err != nil {
		return Example{}, fmt.Errorf("data: %w", err)
	}
	return Example{Label: f.Labels[i], Encoded: b}, nil
}

// readImageFileOS is readImageFile with package os: the file at filepath.Join(root, name) into buf.
func readImageFileOS(root, name string, buf []byte) ([]byte, error) {
	path := filepath.Join(root, name)
	file, _, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	n := int(st.Size())
	buf = slices.Grow(buf[:0], n)[:n]
	if _, err := file.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return buf, nil
}
