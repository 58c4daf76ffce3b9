package kernels

import (
	"os"

	"golang.org/x/sys/cpu"
)

// Each assembly kernel's last argument, store, writes the tile instead of adding it (gemmKernelOf).

// gemmKernelAVX2 is gemmKernelGo in AVX2+FMA assembly (gemm_amd64.s): 12 ymm accumulators hold the
// 6×16 tile; each packed step broadcasts 6 values of A against two 8-float vectors of B.
//
//go:noescape
func gemmKernelAVX2(k int, a, b, c *float32, rows *int, store bool)

// gemmKernelAVX512 is the 14×32 tile in AVX-512 (gemm_amd64.s): 28 zmm accumulators; each packed
// step broadcasts 14 values of A against two 16-float vectors of B.
//
//go:noescape
func gemmKernelAVX512(k int, a, b, c *float32, rows *int, store bool)

// gemmKernelAVX2Direct is gemmKernelAVX2 reading A in place: row r at step p is data[rowsA[r]+koff[p]].
//
//go:noescape
func gemmKernelAVX2Direct(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)

// gemmKernelAVX512Direct is gemmKernelAVX512 reading A in place: row r at step p is data[rowsA[r]+koff[p]].
//
//go:noescape
func gemmKernelAVX512Direct(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)

// gemmKernelAVX512Wide is the 7×64 tile in AVX-512 (gemm_wide_amd64.s): 28 zmm accumulators; each packed
// step loads four 16-float vectors of B and multiplies them by 7 values of A broadcast from memory.
//
//go:noescape
func gemmKernelAVX512Wide(k int, a, b, c *float32, rows *int, store bool)

// gemmKernelAVX512WideDirect is gemmKernelAVX512Wide reading A in place: row r at step p is
// data[rowsA[r]+koff[p]].
//
//go:noescape
func gemmKernelAVX512WideDirect(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)

// gemmKernelAVX512Half is the 7×32 tile in AVX-512 (gemm_wide_amd64.s): 14 zmm accumulators; each packed
// step broadcasts 7 values of A against two 16-float vectors of B.
//
//go:noescape
func gemmKernelAVX512Half(k int, a, b, c *float32, rows *int, store bool)

// gemmKernelAVX512HalfDirect is gemmKernelAVX512Half reading A in place: row r at step p is
// data[rowsA[r]+koff[p]].
//
//go:noescape
func gemmKernelAVX512HalfDirect(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)

// gemmKernelAVX512DirectB is gemmKernelAVX512Direct reading B in place too: step p's 32 values are
// b[koffB[p]:] (a row-major B's columns, adjacent in memory).
//
//go:noescape
func gemmKernelAVX512DirectB(k int, data *float32, rowsA, koff *int, b *float32, koffB *int, c *float32, rows *int, store bool)

// gemmKernelAVX2F64 and gemmKernelAVX512F64 are the float64 kernels (gemm_f64_amd64.s): the same
// registers hold 6×8 and 14×16 tiles of doubles.
//
//go:noescape
func gemmKernelAVX2F64(k int, a, b, c *float64, rows *int, store bool)

//go:noescape
func gemmKernelAVX512F64(k int, a, b, c *float64, rows *int, store bool)

var gemmKernelAVX2FMA = &gemmKernel{name: "AVX2+FMA", mr: 6, nr: 16, fn: func(k int, a, b, c []float32, rows []int, store bool) {
	checkKernelArgs(k, 6, 16, a, b, c, rows)
	gemmKernelAVX2(k, &a[0], &b[0], &c[0], &rows[0], store)
}, direct: func(k int, data []float32, rowsA, koff []int, b, c []float32, rows []int, store bool) {
	_, _, _, _ = rowsA[5], koff[k-1], b[k*16-1], rows[5]
	for _, r := range rows[:6] {
		_ = c[r : r+16]
	}
	gemmKernelAVX2Direct(k, &data[0], &rowsA[0], &koff[0], &b[0], &c[0], &rows[0], store)
}}

var gemmKernelAVX512F = &gemmKernel{name: "AVX-512", mr: 14, nr: 32, fn: func(k int, a, b, c []float32, rows []int, store bool) {
	checkKernelArgs(k, 14, 32, a, b, c, rows)
	gemmKernelAVX512(k, &a[0], &b[0], &c[0], &rows[0], store)
}, direct: func(k int, data []float32, rowsA, koff []int, b, c []float32, rows []int, store bool) {
	_, _, _, _ = rowsA[13], koff[k-1], b[k*32-1], rows[13]
	for _, r := range rows[:14] {
		_ = c[r : r+32]
	}
	gemmKernelAVX512Direct(k, &data[0], &rowsA[0], &koff[0], &b[0], &c[0], &rows[0], store)
}, directB: func(k int, data []float32, rowsA, koff []int, b []float32, koffB []int, c []float32, rows []int, store bool) {
	_, _, _, _, _ = rowsA[13], koff[k-1], koffB[k-1], b[31], rows[13]
	for _, r := range rows[:14] {
		_ = c[r : r+32]
	}
	gemmKernelAVX512DirectB(k, &data[0], &rowsA[0], &koff[0], &b[0], &koffB[0], &c[0], &rows[0], store)
}}

var gemmKernelAVX512Wide7x64 = &gemmKernel{name: "AVX-512 7×64", mr: 7, nr: 64, fn: func(k int, a, b, c []float32, rows []int, store bool) {
	checkKernelArgs(k, 7, 64, a, b, c, rows)
	gemmKernelAVX512Wide(k, &a[0], &b[0], &c[0], &rows[0], store)
}, direct: func(k int, data []float32, rowsA, koff []int, b, c []float32, rows []int, store bool) {
	_, _, _, _ = rowsA[6], koff[k-1], b[k*64-1], rows[6]
	for _, r := range rows[:7] {
		_ = c[r : r+64]
	}
	gemmKernelAVX512WideDirect(k, &data[0], &rowsA[0], &koff[0], &b[0], &c[0], &rows[0], store)
}}

