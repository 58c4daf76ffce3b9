package recipe

import (
	"testing"

	"github.com/trainer/trainer/config"
)

// TestLoaderOptions: training batches shuffle, drop the last partial batch, augment and mix; eval
// batches do neither, at data.eval_image_size; the decode workers are shared out among replicas.
func TestLoaderOptions(t *testing.T) {
	c := config.Defaults()
	c.Data.Source, c.Data.Workers, c.Net.ImageSize, c.Data.EvalImageSize = "imagefolder", 4, 160, 224
	c.Data.Augment.HFlip, c.Data.Augment.MixupAlpha, c.Loss.LabelSmoothing = 0.5, 0.2, 0.1
	net := [3]int{224, 224, 3}
	if got := ImageSize(c, net, true); got != [3]int{160, 160, 3} {
		t.Errorf("training size %v, want net.image_size 160", got)
	}
	if got := ImageSize(c, net, false); got != [3]int{224, 224, 3} {
		t.Errorf("eval size %v, want data.eval_image_size 224", got)
	}
	train, err := LoaderOptions(c, [3]int{160, 160, 3}, 10, 32, true, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !train.Shuffle || !train.DropLast || train.Workers != 2 || train.Replica != 1 || train.Replicas != 2 || train.BatchSize != 32 ||
		train.Transform == nil || train.Transform.Size != 160 || train.Transform.HFlip != 0.5 ||
		train.Mixup == nil || train.Mixup.NumClasses != 10 || train.Mixup.LabelSmoothing != 0.1 || len(train.Mean) != 3 {
		t.Errorf("training options: %+v (transform %+v, mixup %+v)", train, train.Transform, train.Mixup)
	}
	eval, err := LoaderOptions(c, [3]int{224, 224, 3}, 10, 50, false, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if eval.Shuffle || eval.DropLast || eval.Workers != 4 || eval.Mixup != nil || eval.Transform.Train || eval.Transform.HFlip != 0 {
		t.Errorf("eval options: %+v (transform %+v)", eval, eval.Transform)
	}
}
