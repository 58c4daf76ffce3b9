package trainstep

import (
	"fmt"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// TestFusionBitIdentical: the pure-Go backend's element-wise fusion (chains evaluated block by block,
// broadcasts read in place, sums accumulated in simplego's order, results written over inputs they are
// the last users of) leaves every variable of three float32 steps of a BatchNorm net with the bits of
// the unfused backend, for each optimizer, with EMA, with global-norm clipping, and with a guard that
// gates the update on the gradients' finiteness.
func TestFusionBitIdentical(t *testing.T) {
	const steps = 3
	images, labels := dpBatches(29, steps)
	for _, c := range []struct {
		optimizer string
		nesterov  bool
		clip      float64
		guard     string
	}{
		{"sgd", false, 0, config.GuardStop},
		{"sgd", true, 0.5, config.GuardSkip},
		{"adamw", false, 0, config.GuardStop},
		{"lamb", false, 0.5, config.GuardStop},
		{"rmsprop_tf", false, 0, config.GuardSkip},
	} {
		cfg := config.Defaults()
		cfg.Name = "fusion"
		cfg.Net.Name, cfg.Net.Width, cfg.Net.ImageSize, cfg.Net.NumClasses = "cifar8_bn", 1.0/16, dpSize, dpClasses
		cfg.Data.Source, cfg.Data.BatchSize, cfg.Data.DeviceNormalize = "cifar10", dpBatch, "false"
		cfg.Optimizer.Name, cfg.Optimizer.LR, cfg.Optimizer.WeightDecay = c.optimizer, 0.05, 0.01
		if c.optimizer == "sgd" {
			cfg.Optimizer.Momentum, cfg.Optimizer.Nesterov = 0.9, c.nesterov
		}
		cfg.Optimizer.ClipGradNorm = c.clip
		cfg.Guard.NonFinite = c.guard
		cfg.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		sameStepsOnBackends(t, cfg, "go:nofuse", "go", fmt.Sprintf("%+v", c), images, labels)
	}
}
