package kernels

import (
	"math/rand/v2"
	"runtime"
	"time"
)

// Peak is the machine's float32 matrix-multiply rate measured with the backend's own GEMM: what a
// step's GFLOP/s is put beside (`trainer bench`), so "close to the limit" is a number.
type Peak struct {
	GFLOPS  float64 // Best rate over the repetitions.
	N       int     // The product's size: n×n by n×n.
	Threads int
	Kernel  string // The micro-kernel (AVX-512, AVX2+FMA or portable Go).
}

// MeasurePeak multiplies two random n×n float32 matrices reps times on every core and returns the
// best rate (2n³ flops per product).
func MeasurePeak(n, reps int) Peak {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = rng.Float32()-0.5, rng.Float32()-0.5
	}
	// A row-major, B read by columns (B^T row-major): the layout of a DotGeneral contracting both
	// operands' last axes, packed like any other.
	lhs := newGemmOperand(a, []int{n, n}, []int{1}, nil)
	rhs := newGemmOperand(b, []int{n, n}, []int{1}, nil)
	p := &gemmProblem{lhs: lhs, rhs: rhs, batch: 1, m: n, n: n, k: n}
	best := time.Duration(1 << 62)
	for range max(reps, 1) {
		start := time.Now()
		p.Run(c)
		best = min(best, time.Since(start))
	}
	return Peak{GFLOPS: 2 * float64(n) * float64(n) * float64(n) / best.Seconds() / 1e9, N: n,
		Threads: runtime.GOMAXPROCS(0), Kernel: GemmKernelName()}
}
