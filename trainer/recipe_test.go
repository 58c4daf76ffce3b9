package trainer

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/recipe"
)

// TestRecipeRunResumesExactly: AdamW + EMA + dropout + BatchNorm + accumulation + clipping + BCE,
// stopped at a checkpoint and resumed, ends bit-identical to the uninterrupted run, EMA shadows
// and optimizer moments included.
func TestRecipeRunResumesExactly(t *testing.T) {
	mk := func(name string) config.Config {
		cfg := smallRun(t, name)
		cfg.Net.Name = testnets.BNDropoutMLP
		cfg.Steps = 12
		cfg.Data.BatchSize = 32
		cfg.Optimizer = config.OptimizerConfig{Name: "adamw", LR: 2e-3, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			WeightDecay: 0.05, ClipGradNorm: 1, AccumulateSteps: 2}
		cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupSteps: 3}
		cfg.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
		cfg.Loss = config.LossConfig{Name: "bce", LabelSmoothing: 0.1, BCEDivisor: "elements", BCETargetThreshold: 0.2}
		cfg.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 5}
		cfg.Log.EverySteps = 4
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a := mk("a")
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if resA.EMAEval.Examples != 10000 || resA.EMAEval.Top1 < 0.3 || resA.Eval.Top1 < 0.3 {
		t.Errorf("live %+v, EMA %+v: want both scored on 10000 images and above chance", resA.Eval, resA.EMAEval)
	}
	log, _ := os.ReadFile(filepath.Join(resA.Dir, "metrics.jsonl"))
	for _, key := range []string{`"ema_top1"`, `"ema_decay"`} {
		if !strings.Contains(string(log), key) {
			t.Errorf("metrics.jsonl lacks %s", key)
		}
	}
	b := mk("b")
	resB := rerunFrom(t, b, 12)
	ckA, ckB := loadBoth(t, resA.Checkpoint, resB.Checkpoint)
	for _, want := range []string{"/ema/model/bn/running_mean", "/ema/model/fc1/weight", "/optimizer/model/fc1/weight/exp_avg_sq", "/#rngState"} {
		if _, ok := ckA.Tensors[want]; !ok {
			t.Errorf("checkpoint lacks %s", want)
		}
	}
	if len(ckA.Tensors) != len(ckB.Tensors) {
		t.Fatalf("checkpoints hold %d and %d tensors", len(ckA.Tensors), len(ckB.Tensors))
	}
	for name, ta := range ckA.Tensors {
		tb, ok := ckB.Tensors[name]
		if !ok {
			t.Fatalf("resumed checkpoint lacks %s", name)
		}
		if !equalBytes(ta, tb) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}
	if resA.EMAEval != resB.EMAEval {
		t.Errorf("EMA eval: uninterrupted %+v, resumed %+v", resA.EMAEval, resB.EMAEval)
	}
}

func equalBytes(a, b *tensors.Tensor) bool {
	var x, y []byte
	a.ConstBytes(func(d []byte) { x = append(x, d...) })
	b.ConstBytes(func(d []byte) { y = append(y, d...) })
	return string(x) == string(y)
}