var gemmKernelAVX512Half7x32 = &gemmKernel{name: "AVX-512 7×32", mr: 7, nr: 32, fn: func(k int, a, b, c []float32, rows []int, store bool) {
	checkKernelArgs(k, 7, 32, a, b, c, rows)
	gemmKernelAVX512Half(k, &a[0], &b[0], &c[0], &rows[0], store)
}, direct: func(k int, data []float32, rowsA, koff []int, b, c []float32, rows []int, store bool) {
	_, _, _, _ = rowsA[6], koff[k-1], b[k*32-1], rows[6]
	for _, r := range rows[:7] {
		_ = c[r : r+32]
	}
	gemmKernelAVX512HalfDirect(k, &data[0], &rowsA[0], &koff[0], &b[0], &c[0], &rows[0], store)
}}

var gemmKernelAVX2FMAF64 = &gemmKernel64{name: "AVX2+FMA float64", mr: 6, nr: 8, fn: func(k int, a, b, c []float64, rows []int, store bool) {
	checkKernelArgs(k, 6, 8, a, b, c, rows)
	gemmKernelAVX2F64(k, &a[0], &b[0], &c[0], &rows[0], store)
}}

var gemmKernelAVX512F64x = &gemmKernel64{name: "AVX-512 float64", mr: 14, nr: 16, fn: func(k int, a, b, c []float64, rows []int, store bool) {
	checkKernelArgs(k, 14, 16, a, b, c, rows)
	gemmKernelAVX512F64(k, &a[0], &b[0], &c[0], &rows[0], store)
}}

// hasAVX2FMA, hasAVX512: x/sys/cpu also checks that the OS saves the ymm/zmm registers.
var (
	hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512  = cpu.X86.HasAVX512F
)

// gemmAsmKernels are the assembly kernels this CPU runs, for the tests.
func gemmAsmKernels() []*gemmKernel {
	var ks []*gemmKernel
	if hasAVX2FMA {
		ks = append(ks, gemmKernelAVX2FMA)
	}
	if hasAVX512 {
		ks = append(ks, gemmKernelAVX512F, gemmKernelAVX512Wide7x64, gemmKernelAVX512Half7x32)
	}
	return ks
}

// gemmAsmKernels64 are the float64 assembly kernels this CPU runs, for the tests.
func gemmAsmKernels64() []*gemmKernel64 {
	var ks []*gemmKernel64
	if hasAVX2FMA {
		ks = append(ks, gemmKernelAVX2FMAF64)
	}
	if hasAVX512 {
		ks = append(ks, gemmKernelAVX512F64x)
	}
	return ks
}

// cpuidVendor returns CPUID leaf 0's vendor string registers (gemm_amd64.s).
func cpuidVendor() (ebx, ecx, edx uint32)

// isAMD reports whether the CPU is AMD's ("AuthenticAMD").
func isAMD() bool {
	ebx, ecx, edx := cpuidVendor()
	return ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163
}

func init() {
	switch {
	case hasAVX512:
		gemmDefaultKernel, gemmDefaultKernel64 = gemmKernelAVX512F, gemmKernelAVX512F64x
		if hasAVX2FMA {
			gemmNarrowKernel = gemmKernelAVX2FMA
		}

		if isAMD() {
			// Zen 4 (AMD's first AVX-512 cores): deep K blocks (gemmKC). Measured there at 1024³ and on
			// convolutions, GOMAXPROCS=1: 1024 against 256 gave 93 -> 99-102 GFLOP/s and 80 -> 94 on a
			// 576-deep one; Intel's AVX-512 cores keep 256 (not measured).
			gemmKC = 1024
			// The 7×64 tile (kernels microbenchmark, thread CPU, GOMAXPROCS=1): CIFAR-8's convolutions
			// 2-4% faster, in-place row-major operands of 1024 or 2048 columns 30-50% (no L1 set
			// conflicts at 7 rows). On Intel's AVX-512 cores, two FMAs a cycle against two or three
			// loads, its broadcast-from-memory FMAs could be load-bound (not measured).
			gemmWideKernel = gemmKernelAVX512Wide7x64
			// 7×32 for products of one 32-wide panel (same microbenchmark, CIFAR-CNN's 32-channel
			// convolutions at batch 64): 85 -> 92 GFLOP/cpu-s forward and input gradient, 68 -> 71 the
			// kernel gradient. With more panels B's twice as many passes cost more (96 columns: 103 -> 98).
			gemmHalfKernel = gemmKernelAVX512Half7x32
		}
	case hasAVX2FMA:
		gemmDefaultKernel, gemmDefaultKernel64 = gemmKernelAVX2FMA, gemmKernelAVX2FMAF64
	}
	switch os.Getenv("TRAINER_GEMM_KERNEL") {
	case "go":
		gemmDefaultKernel, gemmDefaultKernel64, gemmNarrowKernel, gemmWideKernel, gemmHalfKernel = gemmKernelGo4x8, gemmKernelGo4x8F64, nil, nil, nil
	case "avx512":
		gemmWideKernel, gemmHalfKernel = nil, nil // The 14×32 tile only, for comparisons.
	case "avx2":
		if hasAVX2FMA {
			gemmDefaultKernel, gemmDefaultKernel64, gemmNarrowKernel, gemmWideKernel, gemmHalfKernel = gemmKernelAVX2FMA, gemmKernelAVX2FMAF64, nil, nil, nil
		}
	}
}
