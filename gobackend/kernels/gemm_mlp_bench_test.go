package kernels

import (
	"math/rand"
	"testing"
)

// The MLP net's products at batch 128 (784 -> 512 -> 256 -> 10) as its training step emits them:
// forwards, kernel gradients (batch contracted) and input gradients (B transposed). GFLOP/cpu-s as in
// PackedGemm (docs/benchmarks.md compares them across kernels: TRAINER_GEMM_KERNEL=avx512).
// Rerun: go test ./gobackend/kernels/ -run XXX -bench MLPGemm -benchtime 300x -cpu 1
func BenchmarkMLPGemm(b *testing.B) {
	for _, tc := range []struct {
		name             string
		lhsDims, rhsDims []int
		lc, rc           []int
	}{
		{"fwd-128x784x512", []int{128, 784}, []int{784, 512}, []int{1}, []int{0}},
		{"kgrad-784x128x512", []int{128, 784}, []int{128, 512}, []int{0}, []int{0}},
		{"dx-128x256x512-bt", []int{128, 256}, []int{512, 256}, []int{1}, []int{1}},
		{"fwd-128x512x256", []int{128, 512}, []int{512, 256}, []int{1}, []int{0}},
		{"kgrad-512x128x256", []int{128, 512}, []int{128, 256}, []int{0}, []int{0}},
		{"kgrad-256x128x10", []int{128, 256}, []int{128, 10}, []int{0}, []int{0}},
		{"fwd-128x256x10", []int{128, 256}, []int{256, 10}, []int{1}, []int{0}},
		{"dx-128x10x256-bt", []int{128, 10}, []int{256, 10}, []int{1}, []int{1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, k := tc.lhsDims[1-tc.lc[0]], tc.lhsDims[tc.lc[0]]
			n := tc.rhsDims[1-tc.rc[0]]
			rng := rand.New(rand.NewSource(1))
			lhs, rhs := make([]float32, Prod(tc.lhsDims)), make([]float32, Prod(tc.rhsDims))
			for i := range lhs {
				lhs[i] = rng.Float32()
			}
			for i := range rhs {
				rhs[i] = rng.Float32()
			}
			p, ok := NewDotProblem(lhs, rhs, tc.lhsDims, tc.rhsDims, tc.lc, nil, tc.rc, nil, 1, m, n, k)
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
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/(procCPU()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
}
