package kernels

import "os"

// gemmKernelNEON is the float32 12×8 tile in NEON assembly (gemm_arm64.s): 24 accumulators of 4 floats;
// each packed step loads 12 values of A and 8 of B and multiplies every row's two vectors of B by its
// lane of A (by-element FMLA). Every arm64 CPU has NEON (Advanced SIMD), so there is no feature test.
//
//go:noescape
func gemmKernelNEON(k int, a, b, c *float32, rows *int)

// gemmKernelNEONF64 is the float64 6×8 tile (gemm_arm64.s): the same 24 accumulators, 2 doubles each.
//
//go:noescape
func gemmKernelNEONF64(k int, a, b, c *float64, rows *int)

// The NEON kernels always add into c: a store (the first K block) clears the tile's rows first, which
// gives the same bits as the amd64 kernels' store of +0 plus the sum.
var gemmKernelNEON12x8 = &gemmKernel{name: "NEON", mr: 12, nr: 8, fn: func(k int, a, b, c []float32, rows []int, store bool) {
	checkKernelArgs(k, 12, 8, a, b, c, rows)
	if store {
		clearTileRows(c, rows[:12], 8)
	}
	gemmKernelNEON(k, &a[0], &b[0], &c[0], &rows[0])
}}

var gemmKernelNEON6x8F64 = &gemmKernel64{name: "NEON float64", mr: 6, nr: 8, fn: func(k int, a, b, c []float64, rows []int, store bool) {
	checkKernelArgs(k, 6, 8, a, b, c, rows)
	if store {
		clearTileRows(c, rows[:6], 8)
	}
	gemmKernelNEONF64(k, &a[0], &b[0], &c[0], &rows[0])
}}

// gemmAsmKernels are the assembly kernels this CPU runs, for the tests.
func gemmAsmKernels() []*gemmKernel { return []*gemmKernel{gemmKernelNEON12x8} }

// gemmAsmKernels64 are the float64 assembly kernels this CPU runs, for the tests.
func gemmAsmKernels64() []*gemmKernel64 { return []*gemmKernel64{gemmKernelNEON6x8F64} }

func init() {
	gemmDefaultKernel, gemmDefaultKernel64 = gemmKernelNEON12x8, gemmKernelNEON6x8F64
	if os.Getenv("TRAINER_GEMM_KERNEL") == "go" {
		gemmDefaultKernel, gemmDefaultKernel64 = gemmKernelGo4x8, gemmKernelGo4x8F64
	}
}
