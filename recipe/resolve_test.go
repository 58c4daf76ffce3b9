package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
)

func TestDataMeanScalarOrPerChannel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(path, []byte("data:\n  mean: 0.5\n  std: 0.25\n"), 0o644)
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, s := Normalisation(cfg.Data); len(m) != 1 || m[0] != 0.5 || s[0] != 0.25 {
		t.Errorf("scalar mean/std: %v %v", m, s)
	}
	cfg, err = Load(path, []string{"data.source=imagefolder", "data.mean=[0.4, 0.5, 0.6]", "data.std=[1, 2, 3]"})
	if err != nil {
		t.Fatal(err)
	}
	if m, s := Normalisation(cfg.Data); len(m) != 3 || m[2] != 0.6 || s[1] != 2 {
		t.Errorf("per-channel mean/std: %v %v", m, s)
	}
	if _, err := Load(path, []string{"data.mean=[0.4, 0.5]", "data.std=[1, 2]"}); err == nil || !strings.Contains(err.Error(), "data.mean") {
		t.Errorf("two means: %v", err)
	}
	cfg = config.Defaults()
	if m, s := Normalisation(cfg.Data); len(m) != 1 || m[0] != float32(0.1307) || s[0] != float32(0.3081) {
		t.Errorf("MNIST default: %v %v", m, s)
	}
}

// auto is on for the xla backends and off for the pure-Go one; under auto, training batches with
// erasing or mixup stay float (eval still goes uint8); true and false are what they say.
func TestDeviceNormalizeResolution(t *testing.T) {
	for _, tc := range []struct {
		backend      string
		dn           config.Switch
		erasing, mix bool
		train, eval  bool
	}{
		{"go", "auto", false, false, false, false},
		{"go:ops_sequential", "auto", false, false, false, false},
		{"xla:cuda", "auto", false, false, true, true},
		{"xla:cpu", "auto", false, false, true, true},
		{"xla:cuda", "auto", true, false, false, true},
		{"xla:cuda", "auto", false, true, false, true},
		{"xla:cuda", "false", false, false, false, false},
		{"go", "true", false, false, true, true},
		{"go", "false", true, true, false, false},
	} {
		c := config.Defaults()
		c.Backend, c.Data.DeviceNormalize = tc.backend, tc.dn
		if tc.erasing {
			c.Data.Augment.RandomErasing = 0.25
		}
		if tc.mix {
			c.Data.Augment.MixupAlpha = 0.2
		}
		if train, eval := NormalizeOnDevice(c, true), NormalizeOnDevice(c, false); train != tc.train || eval != tc.eval {
			t.Errorf("%+v: train %v eval %v", tc, train, eval)
		}
	}
}

func TestNetOptionsResolve(t *testing.T) {
	n := config.Defaults().Net
	opts, err := NetOptions(n, 7)
	if err != nil {
		t.Fatal(err)
	}
	if opts.DropoutRate != nil || opts.DropPathRate != nil || opts.Padding != graphs.PadDefault || opts.Seed != 7 {
		t.Errorf("defaults should leave the net's own choices: %+v", opts)
	}
	n.Dropout, n.DropPath, n.Padding, n.GELU = 0, 0.1, "same", "tanh"
	opts, err = NetOptions(n, 7)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Dropout(0.2) != 0 || opts.DropPath(0.2) != 0.1 || opts.Padding != graphs.PadSame || opts.GELU != graphs.GELUTanh {
		t.Errorf("overrides not applied: %+v", opts)
	}
}

// TestBadInputSetsTheLoaderPolicy: data.on_bad_record and data.max_image_pixels reach the loader.
func TestBadInputSetsTheLoaderPolicy(t *testing.T) {
	d := config.Defaults().Data
	var opts data.LoaderOptions
	BadInput(d, &opts)
	if opts.SkipBadRecords || opts.MaxImagePixels != data.DefaultMaxImagePixels {
		t.Errorf("defaults: skip %v, max pixels %d", opts.SkipBadRecords, opts.MaxImagePixels)
	}
	d.OnBadRecord, d.MaxImagePixels = config.BadRecordSkip, 1000
	BadInput(d, &opts)
	if !opts.SkipBadRecords || opts.MaxImagePixels != 1000 {
		t.Errorf("skip, 1000: skip %v, max pixels %d", opts.SkipBadRecords, opts.MaxImagePixels)
	}
}
