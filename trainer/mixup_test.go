package trainer

import (
	"io"
	"testing"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// A run with mixup and cutmix stopped at a checkpoint mid-epoch and resumed ends bit-identical to the
// uninterrupted run; the same run without mixing ends elsewhere (the mixing took effect).
func TestMixupRunResumesExactly(t *testing.T) {
	mk := func(name string, mix bool) config.Config {
		cfg := smallRun(t, name)
		cfg.Steps = 12
		cfg.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 5}
		cfg.Loss.LabelSmoothing = 0.1
		if mix {
			cfg.Data.Augment.MixupAlpha, cfg.Data.Augment.CutmixAlpha = 0.8, 1
		}
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a := mk("a", true)
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	b := mk("b", true)
	resB := rerunFrom(t, b, 12)
	resC, err := Run(mk("c", false), RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ckA, errA := checkpoint.Load(resA.Checkpoint)
	ckB, errB := checkpoint.Load(resB.Checkpoint)
	ckC, errC := checkpoint.Load(resC.Checkpoint)
	if errA != nil || errB != nil || errC != nil {
		t.Fatal(errA, errB, errC)
	}
	const w = "/model/fc/weight"
	if _, ok := ckA.Tensors[w]; !ok {
		t.Fatalf("checkpoint lacks %s", w)
	}
	for name, ta := range ckA.Tensors {
		if tb, ok := ckB.Tensors[name]; !ok || !equalBytes(ta, tb) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}
	if equalBytes(ckA.Tensors[w], ckC.Tensors[w]) {
		t.Error("mixup and cutmix left the weights as the unmixed run's")
	}
	if resA.Eval.Top1 < 0.5 {
		t.Errorf("mixed run reached top-1 %.3f, want > 0.5", resA.Eval.Top1)
	}
}
