package pjrt

import "golang.org/x/sys/cpu"

// gemmKernelAVX2 is gemmKernelGo in AVX2+FMA assembly (gemm_amd64.s): 12 ymm accumulators hold the
// 6×16 tile; each packed step broadcasts 6 values of A against two 8-float vectors of B.
//
//go:noescape
func gemmKernelAVX2(k int, a, b, tile *float32)

func gemmKernelAVX2Go(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	_, _ = a[k*gemmMR-1], b[k*gemmNR-1] // The assembly reads this much.
	gemmKernelAVX2(k, &a[0], &b[0], &tile[0])
}

// hasAVX2FMA: x/sys/cpu also checks that the OS saves the ymm registers.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func init() {
	if hasAVX2FMA {
		gemmMicroKernel = gemmKernelAVX2Go
	}
}
