package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// refSelect is SelectWindow's rule written plainly: the first maximal (minimal) cell, a NaN replacing
// any earlier choice.
func refSelect[T Ordered](x []T, offs []int32, j int, isMin bool) int32 {
	at := int(offs[0]) + j
	for _, o := range offs[1:] {
		v, best := x[int(o)+j], x[at]
		if v != v || (!isMin && v > best) || (isMin && v < best) {
			at = int(o) + j
		}
	}
	return int32(at)
}

// SelectWindow (the AVX2 kernel for whole groups of 8 float32 values, Go for the rest and the other
// types) picks refSelect's cell for every length up to 40, window sizes 1 to 9, operands drawn from a few
// values (ties), -0 beside 0, ±inf and NaNs.
func TestSelectWindow(t *testing.T) {
	rng := rand.New(rand.NewSource(52))
	values := []float64{0, math.Copysign(0, -1), 1, -1, 2, math.Inf(1), math.Inf(-1)}
	for n := range 41 {
		for cells := 1; cells <= 9; cells++ {
			size := cells*n + 11
			x32, x64, xi := make([]float32, size), make([]float64, size), make([]int32, size)
			for i := range x32 {
				v := values[rng.Intn(len(values))]
				if rng.Intn(15) == 0 {
					v = math.NaN()
				}
				x32[i], x64[i] = float32(v), v
				xi[i] = int32(rng.Intn(3))
			}
			offs := make([]int32, cells)
			for c := range offs { // Cells overlapping and not, in any order.
				offs[c] = int32(rng.Intn(size - n + 1))
			}
			for _, isMin := range []bool{false, true} {
				check := func(name string, got []int32, want func(j int) int32) {
					for j := range got {
						if w := want(j); got[j] != w {
							t.Fatalf("%s n=%d cells=%d min=%v [%d]: cell %d, want %d", name, n, cells, isMin, j, got[j], w)
						}
					}
				}
				arg := make([]int32, n)
				SelectWindow(x32, offs, arg, isMin)
				check("float32", arg, func(j int) int32 { return refSelect(x32, offs, j, isMin) })
				SelectWindow(x64, offs, arg, isMin)
				check("float64", arg, func(j int) int32 { return refSelect(x64, offs, j, isMin) })
				SelectWindow(xi, offs, arg, isMin)
				check("int32", arg, func(j int) int32 { return refSelect(xi, offs, j, isMin) })
			}
		}
	}
}
