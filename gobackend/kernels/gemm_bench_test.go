package kernels

import (
	"fmt"
	"math/rand"
	"sync"
	"syscall"
	"testing"
)

// procCPU is the process's user+system CPU seconds so far.
func procCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// The packed GEMM alone (no backend, no buffers) on the MNIST-CNN step's products, ResNet-50's and
// DenseNet-121's at batch 8 and 64 px (forward, kernel and input gradients), float32, every core: what
// gobackend's BenchmarkGemm measures less the executor around it. GFLOP/cpu-s is the rate per CPU
// second of the process: beside GFLOP/s at -cpu 2, it tells work split badly (both near one core's
// rate: one worker idle) from a core taken by another process (GFLOP/s falls, GFLOP/cpu-s holds).
// Rerun: go test ./gobackend/kernels/ -run XXX -bench PackedGemm -benchtime 20x -cpu 1,2
func BenchmarkPackedGemm(b *testing.B) {
	for _, tc := range []struct {
		name             string
		lhsDims, rhsDims []int
		lc, rc           []int
	}{
		{"conv2-fwd-73728x288x64", []int{73728, 288}, []int{288, 64}, []int{1}, []int{0}},
		{"conv2-kgrad-288x73728x64", []int{73728, 288}, []int{73728, 64}, []int{0}, []int{0}},
		{"fc1-fwd-128x9216x128", []int{128, 9216}, []int{9216, 128}, []int{1}, []int{0}},
		{"square-1024", []int{1024, 1024}, []int{1024, 1024}, []int{1}, []int{0}},
		{"square-1024-bt", []int{1024, 1024}, []int{1024, 1024}, []int{1}, []int{1}},
		{"r50l4-1x1-32x512x2048", []int{32, 512}, []int{512, 2048}, []int{1}, []int{0}},
		{"r50l4-1x1-32x2048x512", []int{32, 2048}, []int{2048, 512}, []int{1}, []int{0}},
		{"r50l3-3x3-128x2304x256", []int{128, 2304}, []int{2304, 256}, []int{1}, []int{0}},
		{"r50l3-1x1-128x256x1024", []int{128, 256}, []int{256, 1024}, []int{1}, []int{0}},
		{"r50l1-3x3-2048x576x64", []int{2048, 576}, []int{576, 64}, []int{1}, []int{0}},
		{"r50l1-1x1-2048x64x256", []int{2048, 64}, []int{64, 256}, []int{1}, []int{0}},
		{"r50l2-3x3-512x1152x128", []int{512, 1152}, []int{1152, 128}, []int{1}, []int{0}},
		{"dn-1x1-2048x512x128", []int{2048, 512}, []int{512, 128}, []int{1}, []int{0}},
		{"dn-1x1-kgrad-512x2048x128", []int{2048, 512}, []int{2048, 128}, []int{0}, []int{0}},
		{"dn-1x1-dx-2048x128x512", []int{2048, 128}, []int{512, 128}, []int{1}, []int{1}},
		{"dn-1x1-512x1024x128", []int{512, 1024}, []int{1024, 128}, []int{1}, []int{0}},
		{"r50l4-kgrad-4608x32x512", []int{32, 4608}, []int{32, 512}, []int{0}, []int{0}},
		{"swin-kgrad-3072x32x768", []int{32, 3072}, []int{32, 768}, []int{0}, []int{0}},
		{"swin-kgrad-768x32x3072", []int{32, 768}, []int{32, 3072}, []int{0}, []int{0}},
		{"swin-fc-392x768x2304", []int{392, 768}, []int{768, 2304}, []int{1}, []int{0}},
		{"swin-kgrad-768x392x2304", []int{392, 768}, []int{392, 2304}, []int{0}, []int{0}},
		{"swin-fc-392x384x1152", []int{392, 384}, []int{384, 1152}, []int{1}, []int{0}},
		{"vit-fc1-136x192x768-bt", []int{136, 192}, []int{768, 192}, []int{1}, []int{1}},
		{"vit-fc1-136x192x768", []int{136, 192}, []int{192, 768}, []int{1}, []int{0}},
		{"vit-fc2-136x768x192", []int{136, 768}, []int{768, 192}, []int{1}, []int{0}},
		{"vit-fc2-136x768x192-bt", []int{136, 768}, []int{192, 768}, []int{1}, []int{1}},
		{"vit-kgrad-768x136x192", []int{136, 768}, []int{136, 192}, []int{0}, []int{0}},
		{"vit-kgrad-192x136x768", []int{136, 192}, []int{136, 768}, []int{0}, []int{0}},
	} {
		b.Run(tc.name, func(b *testing.B) { benchDotProduct(b, tc.lhsDims, tc.rhsDims, tc.lc, tc.rc) })
	}
}

