package trainstep

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/recipe"
)

// NormalizePixels is a lookup of the loader's own table: every byte value of every channel gives
// the host's float, for 1 and 3 channels.
func TestNormalizePixelsIsTheLoadersTable(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	for _, c := range []int{1, 3} {
		mean, std := []float32{0.485, 0.456, 0.406}[:c], []float32{0.229, 0.224, 0.225}[:c]
		table, err := data.NormalizeTable(mean, std, c)
		if err != nil {
			t.Fatal(err)
		}
		pixels := make([]uint8, 2*256*c) // [2, 16, 16, c]: every value in every channel, then reversed
		for i := range 256 * c {
			pixels[i] = uint8(i / c)
			pixels[256*c+i] = uint8(255 - i/c)
		}
		out := MustExecOnce(backend, func(x *Node) *Node { return NormalizePixels(x, table) },
			tensors.FromFlatDataAndDimensions(pixels, 2, 16, 16, c))
		if out.DType() != dtypes.Float32 || out.Shape().Size() != len(pixels) {
			t.Fatalf("%d channels: output %s", c, out.Shape())
		}
		got := tensors.MustCopyFlatData[float32](out)
		for i, v := range pixels {
			if want := table[int(v)*c+i%c]; got[i] != want {
				t.Fatalf("%d channels: value %d (byte %d, channel %d) = %g, want %g", c, i, v, i%c, got[i], want)
			}
		}
	}
}

// BenchmarkDeviceNormalize measures what data.device_normalize changes per batch on the pure-Go
// backend, which decides its auto setting there (docs/data.md). "host" is the loader's float path:
// the table lookup into float32 on the host, the float tensor, and a graph that reduces it; "device"
// copies the uint8 pixels, makes the uint8 tensor, and the graph looks the table up (NormalizePixels)
// before the same reduction. Rerun with:
//
//	go test ./trainstep -run XXX -bench DeviceNormalize -benchtime 20x
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
//	go test ./trainstep -run XXX -bench TrainStepInput -benchtime 10x
func BenchmarkTrainStepInput(b *testing.B) {
	const n, size = 32, 32
	for _, dn := range []config.Switch{"false", "true"} {
		b.Run("device_normalize="+string(dn), func(b *testing.B) {
			cfg := config.Defaults()
			cfg.Name = "bench"
			cfg.Net.Name, cfg.Data.Source, cfg.Data.DeviceNormalize = "cifar_cnn", "cifar10", dn
			_, step := testStep(b, cfg)
			mean, std := recipe.Normalisation(cfg.Data)
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
				if _, err := step.Run(x, y, Scalars{LR: 0.01, Update: 1, Apply: true}); err != nil {
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
