package kernels

import (
	"os"
	"slices"
	"testing"
)

// On arm64 the GEMM runs the NEON kernels (unless TRAINER_GEMM_KERNEL=go asks for the portable one),
// and the kernel tests check them: the arm64 tests under emulation cannot pass on the portable kernel
// alone.
func TestGemmDefaultKernelIsNEON(t *testing.T) {
	want, want64 := gemmKernelNEON12x8, gemmKernelNEON6x8F64
	if os.Getenv("TRAINER_GEMM_KERNEL") == "go" {
		want, want64 = gemmKernelGo4x8, gemmKernelGo4x8F64
	}
	if gemmDefaultKernel != want || gemmDefaultKernel64 != want64 {
		t.Fatalf("default kernels %q %d×%d and %q %d×%d, want %q and %q", gemmDefaultKernel.name, gemmDefaultKernel.mr, gemmDefaultKernel.nr,
			gemmDefaultKernel64.name, gemmDefaultKernel64.mr, gemmDefaultKernel64.nr, want.name, want64.name)
	}
	if !slices.Contains(gemmAsmKernels(), gemmKernelNEON12x8) || !slices.Contains(gemmAsmKernels64(), gemmKernelNEON6x8F64) {
		t.Fatal("the NEON kernels are not among the kernels the GEMM tests check")
	}
}