// benchDotProduct times one float32 product of two 2-D operands contracting axes lc and rc (random
// values), reporting GFLOP/s and GFLOP/cpu-s.
func benchDotProduct(b *testing.B, lhsDims, rhsDims, lc, rc []int) {
	m, k := lhsDims[1-lc[0]], lhsDims[lc[0]]
	n := rhsDims[1-rc[0]]
	rng := rand.New(rand.NewSource(1))
	lhs, rhs := make([]float32, Prod(lhsDims)), make([]float32, Prod(rhsDims))
	for i := range lhs {
		lhs[i] = rng.Float32()
	}
	for i := range rhs {
		rhs[i] = rng.Float32()
	}
	p, ok := NewDotProblem(lhs, rhs, lhsDims, rhsDims, lc, nil, rc, nil, 1, m, n, k)
	if !ok {
		b.Fatal("NewDotProblem refused the product")
	}
	out := make([]float32, m*n)
	p.Run(out)
	c0 := procCPU()
	b.ResetTimer()
	for range b.N {
		p.Run(out)
	}
	b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(2*float64(m*n*k)*float64(b.N)/(procCPU()-c0)/1e9, "GFLOP/cpu-s")
}

// CIFAR-8's convolutions at batch 32 and 32 px (graphs/cifar.go: 3×3, padding 1, widths 64 to 512 over
// 32 to 4 px maps), each the way a training step runs it: the forward, the input gradient (the flipped
// kernel, its channel axes swapped) and the kernel gradient (the input's channels as the batch), through
// RunConv with its tables kept between calls. Most of cifar8's step is these products, nearly all of it
// the micro-kernel's direct form reading the padded input in place. GFLOP/cpu-s as in PackedGemm.
// Rerun: go test ./gobackend/kernels/ -run XXX -bench Cifar8Convs -benchtime 5x -cpu 1
func BenchmarkCifar8Convs(b *testing.B) {
	nhwc, dgrad, kgrad := stepConvAxes()
	const batch = 32
	for _, layer := range []struct{ size, cin, cout int }{
		{32, 3, 64}, {32, 64, 64}, {16, 64, 128}, {16, 128, 128}, {8, 128, 256}, {8, 256, 256}, {4, 256, 512}, {4, 512, 512},
	} {
		s, ci, co := layer.size, layer.cin, layer.cout
		for _, form := range []struct {
			name                string
			inDims, kDims, outs []int
			axes                ConvAxes
			flip                bool
		}{
			{"fwd", []int{batch, s, s, ci}, []int{3, 3, ci, co}, []int{batch, s, s, co}, nhwc, false},
			{"dgrad", []int{batch, s, s, co}, []int{3, 3, ci, co}, []int{batch, s, s, ci}, dgrad, true},
			{"kgrad", []int{batch, s, s, ci}, []int{batch, s, s, co}, []int{3, 3, ci, co}, kgrad, false},
		} {
			if ci == 3 && form.name == "dgrad" {
				continue // A step computes no gradient of the images.
			}
			b.Run(fmt.Sprintf("%dpx-%d-%d/%s", s, ci, co, form.name), func(b *testing.B) {
				rng := rand.New(rand.NewSource(1))
				in, k := make([]float32, Prod(form.inDims)), make([]float32, Prod(form.kDims))
				for i := range in {
					in[i] = rng.Float32()*2 - 1
				}
				for i := range k {
					k[i] = rng.Float32()*2 - 1
				}
				out := make([]float32, Prod(form.outs))
				spec := ConvGemmSpec{Axes: form.axes, Strides: []int{1, 1}, KernelDilations: []int{1, 1},
					InputDilations: []int{1, 1}, Paddings: [][2]int{{1, 1}, {1, 1}}, Flip: []bool{form.flip, form.flip},
					Plans: &sync.Map{}}
				if !RunConv(in, form.inDims, k, form.kDims, form.outs, spec, out) {
					b.Fatal("RunConv refused the layout")
				}
				flops := 2 * float64(batch*s*s*9*ci*co)
				c0 := procCPU()
				b.ResetTimer()
				for range b.N {
					RunConv(in, form.inDims, k, form.kDims, form.outs, spec, out)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops*float64(b.N)/(procCPU()-c0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// Packing B of CIFAR-8's kernel gradients at batch 32 (the output gradient [32, s, s, cout], its row for
// contracting index (y, x, batch) at [batch, y, x, :]) into one 64-column panel per K block, as the
// 7×64 tile's packing does, K block by K block: the copy whose row order read a new page per row.
// GB/s counts the bytes copied.
// Rerun: go test ./gobackend/kernels/ -run XXX -bench KernelGradCopyB -benchtime 20x -cpu 1
func BenchmarkKernelGradCopyB(b *testing.B) {
	const batch, w = 32, 64
	for _, layer := range []struct{ size, cout int }{{32, 64}, {16, 128}, {8, 256}} {
		s, co := layer.size, layer.cout
		b.Run(fmt.Sprintf("%dpx-%d", s, co), func(b *testing.B) {
			src := make([]float32, batch*s*s*co)
			for i := range src {
				src[i] = float32(i)
			}
			offs := make([]int, 0, s*s*batch)
			for pos := range s * s {
				for n := range batch {
					offs = append(offs, (n*s*s+pos)*co)
				}
			}
			dst := make([]float32, gemmKC*w)
			kb := kBlocks(0, len(offs))
			b.ResetTimer()
			for range b.N {
				for q := 0; q < co; q += w { // Each 64-column panel of B.
					for blk := range len(kb) - 1 {
						copyRows(dst, src, q, offs[kb[blk]:kb[blk+1]], w)
					}
				}
			}
			b.ReportMetric(float64(len(src)*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// Batched small products of attention, every form a training step emits, with the operands' layouts
// and axes as the step passes them (ViT-Tiny at batch 8, 64 px: 24 heads of 17 tokens × 64; Swin-T at
// batch 8, 64 px: 96 heads of its third stage's 49-token windows × 32), float32, one thread: the
// per-head costs around the micro-kernel dominate. qk is q·kᵀ (B read across its contracting axis;
// also the gradient of the weights, dO·vᵀ); av the weights times v (also q's gradient, dS·k); dk is
// k's gradient dSᵀ·q (A read down its columns); dv is v's gradient, transposed (dOᵀ·weights). Names are
// batch×m×k×n.
// Rerun: go test ./gobackend/kernels/ -run XXX -bench BatchedSmallGemm -benchtime 200x -cpu 1
func BenchmarkBatchedSmallGemm(b *testing.B) {
	for _, tc := range []struct {
		name             string
		lhsDims, rhsDims []int
		lc, rc, lb, rb   []int
	}{
		{"vit-qk-24x17x64x17", []int{8, 3, 17, 64}, []int{8, 3, 17, 64}, []int{3}, []int{3}, []int{0, 1}, []int{0, 1}},
		{"vit-av-24x17x17x64", []int{8, 3, 17, 17}, []int{8, 3, 17, 64}, []int{3}, []int{2}, []int{0, 1}, []int{0, 1}},
		{"vit-dk-24x17x17x64", []int{8, 3, 17, 17}, []int{8, 3, 17, 64}, []int{2}, []int{2}, []int{0, 1}, []int{0, 1}},
		{"vit-dv-24x64x17x17", []int{8, 3, 17, 64}, []int{8, 3, 17, 17}, []int{2}, []int{2}, []int{0, 1}, []int{0, 1}},
		{"swin-qk-96x49x32x49", []int{8, 12, 49, 32}, []int{8, 12, 49, 32}, []int{3}, []int{3}, []int{0, 1}, []int{0, 1}},
		{"swin-av-96x49x49x32", []int{8, 12, 49, 49}, []int{8, 12, 49, 32}, []int{3}, []int{2}, []int{0, 1}, []int{0, 1}},
		{"swin-dk-96x49x49x32", []int{8, 12, 49, 49}, []int{8, 12, 49, 32}, []int{2}, []int{2}, []int{0, 1}, []int{0, 1}},
		{"swin-dv-96x32x49x49", []int{8, 12, 49, 32}, []int{8, 12, 49, 49}, []int{2}, []int{2}, []int{0, 1}, []int{0, 1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			lhs, rhs := make([]float32, Prod(tc.lhsDims)), make([]float32, Prod(tc.rhsDims))
			for i := range lhs {
				lhs[i] = rng.Float32()
			}
			for i := range rhs {
				rhs[i] = rng.Float32()
			}
			l := newGemmOperand(lhs, tc.lhsDims, tc.lc, tc.lb)
			r := newGemmOperand(rhs, tc.rhsDims, tc.rc, tc.rb)
			batch, m, n, k := len(l.batchOff), len(l.crossOff), len(r.crossOff), len(l.kOff)
			p, ok := NewDotProblem(lhs, rhs, tc.lhsDims, tc.rhsDims, tc.lc, tc.lb, tc.rc, tc.rb, batch, m, n, k)
			if !ok {
				b.Fatal("NewDotProblem refused the product")
			}
			out := make([]float32, batch*m*n)
			p.Run(out)
			c0 := procCPU()
			b.ResetTimer()
			for range b.N {
				p.Run(out)
			}
			flop := 2 * float64(batch*m*n*k) * float64(b.N)
			b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flop/(procCPU()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
}
