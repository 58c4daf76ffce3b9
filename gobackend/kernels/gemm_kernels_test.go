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

// floatBits is a value's bit pattern, to compare results exactly (signed zeros and NaN payloads too).
func floatBits[T Float](v T) uint64 {
	if IsFloat64[T]() {
		return math.Float64bits(float64(v))
	}
	return uint64(math.Float32bits(float32(v)))
}

// A kernel's store (the first K block) writes the bits that clearing the tile and adding gave, stale
// values in c unread, in every form (A packed, A in place, A and B in place): on random terms, on
// products of -0 and +0, on terms that cancel exactly (a sum of +0), on negative products that
// underflow (an FMA's sum of -0, which clear-then-add turned into +0) and on Inf times 0 (NaN).
func TestGemmKernelStoreBits(t *testing.T) {
	for _, kern := range append([]*gemmKernel{gemmKernelGo4x8, gemmKernelGoGeneric(5, 12)}, gemmAsmKernels()...) {
		t.Run(fmt.Sprintf("float32/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkKernelStore(t, kern, 1e-30) })
	}
	for _, kern := range append([]*gemmKernel64{gemmKernelGo4x8F64, gemmKernelGoGenericOf[float64](5, 12)}, gemmAsmKernels64()...) {
		t.Run(fmt.Sprintf("float64/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkKernelStore(t, kern, 1e-200) })
	}
}

// checkKernelStore runs kern's forms with and without store; tiny squares to below the smallest
// subnormal of T.
func checkKernelStore[T Float](t *testing.T, kern *gemmKernelOf[T], tiny float64) {
	mr, nr := kern.mr, kern.nr
	if mr < 4 || nr < 5 {
		t.Fatalf("tile %d×%d too small for the special rows and columns", mr, nr)
	}
	rng := rand.New(rand.NewSource(int64(7*mr + nr)))
	negZero := T(math.Copysign(0, -1))
	for _, k := range []int{1, 2, 7, 64} {
		// a: k steps of mr values (packed), b: k steps of nr values.
		a, b := make([]T, k*mr), make([]T, k*nr)
		for p := range k {
			for r := range mr {
				a[p*mr+r] = T(rng.NormFloat64())
			}
			for j := range nr {
				b[p*nr+j] = T(rng.NormFloat64())
			}
			b[p*nr+0], b[p*nr+1], b[p*nr+2], b[p*nr+3], b[p*nr+4] = 1.5, -2, T(tiny), 1.25, 0
			a[p*mr+0] = negZero         // Row 0: -0 times column 0 (-0 terms), column 1 (+0 terms).
			a[p*mr+1] = T(-tiny)        // Row 1, column 2: negative products that underflow.
			a[p*mr+2] = T(1 - 2*(p%2))  // Row 2, column 3: ±1.25 in turn, +0 after an even number of steps.
			a[p*mr+3] = T(math.Inf(+1)) // Row 3, column 4: Inf·0, NaN.
		}
		// The tile's rows in reverse order, 3 values apart, in a c full of stale values.
		stride := nr + 3
		rows := make([]int, mr)
		for r := range rows {
			rows[r] = (mr - 1 - r) * stride
		}
		// A read in place (row r at r·k, step p at p) and B in place (step p at p·nr), as the direct
		// forms read them.
		data := make([]T, mr*k)
		rowsA, koff, koffB := make([]int, mr), make([]int, k), make([]int, k)
		for r := range mr {
			rowsA[r] = r * k
			for p := range k {
				data[r*k+p] = a[p*mr+r]
			}
		}
		for p := range k {
			koff[p], koffB[p] = p, p*nr
		}
		forms := map[string]func(c []T, store bool){"packed": func(c []T, store bool) { kern.fn(k, a, b, c, rows, store) }}
		if kern.direct != nil {
			forms["direct"] = func(c []T, store bool) { kern.direct(k, data, rowsA, koff, b, c, rows, store) }
		}
		if kern.directB != nil {
			forms["directB"] = func(c []T, store bool) { kern.directB(k, data, rowsA, koff, b, koffB, c, rows, store) }
		}
		for name, run := range forms {
			want, got := make([]T, mr*stride), make([]T, mr*stride)
			for i := range got {
				got[i] = T(math.NaN())
				if i%stride >= nr {
					got[i], want[i] = 7, 7 // The gaps between rows stay as they are.
				}
			}
			run(want, false)
			run(got, true)
			for i := range want {
				if floatBits(got[i]) != floatBits(want[i]) {
					t.Fatalf("k %d %s: c[%d] stored %v (%#x), clear-then-add gave %v (%#x)", k, name, i, got[i], floatBits(got[i]), want[i], floatBits(want[i]))
				}
			}
			at := func(r, j int) T { return want[rows[r]+j] }
			if floatBits(at(0, 0)) != 0 || floatBits(at(0, 1)) != 0 || floatBits(at(1, 2)) != 0 || !math.IsNaN(float64(at(3, 4))) {
				t.Fatalf("k %d %s: special values %v %v %v %v, want +0 +0 +0 NaN", k, name, at(0, 0), at(0, 1), at(1, 2), at(3, 4))
			}
			if k%2 == 0 && floatBits(at(2, 3)) != 0 {
				t.Fatalf("k %d %s: cancelling terms gave %v, want +0", k, name, at(2, 3))
			}
		}
	}
}

// A product written with the first K block stored (accumulate unset, over stale values) has the bits of
// the same product added into a cleared output, for every kernel (each form: A packed or in place, B
// in place), every split and shapes around the tile's edges (edge tiles go through the scratch tile),
// with K within one block and across blocks; and a product with no contracting index is zeros.
func TestGemmFirstBlockStoreMatchesAccumulate(t *testing.T) {
	kernels := append([]*gemmKernel{gemmKernelGo4x8, gemmKernelGoGeneric(5, 12)}, gemmAsmKernels()...)
	for _, k := range gemmAsmKernels() {
		if k.direct != nil {
			packed := *k
			packed.direct, packed.directB, packed.name = nil, nil, k.name+" packed"
			kernels = append(kernels, &packed)
		}
	}
	for _, kern := range kernels {
		t.Run(fmt.Sprintf("float32/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkFirstBlockStore(t, kern) })
	}
	for _, kern := range append([]*gemmKernel64{gemmKernelGo4x8F64}, gemmAsmKernels64()...) {
		t.Run(fmt.Sprintf("float64/%s-%dx%d", kern.name, kern.mr, kern.nr), func(t *testing.T) { checkFirstBlockStore(t, kern) })
	}
}

func checkFirstBlockStore[T Float](t *testing.T, kern *gemmKernelOf[T]) {
	rng := rand.New(rand.NewSource(int64(11*kern.mr + kern.nr)))
	ks := []int{0, 3, gemmKC + 5}
	if !testing.Short() {
		ks = append(ks, gemmKC, 2*gemmKC+1)
	}
	for _, m := range []int{max(kern.mr-1, 1), kern.mr, 2*kern.mr + 1} {
		for _, n := range []int{max(kern.nr-1, 1), kern.nr, 2*kern.nr + 1} {
			for _, k := range ks {
				lhs, rhs := make([]T, m*k), make([]T, k*n)
				for i := range lhs {
					lhs[i] = T(rng.NormFloat64())
					if i%5 == 0 {
						lhs[i] = T(math.Copysign(0, -1))
					}
				}
				for i := range rhs {
					rhs[i] = T(rng.NormFloat64())
				}
				splits := []gemmSplit{splitNone, splitBatch, splitShared, splitK, splitRows, splitCols}
				if k == 0 {
					splits = []gemmSplit{splitAuto} // No K to split.
				}
				for _, split := range splits {
					run := func(out []T, accumulate bool) {
						p := &GemmProblemOf[T]{lhs: newGemmOperand(lhs, []int{m, k}, []int{1}, nil), rhs: newGemmOperand(rhs, []int{k, n}, []int{0}, nil),
							batch: 1, m: m, n: n, k: k, accumulate: accumulate, threads: 2, kernel: kern, forceSplit: split}
						p.Run(out)
					}
					want, got := make([]T, m*n), make([]T, m*n)
					for i := range got {
						got[i] = T(math.NaN())
					}
					run(want, true)
					run(got, false)
					for i := range want {
						if floatBits(got[i]) != floatBits(want[i]) {
							t.Fatalf("m %d n %d k %d split %d: out[%d] stored %v, accumulated into zeros %v", m, n, k, split, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
