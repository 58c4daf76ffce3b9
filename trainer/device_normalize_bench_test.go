package trainer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/gobackend"
)

// BenchmarkDeviceNormalize measures what data.device_normalize changes per batch on the pure-Go
// backend, which decides its auto setting there (docs/data.md). "host" is the loader's float path:
// the table lookup into float32 on the host, the float tensor, and a graph that reduces it; "device"
// copies the uint8 pixels, makes the uint8 tensor, and the graph looks the table up (NormalizePixels)
// before the same reduction. Rerun with:
//
//	go test ./trainer -run XXX -bench DeviceNormalize -benchtime 20x
func BenchmarkDeviceNormalize(b *testing.B) {
	backend, err := gobackend.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	for _, shape := range [][4]int{{128, 28, 28, 1}, {128, 32, 32, 3}, {32, 224, 224, 3}} {
		n, h, w, c := shape[0], shape[1], shape[2], shape[3]
		size := n * h * w * c
		table, err := data.NormalizeTable([]float32{0.485, 0.456, 0.406}[:c], []float32{0.229, 0.224, 0.225}[:c], c)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		pixels := make([]uint8, size)
		for i := range pixels {
			pixels[i] = uint8(rng.IntN(256))
		}
		name := fmt.Sprintf("%dx%dx%dx%d", n, h, w, c)
		b.Run(name+"/host", func(b *testing.B) {
			exec := MustNewExec(backend, func(x *Node) *Node { return ReduceAllSum(x) })
			defer exec.Finalize()
			floats := make([]float32, size)
			b.ResetTimer()
			for range b.N {
				for i, v := range pixels {
					floats[i] = table[int(v)*c+i%c]
				}
				x := tensors.FromFlatDataAndDimensions(floats, n, h, w, c)
				exec.MustExec(x)[0].FinalizeAll()
				x.FinalizeAll()
			}
		})
		b.Run(name+"/device", func(b *testing.B) {
			exec := MustNewExec(backend, func(x *Node) *Node { return ReduceAllSum(NormalizePixels(x, table)) })
			defer exec.Finalize()
			buf := make([]uint8, size)
			b.ResetTimer()
			for range b.N {
				copy(buf, pixels)
				x := tensors.FromFlatDataAndDimensions(buf, n, h, w, c)
				exec.MustExec(x)[0].FinalizeAll()
				x.FinalizeAll()
			}
		})
	}
}

// BenchmarkTrainStepInput times a whole cifar_cnn train step (batch 32, 32 px, SGD) on the pure-Go
// backend fed float32 images or uint8 pixels that the step normalises.
//
//	go test ./trainer -run XXX -bench TrainStepInput -benchtime 10x
func BenchmarkTrainStepInput(b *testing.B) {
	const n, size = 32, 32
	for _, dn := range []config.Switch{"false", "true"} {
		b.Run("device_normalize="+string(dn), func(b *testing.B) {
			cfg := config.Defaults()
			cfg.Net.Name, cfg.Data.Source, cfg.Data.DeviceNormalize = "cifar_cnn", "cifar10", dn
			s, err := newSession(cfg)
			if err != nil {
				b.Fatal(err)
			}
			opt, step := testStepOn(b, s)
			mean, std := cfg.Data.Normalisation()
			table, err := data.NormalizeTable(mean, std, 3)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			pixels := make([]uint8, n*size*size*3)
			for i := range pixels {
				pixels[i] = uint8(rng.IntN(256))
			}
			floats := make([]float32, len(pixels))
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(rng.IntN(10))
			}
			run := func() {
				var x *tensors.Tensor
				if dn == "true" {
					x = tensors.FromFlatDataAndDimensions(pixels, n, size, size, 3)
				} else {
					for i, v := range pixels {
						floats[i] = table[int(v)*3+i%3]
					}
					x = tensors.FromFlatDataAndDimensions(floats, n, size, size, 3)
				}
				y := tensors.FromFlatDataAndDimensions(labels, n)
				if _, _, err := step.run(x, y, stepScalars{LR: 0.01, Host: opt.HostScalars(1), Apply: true}); err != nil {
					b.Fatal(err)
				}
				x.FinalizeAll()
				y.FinalizeAll()
			}
			run() // compile
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
