package recipe

import (
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
)

// TestEvalDefaultsAreTheNetsEval: a recipe that leaves data.mean/std empty normalises an image source
// as the registry's RGB nets are evaluated (ImageNet's statistics) and an MNIST source as the grey
// nets are; the schema's defaults for data.eval_crop_pct and data.augment.interpolation (config is a
// leaf and cannot ask the registry) are the RGB nets' eval crop and filter, so that the loader's eval
// and predict agree for a recipe that sets neither.
func TestEvalDefaultsAreTheNetsEval(t *testing.T) {
	d := config.Defaults().Data
	if d.EvalCropPct != graphs.ImageNetEval.CropPct || d.Augment.Interpolation != graphs.ImageNetEval.Interpolation {
		t.Errorf("schema defaults: eval_crop_pct %g, interpolation %s; the RGB nets' eval: %g, %s",
			d.EvalCropPct, d.Augment.Interpolation, graphs.ImageNetEval.CropPct, graphs.ImageNetEval.Interpolation)
	}
	for source, want := range map[string]graphs.EvalPreprocessing{
		"imagefolder": graphs.ImageNetEval, "shards": graphs.ImageNetEval, "imagenette-bin": graphs.ImageNetEval,
		"mnist": graphs.MNISTEval, "fashion-mnist": graphs.MNISTEval,
	} {
		d.Source = source
		mean, std := Normalisation(d)
		if len(mean) != len(want.Mean) || len(std) != len(want.Std) {
			t.Errorf("%s: mean %v, std %v; want %v, %v", source, mean, std, want.Mean, want.Std)
			continue
		}
		for i := range mean {
			if mean[i] != float32(want.Mean[i]) || std[i] != float32(want.Std[i]) {
				t.Errorf("%s: mean %v, std %v; want %v, %v", source, mean, std, want.Mean, want.Std)
				break
			}
		}
	}
}
