package trainstep

import (
	"testing"

	"github.com/trainer/trainer/backend"
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
		run := func(mode string) *dpRun {
			b, err := backend.Open("go:" + mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Finalize)
			r := &dpRun{t: t, cfg: cfg, f32: true, backend: b}
			r.restart(nil)
			for s := range steps {
				r.microStep(images[s], labels[s], s, 0)
			}
			return r
		}
		sequential, parallel := run("ops_sequential").state(), run("ops_parallel").state()
		if len(sequential) == 0 || len(parallel) != len(sequential) {
			t.Fatalf("%s: %d variables after parallel steps, %d after sequential ones", net, len(parallel), len(sequential))
		}
		for name, want := range sequential {
			if got := parallel[name]; got == nil || !got.Equal(want) {
				t.Errorf("%s: %s after %d steps differs between ops_parallel and ops_sequential", net, name, steps)
			}
		}
	}
}
