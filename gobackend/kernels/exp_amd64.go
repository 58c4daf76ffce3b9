package kernels

import (
	"math"

	"golang.org/x/sys/cpu"
)

// HasExpAVX2: the vector exp and logistic (exp_amd64.s) reproduce math.Exp's FMA path, which the math
// package takes when the CPU has AVX and FMA; they need AVX2 for the integer lanes. HasErfAVX2: the
// vector erf also reproduces math.Erf's Go code operation by operation, which holds when the compiler
// emits no fused multiply-adds for it; erfVecAgrees checks that on values from every branch.
var (
	HasExpAVX2 = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	HasErfAVX2 = HasExpAVX2 && erfVecAgrees()
)

//go:noescape
func ErfF32(n int, dst, src *float32) int

//go:noescape
func ErfF64(n int, dst, src *float64) int

//go:noescape
func ExpF32(n int, dst, src *float32, logistic bool) int

//go:noescape
func ExpF64(n int, dst, src *float64, logistic bool) int

// erfVecAgrees runs the vector erf on values from each of math.Erf's branches (and their borders)
// and reports whether every result has math.Erf's bits.
func erfVecAgrees() bool {
	xs := []float64{0, math.Copysign(0, -1), 1e-310, 3e-9, -1e-5, 0.3, -0.84374, 0.84375, 1, -1.2499, 1.25, 2, -2.857, 2.858, 4,
		-5.999, 6, 7, 0.5, -0.7, 1.1, 1.9, -3.3, 5.5}
	for len(xs)%4 != 0 {
		xs = append(xs, 0.1)
	}
	out := make([]float64, len(xs))
	if ErfF64(len(xs), &out[0], &xs[0]) != len(xs) {
		return false
	}
	for i, x := range xs {
		if math.Float64bits(out[i]) != math.Float64bits(math.Erf(x)) {
			return false
		}
	}
	return true
}
