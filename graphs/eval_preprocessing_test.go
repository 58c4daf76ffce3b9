package graphs_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	_ "github.com/trainer/trainer/graphs/testnets"
)

// TestEveryNetHasEvalPreprocessing: every registered net says how its eval images are made, with one
// mean and std per input channel, a crop fraction in (0, 1] and a filter the data package resamples
// with, so registering a net is enough for predict and eval to preprocess for it.
func TestEveryNetHasEvalPreprocessing(t *testing.T) {
	names := graphs.Names()
	if len(names) < 10 {
		t.Fatalf("only %d nets registered: %v", len(names), names)
	}
	for _, name := range names {
		spec, err := graphs.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		ev := spec.Eval
		if err := ev.Check(spec.InputShape[2]); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := data.ParseInterp(ev.Interpolation); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// A grey net takes images at its own size: no crop, as its training data is stored.
		if spec.InputShape[2] == 1 && ev.CropPct != 1 {
			t.Errorf("%s: grey net with crop fraction %g", name, ev.CropPct)
		}
		tr := data.EvalTransform{Size: spec.InputShape[0], CropPct: ev.CropPct}
		if r := tr.ResizeSize(); r < spec.InputShape[0] {
			t.Errorf("%s: resizes to %d before cropping %d", name, r, spec.InputShape[0])
		}
	}
}

// TestEvalPresets pins the two presets to their sources: torchvision's ImageNet eval transform
// (Resize(256) + CenterCrop(224), ImageNet's channel statistics) and MNIST's statistics.
func TestEvalPresets(t *testing.T) {
	want := graphs.EvalPreprocessing{Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225},
		CropPct: 0.875, Interpolation: "bilinear"}
	if !reflect.DeepEqual(graphs.ImageNetEval, want) {
		t.Errorf("ImageNetEval %+v, want %+v", graphs.ImageNetEval, want)
	}
	if r := (data.EvalTransform{Size: 224, CropPct: graphs.ImageNetEval.CropPct}).ResizeSize(); r != 256 {
		t.Errorf("ImageNetEval resizes 224 from %d, want 256", r)
	}
	want = graphs.EvalPreprocessing{Mean: []float64{0.1307}, Std: []float64{0.3081}, CropPct: 1, Interpolation: "bilinear"}
	if !reflect.DeepEqual(graphs.MNISTEval, want) {
		t.Errorf("MNISTEval %+v, want %+v", graphs.MNISTEval, want)
	}
	if !reflect.DeepEqual(graphs.DefaultEval(1), graphs.MNISTEval) || !reflect.DeepEqual(graphs.DefaultEval(3), graphs.ImageNetEval) {
		t.Error("DefaultEval: MNISTEval for grey input, ImageNetEval for RGB")
	}
}

func TestEvalPreprocessingCheckRefuses(t *testing.T) {
	ok := graphs.ImageNetEval
	for _, c := range []struct {
		p        graphs.EvalPreprocessing
		channels int
		want     string
	}{
		{ok, 1, "3 means and 3 stds for 1 input channels"},
		{graphs.EvalPreprocessing{Mean: ok.Mean, Std: []float64{0.2, 0, 0.2}, CropPct: 0.875, Interpolation: "bilinear"}, 3, "positive finite stds"},
		{graphs.EvalPreprocessing{Mean: []float64{math.NaN(), 0, 0}, Std: ok.Std, CropPct: 0.875, Interpolation: "bilinear"}, 3, "finite means"},
		{graphs.EvalPreprocessing{Mean: ok.Mean, Std: ok.Std, Interpolation: "bilinear"}, 3, "crop fraction 0, expected in (0, 1]"},
		{graphs.EvalPreprocessing{Mean: ok.Mean, Std: ok.Std, CropPct: 1.2, Interpolation: "bilinear"}, 3, "crop fraction 1.2"},
		{graphs.EvalPreprocessing{Mean: ok.Mean, Std: ok.Std, CropPct: 0.875, Interpolation: "nearest"}, 3, `interpolation "nearest"`},
		{graphs.EvalPreprocessing{Mean: ok.Mean, Std: ok.Std, CropPct: 0.875}, 3, `interpolation ""`},
	} {
		if err := c.p.Check(c.channels); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v for %d channels: %v, want an error saying %q", c.p, c.channels, err, c.want)
		}
	}
	if err := ok.Check(3); err != nil {
		t.Error(err)
	}
}
