package pjrt

// MNIST-CNN convolutions, forward + gradient (batch 128, 28x28x1 -> conv3x3 32 -> ReLU -> conv3x3 64,
// float32, loss Σy², gradients wrt both kernels), on the 2-core development machine:
//
//	ms per forward+backward   ops_sequential (default)   ops_parallel
//	auto (im2col + col2im)    2120 .. 2344               1553 .. 2059
//	im2col only               2371 .. 2826
//	native simplego conv      23369 .. 26124             17940 .. 18953
//
// (three runs, other jobs sharing the machine at times: ranges, not precise numbers.) The
// override is ~11x faster than simplego's native ConvGeneral. "auto" picks col2im for the input gradient
// of conv2 (the products tensor is smaller than im2col's patches: 0.69 s against 0.99 s for that conv
// alone); col2im for every conv takes 37 s, because the kernel-gradient conv has a 24x24 "kernel".
// Sequential op execution costs 10-35% here: the input- and kernel-gradient convs of conv2 are
// independent and overlap in parallel mode; only DotGeneral is multi-threaded within an op.
//
// Rerun: go test ./pjrt/ -run XXX -bench MNISTConvs -benchtime 3x
//
// Those numbers predate the packed GEMM (gemm.go), which now runs every float32 DotGeneral: auto with
// ops_sequential then took 0.70 s (one run, machine shared).

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func BenchmarkMNISTConvs(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	randF32 := func(scale float64, dims ...int) func() *tensors.Tensor {
		data := make([]float32, prod(dims))
		for i := range data {
			data[i] = float32((2*rng.Float64() - 1) * scale)
		}
		// A fresh host tensor each time: a tensor used on one backend instance can't be used on another.
		return func() *tensors.Tensor { return tensors.FromFlatDataAndDimensions(slices.Clone(data), dims...) }
	}
	newX := randF32(1, 128, 28, 28, 1)
	newK1 := randF32(0.3, 3, 3, 1, 32)
	newK2 := randF32(0.06, 3, 3, 32, 64)
	step := func(x, k1, k2 *Node) []*Node {
		y1 := Convolve(x, k1).Done()
		y1 = Max(y1, ZerosLike(y1)) // ReLU
		y2 := Convolve(y1, k2).Done()
		loss := ReduceAllSum(Mul(y2, y2))
		return append([]*Node{loss}, Gradient(loss, k1, k2)...)
	}
	for _, tc := range []struct {
		name, config string
		mode         convMode
	}{
		{"auto/ops_sequential", "ops_sequential", convAuto},
		{"auto/ops_parallel", "ops_parallel", convAuto},
		{"im2col/ops_sequential", "ops_sequential", convIm2col},
		{"native/ops_sequential", "ops_sequential", convNative},
		{"native/ops_parallel", "ops_parallel", convNative},
	} {
		b.Run(tc.name, func(b *testing.B) {
			backend, err := newGoBackend(tc.config)
			if err != nil {
				b.Fatal(err)
			}
			backend.convMode = tc.mode
			exec, err := NewExec(backend, step)
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			x, k1, k2 := newX(), newK1(), newK2()
			if _, err := exec.Exec(x, k1, k2); err != nil { // Compile outside the timing.
				b.Fatalf("%+v", err)
			}
			b.ResetTimer()
			for range b.N {
				outs, err := exec.Exec(x, k1, k2)
				if err != nil {
					b.Fatal(err)
				}
				if outs[0].DType() != dtypes.Float32 {
					b.Fatal(outs[0].Shape())
				}
				for _, o := range outs {
					_ = o.FinalizeAll()
				}
			}
		})
	}
}

// Float32 matrix products of the MNIST-CNN step: the packed GEMM (gemm.go, the default) against
// simplego's DotGeneral kernel ("simplego_dot"). Rerun: go test ./pjrt/ -run XXX -bench Gemm -benchtime 5x
func BenchmarkGemm(b *testing.B) {
	for _, tc := range []struct {
		name             string
		lhsDims, rhsDims []int
		lc, rc           []int
	}{
		{"conv2-fwd-73728x288x64", []int{73728, 288}, []int{288, 64}, []int{1}, []int{0}},
		{"conv2-kgrad-288x73728x64", []int{73728, 288}, []int{73728, 64}, []int{0}, []int{0}},
		{"fc1-fwd-128x9216x128", []int{128, 9216}, []int{9216, 128}, []int{1}, []int{0}},
		{"square-1024", []int{1024, 1024}, []int{1024, 1024}, []int{1}, []int{0}},
	} {
		m, k := tc.lhsDims[1-tc.lc[0]], tc.lhsDims[tc.lc[0]]
		n := tc.rhsDims[1-tc.rc[0]]
		for _, config := range []string{"", "simplego_dot"} {
			name := tc.name + "/packed"
			if config != "" {
				name = tc.name + "/simplego"
			}
			b.Run(name, func(b *testing.B) {
				backend, err := newGoBackend(config)
				if err != nil {
					b.Fatal(err)
				}
				defer backend.Finalize()
				rng := rand.New(rand.NewSource(1))
				mk := func(dims []int) *tensors.Tensor {
					data := make([]float32, prod(dims))
					for i := range data {
						data[i] = rng.Float32()
					}
					return tensors.FromFlatDataAndDimensions(data, dims...)
				}
				exec, err := NewExec(backend, func(x, y *Node) *Node { return DotGeneral(x, tc.lc, nil, y, tc.rc, nil) })
				if err != nil {
					b.Fatal(err)
				}
				defer exec.Finalize()
				x, y := mk(tc.lhsDims), mk(tc.rhsDims)
				if _, err := exec.Exec(x, y); err != nil {
					b.Fatalf("%+v", err)
				}
				b.ResetTimer()
				for range b.N {
					outs, err := exec.Exec(x, y)
					if err != nil {
						b.Fatal(err)
					}
					_ = outs[0].FinalizeAll()
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
