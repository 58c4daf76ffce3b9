package kernels

import (
	"math/rand"
	"testing"
)

// The packed GEMM alone (no backend, no buffers) on the MNIST-CNN step's products, float32, every core:
// what gobackend's BenchmarkGemm measures less the executor around it.
// Rerun: go test ./gobackend/kernels/ -run XXX -bench PackedGemm -benchtime 5x
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
			b.ResetTimer()
			for range b.N {
				p.Run(out)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
