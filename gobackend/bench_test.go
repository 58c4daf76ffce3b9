package gobackend

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
// Rerun: go test ./gobackend/ -run XXX -bench MNISTConvs -benchtime 3x
//
// Those numbers predate the packed GEMM (kernels/gemm.go), which now runs every float32 DotGeneral: auto with
// ops_sequential then took 0.70 s (one run, machine shared). With the fused GEMM convolution
// (kernels/gemm_conv.go) and the AVX-512 kernel, auto takes 0.21 s and the im2col compositions 0.37 s.
// ("native" runs simplego's own ConvGeneral: float32 convolutions in auto mode are fused.)

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/gobackend/kernels"
)

func BenchmarkMNISTConvs(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	randF32 := func(scale float64, dims ...int) func() *tensors.Tensor {
		data := make([]float32, kernels.Prod(dims))
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
			backend, err := newBackend(tc.config + ",strict_conv")
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

// Matrix products of the MNIST-CNN step, float32 and float64: the packed GEMM (kernels/gemm.go, the default)
// against simplego's DotGeneral kernel ("simplego_dot"). Rerun: go test ./gobackend/ -run XXX -bench Gemm -benchtime 5x
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
		for _, dc := range []struct{ config, name string }{
			{"", "packed"}, {"simplego_dot", "simplego"}, {"", "packed-float64"}, {"simplego_dot", "simplego-float64"},
		} {
			config, f64 := dc.config, strings.HasSuffix(dc.name, "float64")
			b.Run(tc.name+"/"+dc.name, func(b *testing.B) {
				backend, err := newBackend(config)
				if err != nil {
					b.Fatal(err)
				}
				defer backend.Finalize()
				rng := rand.New(rand.NewSource(1))
				mk := func(dims []int) *tensors.Tensor {
					if f64 {
						data := make([]float64, kernels.Prod(dims))
						for i := range data {
							data[i] = rng.Float64()
						}
						return tensors.FromFlatDataAndDimensions(data, dims...)
					}
					data := make([]float32, kernels.Prod(dims))
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

// ResNet-50 (batch 8, 64 px) convolutions, forward + both gradients (loss Σy²), float32: the fused
// GEMM convolution (auto) against the im2col/col2im compositions around the packed GEMM.
// Rerun: go test ./gobackend/ -run XXX -bench ResNetConvs -benchtime 10x
func BenchmarkResNetConvs(b *testing.B) {
	for _, tc := range []struct {
		name        string
		x, k        []int
		stride, pad int
	}{
		{"layer1-3x3-64", []int{8, 16, 16, 64}, []int{3, 3, 64, 64}, 1, 1},
		{"layer1-1x1-64-256", []int{8, 16, 16, 64}, []int{1, 1, 64, 256}, 1, 0},
		{"layer3-3x3-256", []int{8, 4, 4, 256}, []int{3, 3, 256, 256}, 1, 1},
		{"layer3-1x1-1024-256", []int{8, 4, 4, 1024}, []int{1, 1, 1024, 256}, 1, 0},
		{"layer4-3x3-512", []int{8, 2, 2, 512}, []int{3, 3, 512, 512}, 1, 1},
		{"layer2-3x3-128-s2", []int{8, 16, 16, 128}, []int{3, 3, 128, 128}, 2, 1},
		{"stem-7x7-s2", []int{8, 64, 64, 3}, []int{7, 7, 3, 64}, 2, 3},
	} {
		rng := rand.New(rand.NewSource(1))
		mk := func(dims []int) *tensors.Tensor {
			data := make([]float32, kernels.Prod(dims))
			for i := range data {
				data[i] = rng.Float32()*2 - 1
			}
			return tensors.FromFlatDataAndDimensions(data, dims...)
		}
		// The step builds the gradients the way graphs/gomlxfix/vjp_conv.go does (one convolution each; the kernel
		// flipped by slices and concatenations), which is what a training step runs.
		step := func(x, k *Node) []*Node {
			nhwc := backends.ConvolveAxesConfig{InputBatch: 0, InputChannels: 3, InputSpatial: []int{1, 2},
				KernelInputChannels: 2, KernelOutputChannels: 3, KernelSpatial: []int{0, 1},
				OutputBatch: 0, OutputChannels: 3, OutputSpatial: []int{1, 2}}
			s, p := []int{tc.stride, tc.stride}, [][2]int{{tc.pad, tc.pad}, {tc.pad, tc.pad}}
			y := ConvGeneral(x, k, nhwc, s, p, nil, nil, 1, 1)
			v := MulScalar(y, 2) // dΣy²/dy
			kh, in, out := tc.k[0], tc.x[1], y.Shape().Dimensions[1]
			flipped := k
			for axis := range 2 {
				parts := make([]*Node, kh)
				for i := range parts {
					parts[i] = SliceAxis(flipped, axis, AxisElem(kh-1-i))
				}
				flipped = Concatenate(parts, axis)
			}
			dxAxes := nhwc
			dxAxes.KernelInputChannels, dxAxes.KernelOutputChannels = 3, 2
			lo, hi := kh-1-tc.pad, in-(out-1)*tc.stride+tc.pad-1
			dx := ConvGeneral(v, flipped, dxAxes, []int{1, 1}, [][2]int{{lo, hi}, {lo, hi}}, s, nil, 1, 1)
			hiK := (kh - 1) + (out-1)*tc.stride + 1 - in - tc.pad
			xk := x
			if hiK < 0 {
				xk = Slice(x, AxisRange(), AxisRange(0, in+hiK), AxisRange(0, in+hiK))
				hiK = 0
			}
			dwAxes := backends.ConvolveAxesConfig{InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
				KernelInputChannels: 0, KernelOutputChannels: 3, KernelSpatial: []int{1, 2},
				OutputBatch: 2, OutputChannels: 3, OutputSpatial: []int{0, 1}}
			dw := ConvGeneral(xk, v, dwAxes, []int{1, 1}, [][2]int{{tc.pad, hiK}, {tc.pad, hiK}}, nil, s, 1, 1)
			return []*Node{ReduceAllSum(Mul(y, y)), dx, dw}
		}
		for _, mode := range []convMode{convAuto, convIm2col} {
			name := tc.name + "/fused"
			if mode != convAuto {
				name = tc.name + "/im2col"
			}
			b.Run(name, func(b *testing.B) {
				backend, err := newBackend("strict_conv")
				if err != nil {
					b.Fatal(err)
				}
				defer backend.Finalize()
				backend.convMode = mode
				exec, err := NewExec(backend, step)
				if err != nil {
					b.Fatal(err)
				}
				defer exec.Finalize()
				x, k := mk(tc.x), mk(tc.k) // Fresh tensors: one used on another backend instance can't be used here.
				if _, err := exec.Exec(x, k); err != nil {
					b.Fatalf("%+v", err)
				}
				b.ResetTimer()
				for range b.N {
					outs, err := exec.Exec(x, k)
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range outs {
						o.FinalizeAll()
					}
				}
			})
		}
	}
}

// A BatchNorm + ReLU block with its gradients on ResNet-50 layer-1 activations ([8, 16, 16, 256],
// float32), written with plain ops as graphs/norm.go does: element-wise chains fused at compile time
// against the same executors unfused. Rerun: go test ./gobackend/ -run XXX -bench BatchNormBlock -benchtime 20x
func BenchmarkBatchNormBlock(b *testing.B) {
	dims := []int{8, 16, 16, 256}
	ch := dims[3]
	fn := func(x, gamma, beta *Node) []*Node {
		asCh := func(v *Node) *Node { return Reshape(v, 1, 1, 1, ch) }
		mean := ReduceMean(x, 0, 1, 2)
		centered := Sub(x, asCh(mean))
		variance := ReduceMean(Square(centered), 0, 1, 2)
		scale := Div(gamma, Sqrt(AddScalar(variance, 1e-5)))
		y := Add(Mul(centered, asCh(scale)), asCh(beta))
		zeros := ZerosLike(y)
		r := Where(GreaterThan(y, zeros), y, zeros) // graphs.ReLU
		loss := ReduceAllSum(Mul(r, r))
		return append([]*Node{loss}, Gradient(loss, x, gamma, beta)...)
	}
	for _, config := range []string{"", "nofuse"} {
		name := "fused"
		if config != "" {
			name = config
		}
		b.Run(name, func(b *testing.B) {
			backend, err := newBackend(config)
			if err != nil {
				b.Fatal(err)
			}
			defer backend.Finalize()
			exec, err := NewExec(backend, fn)
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			rng := rand.New(rand.NewSource(1))
			mk := func(dims ...int) *tensors.Tensor {
				data := make([]float32, kernels.Prod(dims))
				for i := range data {
					data[i] = rng.Float32()*2 - 1
				}
				return tensors.FromFlatDataAndDimensions(data, dims...)
			}
			x, gamma, beta := mk(dims...), mk(ch), mk(ch)
			if _, err := exec.Exec(x, gamma, beta); err != nil {
				b.Fatalf("%+v", err)
			}
			b.ResetTimer()
			for range b.N {
				outs, err := exec.Exec(x, gamma, beta)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					o.FinalizeAll()
				}
			}
		})
	}
}

// BenchmarkTranspose times MNIST-fast's flatten transposes (batch 128, 7×7×64 features, NHWC to NCHW
// and back), float32, on GOMAXPROCS goroutines: go test ./gobackend/ -run XXX -bench Transpose -cpu 1,2
func BenchmarkTranspose(b *testing.B) {
	for _, tc := range []struct {
		name       string
		dims, perm []int
	}{
		{"nhwc-nchw", []int{128, 7, 7, 64}, []int{0, 3, 1, 2}},
		{"nchw-nhwc", []int{128, 64, 7, 7}, []int{0, 2, 3, 1}},
	} {
		src := make([]float32, 128*49*64)
		for i := range src {
			src[i] = float32(i)
		}
		dst := make([]float32, len(src))
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(src)))
			for range b.N {
				transposeCopy(dst, src, tc.dims, tc.perm)
			}
		})
	}
}
