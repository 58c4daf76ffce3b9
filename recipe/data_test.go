package recipe

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
)

// TestDefaultsAgreeWithData: the defaults config holds as its own plain values are data's.
func TestDefaultsAgreeWithData(t *testing.T) {
	if config.DefaultMaxImagePixels != data.DefaultMaxImagePixels {
		t.Errorf("config.DefaultMaxImagePixels %d, data's %d", config.DefaultMaxImagePixels, data.DefaultMaxImagePixels)
	}
	if d := config.Defaults().Data.Source; !slices.Contains(DataSources(), d) {
		t.Errorf("default data.source %q is not one of %v", d, DataSources())
	}
}

// TestLimitsAgreeWithData: config states the loader's bounds itself (it imports no data); they are
// data's.
func TestLimitsAgreeWithData(t *testing.T) {
	for _, c := range []struct {
		name           string
		config, inData int
	}{
		{"MaxBatchSize", config.MaxBatchSize, data.MaxBatchSize},
		{"MaxPrefetch", config.MaxPrefetch, data.MaxPrefetch},
		{"MaxWorkers", config.MaxWorkers, data.MaxWorkers},
	} {
		if c.config != c.inData {
			t.Errorf("config.%s %d, data's %d", c.name, c.config, c.inData)
		}
	}
}

// TestTrainExamplesOpensNoBackend: the training split is counted from its files, on a backend that
// cannot open here (no PJRT plugin) as on the pure-Go one: the idx files' 60,000 images, a folder's
// image files, and a missing folder named with how to get it.
func TestTrainExamplesOpensNoBackend(t *testing.T) {
	cfg := config.Defaults()
	cfg.Backend = "xla:cuda"
	if n, err := TrainExamples(cfg); err != nil || n != 60000 {
		t.Errorf("mnist: %d, %v; want 60000", n, err)
	}

	dir := t.TempDir()
	for i, class := range []string{"a", "a", "a", "b", "b"} {
		path := filepath.Join(dir, "train", class, string(rune('0'+i))+".png")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	cfg.Data.Source, cfg.Data.Dir, cfg.Net.NumClasses = "imagefolder", dir, 2
	if n, err := TrainExamples(cfg); err != nil || n != 5 {
		t.Errorf("imagefolder: %d, %v; want 5", n, err)
	}
	cfg.Data.Dir, cfg.Data.Dataset = filepath.Join(dir, "none"), "imagenette"
	if _, err := TrainExamples(cfg); err == nil || !strings.Contains(err.Error(), "data.train") || !strings.Contains(err.Error(), "trainer data fetch imagenette") {
		t.Errorf("missing split: %v, want an error naming data.train and how to get imagenette", err)
	}
	cfg.Data.Dir = ""
	if _, err := TrainExamples(cfg); err == nil || !strings.Contains(err.Error(), "set data.train or data.dir") {
		t.Errorf("no path: %v", err)
	}
}
