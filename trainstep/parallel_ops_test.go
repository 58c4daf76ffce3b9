package trainstep

import (
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// TestParallelOpsBitIdentical: the pure-Go backend's parallel op execution runs a step's independent ops
// at once, each op's own arithmetic unchanged, so three float32 SGD-Nesterov steps of MNIST-fast and
// MNIST-CNN leave every variable (weights, BatchNorm statistics, momenta) with the bits sequential
// execution leaves.
func TestParallelOpsBitIdentical(t *testing.T) {
	const steps = 3
	const px, classes = 28 * 28, 10
	images, labels := randomBatches(23, steps, px, classes)
	for _, net := range []string{"mnist_fast", "mnist_cnn"} {
		cfg := config.Defaults()
		cfg.Name = "parallel_ops"
		cfg.Net.Name = net
		cfg.Data.Source, cfg.Data.BatchSize = "mnist", dpBatch
		cfg.Optimizer.Name, cfg.Optimizer.LR, cfg.Optimizer.Momentum, cfg.Optimizer.Nesterov = "sgd", 0.05, 0.9, true
		cfg.Optimizer.WeightDecay = 0.0005
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		sameStepsOnBackends(t, cfg, "go:ops_sequential", "go:ops_parallel", net, images, labels)
	}
}
