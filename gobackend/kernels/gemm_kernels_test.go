package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// Every kernel's tile fits the workers' scratch (tile, row offsets and packed A block), and a column
// block of whole panels fits the packed-B buffer.
func TestGemmKernelsFitScratch(t *testing.T) {
	check := func(name string, mr, nr, mc, nc int) {
		if mr > gemmMaxMR || nr > gemmMaxNR || mc > gemmMaxMC || nc > gemmNC || nc%nr != 0 || mc%mr != 0 {
			t.Errorf("%s %d×%d: mc %d, nc %d do not fit the scratch (max %d×%d, mc %d, nc %d)", name, mr, nr, mc, nc, gemmMaxMR, gemmMaxNR, gemmMaxMC, gemmNC)
		}
	}
	for _, k := range append([]*gemmKernel{gemmKernelGo4x8, gemmDefaultKernel}, gemmAsmKernels()...) {
		check(k.name, k.mr, k.nr, k.mc(), k.nc())
	}
	for _, k := range append([]*gemmKernel64{gemmKernelGo4x8F64, gemmDefaultKernel64}, gemmAsmKernels64()...) {
		check(k.name, k.mr, k.nr, k.mc(), k.nc())
	}
}

// The kernels on shapes around their tile's edges (one short of a tile, a tile, one past, two tiles
// and one past), K of one step to two blocks, adding into output rows spaced with gaps in reverse
// order: with small integers every product and sum is exact, so the result must equal the reference
// exactly and the gaps stay untouched; with random values each element stays within the rounding
// bound of a k-term sum. The generic 5×12 tile checks column blocks of a width that does not divide
// gemmNC.
func TestGemmKernelTileEdges(t *testing.T) {
	kernels := append([]*gemmKernel{gemmKernelGo4x8, gemmKernelGoGeneric(5, 12)}, gemmAsmKernels()...)
	for _, kern := range kernels {
		t.Run(fmt.Sprintf("float32/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkTileEdges(t, kern, 0x1p-24) })
	}
	kernels64 := append([]*gemmKernel64{gemmKernelGo4x8F64, gemmKernelGoGenericOf[float64](5, 12)}, gemmAsmKernels64()...)
	for _, kern := range kernels64 {
		t.Run(fmt.Sprintf("float64/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkTileEdges(t, kern, 0x1p-53) })
	}
}

// checkTileEdges runs kern over the edge shapes; u is the unit roundoff of T.
func checkTileEdges[T Float](t *testing.T, kern *gemmKernelOf[T], u float64) {
	rng := rand.New(rand.NewSource(int64(31*kern.mr + kern.nr)))
	edges := func(w int) []int { return []int{1, max(w-1, 1), w, w + 1, 2*w + 1} }
	type shape struct{ m, n, k int }
	var shapes []shape
	for _, m := range edges(kern.mr) {
		for _, n := range edges(kern.nr) {
			for _, k := range []int{1, 2, 3, 7, 16, 300, gemmKC + 1} {
				shapes = append(shapes, shape{m, n, k})
			}
		}
	}
	shapes = append(shapes, shape{kern.mr + 1, gemmNC + 3*kern.nr + 1, gemmKC}) // Two full column blocks.
	for _, s := range shapes {
		for _, integers := range []bool{true, false} {
			value := func() T {
				if integers {
					return T(rng.Intn(15) - 7)
				}
				return T(rng.NormFloat64())
			}
			lhs, rhs := make([]T, s.m*s.k), make([]T, s.k*s.n)
			for i := range lhs {
				lhs[i] = value()
			}
			for i := range rhs {
				rhs[i] = value()
			}
			// Output rows in reverse order, each followed by a gap of 3 sentinels.
			const gap = 3
			sentinel := T(12345)
			stride := s.n + gap
			out := make([]T, s.m*stride)
			rowOff := make([]int, s.m)
			for i := range s.m {
				rowOff[i] = (s.m - 1 - i) * stride
				for j := range stride {
					out[rowOff[i]+j] = sentinel
					if j < s.n {
						out[rowOff[i]+j] = value()
					}
				}
			}
			before := append([]T(nil), out...)
			for _, split := range []gemmSplit{splitNone, splitShared} {
				copy(out, before)
				p := &GemmProblemOf[T]{
					lhs:   newGemmOperand(lhs, []int{s.m, s.k}, []int{1}, nil),
					rhs:   newGemmOperand(rhs, []int{s.k, s.n}, []int{0}, nil),
					batch: 1, m: s.m, n: s.n, k: s.k,
					rowOff: rowOff, batchStride: len(out), accumulate: true,
					threads: 3, kernel: kern, forceSplit: split,
				}
				p.Run(out)
				for i := range s.m {
					for j := range stride {
						at := rowOff[i] + j
						if j >= s.n {
							if out[at] != sentinel {
								t.Fatalf("m %d n %d k %d split %d: gap after row %d overwritten: %v", s.m, s.n, s.k, split, i, out[at])
							}
							continue
						}
						want, bound := float64(before[at]), math.Abs(float64(before[at]))
						for p := range s.k {
							Prod := float64(lhs[i*s.k+p]) * float64(rhs[p*s.n+j])
							want += Prod
							bound += math.Abs(Prod)
						}
						bound *= float64(s.k+2) * u
						if integers {
							bound = 0
						}
						if d := math.Abs(float64(out[at]) - want); !(d <= bound) {
							t.Fatalf("m %d n %d k %d split %d integers %v: out[%d][%d] = %v, want %v (bound %g)", s.m, s.n, s.k, split, integers, i, j, out[at], want, bound)
						}
					}
				}
			}
		}
	}
}

// packPanels gives the gather's values (zeros past the last row) when the contracting offsets come in
// runs of consecutive values (a kernel's input channels at each kernel position, flipped or not), in
// runs too short for the transposes, or in one run; for every panel width and a short last panel.
func TestPackPanelsRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(67))
	data := make([]float32, 20000)
	for i := range data {
		data[i] = float32(i)
	}
	runOffsets := func(runs, length, gap int) []int {
		var ks []int
		for r := range runs {
			for j := range length {
				ks = append(ks, (runs-1-r)*gap+j) // Runs in decreasing order, as a flipped kernel's.
			}
		}
		return ks
	}
	for _, ks := range [][]int{runOffsets(9, 16, 700), runOffsets(4, 3, 50), runOffsets(1, 37, 0), runOffsets(3, 8, 9)} {
		for _, w := range []int{6, 14, 32} {
			rows := make([]int, 2*w+3)
			for i := range rows {
				rows[i] = 7000 + rng.Intn(6000)
			}
			kl := len(ks)
			panels := (len(rows) + w - 1) / w
			dst := make([]float32, panels*kl*w)
			for i := range dst {
				dst[i] = -1 // Stale values must be overwritten.
			}
			packPanels(dst, data, 11, rows, ks, w)
			for q := range panels {
				for k := range kl {
					for r := range w {
						var want float32
						if i := q*w + r; i < len(rows) {
							want = data[11+rows[i]+ks[k]]
						}
						if got := dst[q*kl*w+k*w+r]; got != want {
							t.Fatalf("ks %v w %d: panel %d k %d row %d = %v, want %v", ks[:8], w, q, k, r, got, want)
						}
					}
				}
			}
		}
	}
}
