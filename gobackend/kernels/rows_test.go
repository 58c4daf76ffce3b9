package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// The row functions (AVX2 kernels for whole groups of 8 where the CPU has them, Go loops for the rest)
// give the Go loops' values bit for bit, special values included, for every length up to 40 and every
// vector/scalar combination; on CPUs without AVX2 this compares the Go loops with themselves.
func TestRowKernelsMatchGo(t *testing.T) {
	if !hasRowsAVX2 {
		t.Log("no AVX2: only the Go loops run")
	}
	rng := rand.New(rand.NewSource(71))
	// Two NaNs of different payloads and signs, so that Max and Min show which operand's NaN they return.
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0xffc00123), 3e38, 1e-40}
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if rng.Intn(6) == 0 {
				v[i] = specials[rng.Intn(len(specials))]
			}
		}
		return v
	}
	same := func(x, y float32) bool {
		return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
	}
	for n := range 41 {
		for _, sa := range []int{0, 1} {
			for _, sb := range []int{0, 1} {
				a, b := vals(max(n*sa, 1)), vals(max(n*sb, 1))
				for op := BinAdd; op <= BinMin; op++ {
					got := make([]float32, n)
					BinaryRow(op, got, a, b, sa, sb)
					for i := range got {
						x, y := a[i*sa], b[i*sb]
						want := [...]float32{x + y, x - y, x * y, x / y, max(x, y), min(x, y)}[op]
						exact := op == BinMax || op == BinMin // Go's max and min say which NaN: the second operand's.
						if !same(got[i], want) || (exact && math.Float32bits(got[i]) != math.Float32bits(want)) {
							t.Fatalf("%s n=%d sa=%d sb=%d [%d]: %v op %v = %v, want %v", FuseKind(op), n, sa, sb, i, x, y, got[i], want)
						}
					}
				}
				gt := make([]bool, n)
				GreaterRow(gt, a, b, sa, sb)
				for i := range gt {
					if gt[i] != (a[i*sa] > b[i*sb]) {
						t.Fatalf("GreaterThan n=%d sa=%d sb=%d [%d]: %v > %v = %v", n, sa, sb, i, a[i*sa], b[i*sb], gt[i])
					}
				}
				cond := make([]bool, n)
				for i := range cond {
					cond[i] = rng.Intn(2) == 0
				}
				w := make([]float32, n)
				WhereRow(w, cond, a, b, 1, sa, sb)
				for i := range w {
					want := b[i*sb]
					if cond[i] {
						want = a[i*sa]
					}
					if !same(w[i], want) {
						t.Fatalf("Where n=%d sa=%d sb=%d [%d] = %v, want %v", n, sa, sb, i, w[i], want)
					}
				}
			}
		}
		o, x := vals(n), vals(n)
		want := make([]float32, n)
		for i := range want {
			want[i] = o[i] + x[i]
		}
		AccumulateRow(o, x)
		if fmt.Sprint(o) != fmt.Sprint(want) {
			t.Fatalf("AccumulateRow n=%d: %v, want %v", n, o, want)
		}
	}
}

// packColumns8 (the AVX2 8×8 transpose for whole groups of 8, Go for the rest) writes exactly the
// transposed values, and nothing outside its eight columns.
func TestPackColumns8(t *testing.T) {
	rng := rand.New(rand.NewSource(73))
	src := make([]float32, 4000)
	for i := range src {
		src[i] = float32(i)
	}
	for _, n := range []int{0, 1, 7, 8, 9, 16, 23, 64} {
		for _, w := range []int{8, 14, 32} {
			var offs [8]int
			for r := range offs {
				offs[r] = rng.Intn(len(src) - n)
			}
			panel := make([]float32, max(n, 1)*w)
			for i := range panel {
				panel[i] = -1
			}
			packColumns8(panel, src, &offs, n, w)
			for k := range n {
				for c := range w {
					want := float32(-1)
					if c < 8 {
						want = src[offs[c]+k]
					}
					if got := panel[k*w+c]; got != want {
						t.Fatalf("n=%d w=%d: panel[%d][%d] = %v, want %v", n, w, k, c, got, want)
					}
				}
			}
		}
	}
}

// AddRowSums gives each row's sequential sum from its output's value, bit for bit, for every count of
// rows (the groups of four and two, and the last one).
func TestAddRowSums(t *testing.T) {
	rng := rand.New(rand.NewSource(83))
	for rows := range 10 {
		for _, n := range []int{1, 3, 17, 192} {
			x := make([]float32, rows*n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(8)-4)))
			}
			out, want := make([]float32, rows), make([]float32, rows)
			for i := range out {
				out[i] = float32(rng.NormFloat64())
				want[i] = out[i]
				for _, v := range x[i*n : (i+1)*n] {
					want[i] += v
				}
			}
			AddRowSums(out, x, n)
			for i := range out {
				if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
					t.Fatalf("rows %d n %d: row %d sum %v, want %v", rows, n, i, out[i], want[i])
				}
			}
		}
	}
}

// SumRows adds the rows in order, exactly as sequential additions do, special values included.
func TestSumRows(t *testing.T) {
	rng := rand.New(rand.NewSource(79))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 70} {
		for _, rows := range []int{0, 1, 2, 5, 17} {
			stride := n + rng.Intn(5)
			x := make([]float32, rows*stride+n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 1e3)
				if rng.Intn(20) == 0 {
					x[i] = float32(math.Inf(1 - 2*rng.Intn(2)))
				}
			}
			o := make([]float32, n)
			want := make([]float32, n)
			for j := range o {
				o[j] = float32(rng.NormFloat64())
				want[j] = o[j]
				for r := range rows {
					want[j] += x[r*stride+j]
				}
			}
			SumRows(o, x, rows, stride)
			if fmt.Sprint(o) != fmt.Sprint(want) {
				t.Fatalf("n=%d rows=%d: %v, want %v", n, rows, o, want)
			}
		}
	}
}
