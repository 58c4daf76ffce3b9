package kernels

import "testing"

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
		b.Run(tc.name, func(b *testing.B) { benchDotProduct(b, tc.lhsDims, tc.rhsDims, tc.lc, tc.rc) })
	}
}
