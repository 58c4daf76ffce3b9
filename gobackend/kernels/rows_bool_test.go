package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// CompareRow and LogicalRow give Go's operators value by value (NaN compares false, ties count for
// >= and <=) for every stride combination and length, kernels and tails alike.
func TestCompareAndLogicalRows(t *testing.T) {
	rng := rand.New(rand.NewSource(81))
	vals := []float32{0, 1, -1, 6, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	pick := func() float32 {
		if rng.Intn(3) == 0 {
			return vals[rng.Intn(len(vals))]
		}
		return float32(rng.NormFloat64())
	}
	ops := map[FuseKind]func(x, y float32) bool{
		FuseGreater: func(x, y float32) bool { return x > y }, FuseLess: func(x, y float32) bool { return x < y },
		FuseGreaterEq: func(x, y float32) bool { return x >= y }, FuseLessEq: func(x, y float32) bool { return x <= y },
	}
	logic := map[FuseKind]func(x, y bool) bool{
		FuseAnd: func(x, y bool) bool { return x && y }, FuseOr: func(x, y bool) bool { return x || y },
		FuseNot: func(x, _ bool) bool { return !x },
	}
	for _, n := range []int{1, 7, 8, 9, 31, 64, 517} {
		a, b := make([]float32, n), make([]float32, n)
		ba, bb := make([]bool, n), make([]bool, n)
		for i := range a {
			a[i], b[i] = pick(), pick()
			if rng.Intn(4) == 0 {
				b[i] = a[i]
			}
			ba[i], bb[i] = rng.Intn(2) == 0, rng.Intn(2) == 0
		}
		for _, st := range [][2]int{{1, 1}, {1, 0}, {0, 1}, {0, 0}} {
			for k, op := range ops {
				dst := make([]bool, n)
				CompareRow(k, dst, a, b, st[0], st[1])
				for i := range dst {
					if want := op(a[i*st[0]], b[i*st[1]]); dst[i] != want {
						t.Fatalf("%s n=%d strides %v [%d]: %v %v -> %v, want %v", k, n, st, i, a[i*st[0]], b[i*st[1]], dst[i], want)
					}
				}
			}
			for k, op := range logic {
				dst := make([]bool, n)
				LogicalRow(k, dst, ba, bb, st[0], st[1])
				for i := range dst {
					if want := op(ba[i*st[0]], bb[i*st[1]]); dst[i] != want {
						t.Fatalf("%s n=%d strides %v [%d]: -> %v, want %v", k, n, st, i, dst[i], want)
					}
				}
			}
		}
	}
}
