package trainstep

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
)

// BenchmarkTrainStep times one compiled SGD-momentum train step (forward, loss, backward, update) of
// each small net at batch 128 on the pure-Go backend, on random data. The numbers and the PyTorch peer
// are in docs/benchmarks.md; rerun with:
//
//	go test ./trainstep/ -run XXX -bench TrainStep -benchtime 5x
func BenchmarkTrainStep(b *testing.B) {
	for _, net := range []string{"linear", "mlp", "mnist_cnn"} {
		b.Run(net, func(b *testing.B) {
			cfg := config.Defaults()
			cfg.Name = "bench"
			cfg.Net.Name = net
			_, step := testStep(b, cfg)
			const batch = 128
			rng := rand.New(rand.NewPCG(1, 2))
			images := make([]float32, batch*28*28)
			labels := make([]int32, batch)
			for i := range images {
				images[i] = rng.Float32()
			}
			for i := range labels {
				labels[i] = int32(rng.IntN(10))
			}
			run := func() {
				x := tensors.FromFlatDataAndDimensions(images, batch, 28, 28, 1)
				y := tensors.FromFlatDataAndDimensions(labels, batch)
				if _, err := step.Run(x, y, Scalars{LR: 0.01, Update: 1}); err != nil {
					b.Fatal(err)
				}
			}
			run() // compile
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
