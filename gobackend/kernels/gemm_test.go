package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// dotCase is one DotGeneral: operand dims and axes.
type dotCase struct {
	name                           string
	lhsDims, rhsDims               []int
	lhsContract, lhsBatch          []int
	rhsContract, rhsBatch          []int
	wantBatch, wantM, wantN, wantK int
}

func dotCases() []dotCase {
	return []dotCase{
		{name: "matmul", lhsDims: []int{7, 5}, rhsDims: []int{5, 9}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 7, wantN: 9, wantK: 5},
		{name: "transposed-contracting", lhsDims: []int{5, 7}, rhsDims: []int{9, 5}, lhsContract: []int{0}, rhsContract: []int{1}, wantBatch: 1, wantM: 7, wantN: 9, wantK: 5},
		{name: "ones", lhsDims: []int{1, 1}, rhsDims: []int{1, 1}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 1, wantN: 1, wantK: 1},
		{name: "outer-1", lhsDims: []int{1, 5}, rhsDims: []int{5, 1}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 1, wantN: 1, wantK: 5},
		{name: "vector", lhsDims: []int{13, 6}, rhsDims: []int{6}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 13, wantN: 1, wantK: 6},
		{name: "batch-leading", lhsDims: []int{3, 4, 6}, rhsDims: []int{3, 6, 5}, lhsContract: []int{2}, lhsBatch: []int{0}, rhsContract: []int{1}, rhsBatch: []int{0}, wantBatch: 3, wantM: 4, wantN: 5, wantK: 6},
		{name: "batch-middle", lhsDims: []int{4, 3, 6}, rhsDims: []int{6, 3, 5}, lhsContract: []int{2}, lhsBatch: []int{1}, rhsContract: []int{0}, rhsBatch: []int{1}, wantBatch: 3, wantM: 4, wantN: 5, wantK: 6},
		{name: "two-batch-axes-swapped", lhsDims: []int{2, 3, 4, 5}, rhsDims: []int{3, 5, 2, 7}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{1}, rhsBatch: []int{2, 0}, wantBatch: 6, wantM: 4, wantN: 7, wantK: 5},
		{name: "two-contracting-out-of-order", lhsDims: []int{2, 7, 3}, rhsDims: []int{3, 2, 5}, lhsContract: []int{0, 2}, rhsContract: []int{1, 0}, wantBatch: 1, wantM: 7, wantN: 5, wantK: 6},
		{name: "im2col-kloop", lhsDims: []int{9, 40, 3}, rhsDims: []int{9, 3, 8}, lhsContract: []int{0, 2}, rhsContract: []int{0, 1}, wantBatch: 1, wantM: 40, wantN: 8, wantK: 27},
		{name: "blocks-m-k-n", lhsDims: []int{101, 301}, rhsDims: []int{301, 35}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 101, wantN: 35, wantK: 301},
		{name: "long-k", lhsDims: []int{1100, 10}, rhsDims: []int{1100, 18}, lhsContract: []int{0}, rhsContract: []int{0}, wantBatch: 1, wantM: 10, wantN: 18, wantK: 1100},
		{name: "wide-n", lhsDims: []int{7, 9}, rhsDims: []int{9, 1100}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 7, wantN: 1100, wantK: 9},
		// Rows 4 KB apart: the direct form packs its A panels (setConflicts) once B has enough column panels.
		{name: "aliased-rows", lhsDims: []int{29, 1024}, rhsDims: []int{1024, 129}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 29, wantN: 129, wantK: 1024},
		{name: "batched-attention", lhsDims: []int{4, 2, 30, 8}, rhsDims: []int{4, 2, 20, 8}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{3}, rhsBatch: []int{0, 1}, wantBatch: 8, wantM: 30, wantN: 20, wantK: 8},
	}
}

// refDotGeneral is DotGeneral on float64 with plain loops: output [batch..., lhs cross..., rhs cross...].
func refDotGeneral(lhs, rhs tt, dc dotCase) tt {
	crossAxes := func(rank int, contract, batch []int) []int {
		var cross []int
		for a := range rank {
			if !slices.Contains(contract, a) && !slices.Contains(batch, a) {
				cross = append(cross, a)
			}
		}
		return cross
	}
	lc, rc := crossAxes(len(lhs.dims), dc.lhsContract, dc.lhsBatch), crossAxes(len(rhs.dims), dc.rhsContract, dc.rhsBatch)
	var outDims, kDims []int
	for _, a := range dc.lhsBatch {
		outDims = append(outDims, lhs.dims[a])
	}
	for _, a := range lc {
		outDims = append(outDims, lhs.dims[a])
	}
	for _, a := range rc {
		outDims = append(outDims, rhs.dims[a])
	}
	for _, a := range dc.lhsContract {
		kDims = append(kDims, lhs.dims[a])
	}
	out := newTT(outDims...)
	li, ri := make([]int, len(lhs.dims)), make([]int, len(rhs.dims))
	forEach(outDims, func(o []int) {
		nb := len(dc.lhsBatch)
		for i := range nb {
			li[dc.lhsBatch[i]], ri[dc.rhsBatch[i]] = o[i], o[i]
		}
		for i, a := range lc {
			li[a] = o[nb+i]
		}
		for i, a := range rc {
			ri[a] = o[nb+len(lc)+i]
		}
		sum := 0.0
		forEach(kDims, func(k []int) {
			for i := range k {
				li[dc.lhsContract[i]], ri[dc.rhsContract[i]] = k[i], k[i]
			}
			sum += lhs.data[lhs.flat(li)] * rhs.data[rhs.flat(ri)]
		})
		out.data[out.flat(o)] = sum
	})
	return out
}

func toF32(x tt) []float32 {
	out := make([]float32, len(x.data))
	for i, v := range x.data {
		out[i] = float32(v)
	}
	return out
}

// Every kernel and every way of splitting the work matches the float64 product to float32 accuracy.
func TestGemmKernelsAndSplits(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	kernels := append([]*gemmKernel{gemmKernelGo4x8, gemmKernelGoGeneric(14, 32), gemmKernelGoGeneric(3, 8)}, gemmAsmKernels()...)
	for _, k := range gemmAsmKernels() {
		if k.direct != nil {
			// The same kernel packing every A panel (its direct form reads them in place).
			packed := *k
			packed.direct, packed.name = nil, k.name+" packed"
			kernels = append(kernels, &packed)
		}
	}
	if len(kernels) == 3 {
		t.Log("no AVX2+FMA or AVX-512 on this CPU: only the portable kernels are checked")
	}
	for _, dc := range dotCases() {
		lhs, rhs := randTT(rng, dc.lhsDims...), randTT(rng, dc.rhsDims...)
		want := refDotGeneral(lhs, rhs, dc)
		for _, kernel := range kernels {
			for _, split := range []gemmSplit{splitAuto, splitNone, splitBatch, splitShared, splitK, splitRows, splitCols} {
				t.Run(fmt.Sprintf("%s/%s-%dx%d/split%d", dc.name, kernel.name, kernel.mr, kernel.nr, split), func(t *testing.T) {
					l := newGemmOperand(toF32(lhs), dc.lhsDims, dc.lhsContract, dc.lhsBatch)
					r := newGemmOperand(toF32(rhs), dc.rhsDims, dc.rhsContract, dc.rhsBatch)
					p := &gemmProblem{lhs: l, rhs: r, kernel: kernel, forceSplit: split, threads: 3}
					p.batch, p.m, p.n, p.k = len(l.batchOff), len(l.crossOff), len(r.crossOff), len(l.kOff)
					if p.batch != dc.wantBatch || p.m != dc.wantM || p.n != dc.wantN || p.k != dc.wantK {
						t.Fatalf("sizes batch %d m %d n %d k %d, want %d %d %d %d", p.batch, p.m, p.n, p.k, dc.wantBatch, dc.wantM, dc.wantN, dc.wantK)
					}
					out := make([]float32, p.batch*p.m*p.n)
					for i := range out {
						out[i] = 1e9 // run must overwrite, not add to, stale values.
					}
					p.Run(out)
					got := newTT(want.dims...)
					for i, v := range out {
						got.data[i] = float64(v)
					}
					assertClose(t, "gemm", got, want, 1e-5)

					// Rows written in reverse order through the row offsets (as a convolution writes its
					// output layout): the same values, rows mirrored within each batch.
					p.rowOff = make([]int, p.m)
					for i := range p.rowOff {
						p.rowOff[i] = (p.m - 1 - i) * p.n
					}
					p.Run(out)
					for b := range p.batch {
						for i := range p.m {
							for j := range p.n {
								got.data[(b*p.m+i)*p.n+j] = float64(out[(b*p.m+p.m-1-i)*p.n+j])
							}
						}
					}
					assertClose(t, "gemm with mirrored row offsets", got, want, 1e-5)
				})
			}
		}
	}
}

// Every float64 kernel and split matches the float64 product to a few roundings, and each assembly
// kernel matches the generic Go kernel of its tile within the same bound (FMA rounds once per step).
func TestGemmKernelsAndSplits64(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	kernels := append([]*gemmKernel64{gemmKernelGo4x8F64, gemmKernelGoGenericOf[float64](14, 16), gemmKernelGoGenericOf[float64](3, 8)}, gemmAsmKernels64()...)
	if len(kernels) == 3 {
		t.Log("no AVX2+FMA or AVX-512 on this CPU: only the portable kernels are checked")
	}
	for _, dc := range dotCases() {
		lhs, rhs := randTT(rng, dc.lhsDims...), randTT(rng, dc.rhsDims...)
		want := refDotGeneral(lhs, rhs, dc)
		for _, kernel := range kernels {
			for _, split := range []gemmSplit{splitAuto, splitNone, splitBatch, splitShared, splitK, splitRows, splitCols} {
				t.Run(fmt.Sprintf("%s/%s-%dx%d/split%d", dc.name, kernel.name, kernel.mr, kernel.nr, split), func(t *testing.T) {
					run := func(kernel *gemmKernel64) tt {
						l := newGemmOperand(lhs.data, dc.lhsDims, dc.lhsContract, dc.lhsBatch)
						r := newGemmOperand(rhs.data, dc.rhsDims, dc.rhsContract, dc.rhsBatch)
						p := &GemmProblemOf[float64]{lhs: l, rhs: r, kernel: kernel, forceSplit: split, threads: 3}
						p.batch, p.m, p.n, p.k = len(l.batchOff), len(l.crossOff), len(r.crossOff), len(l.kOff)
						out := newTT(want.dims...)
						for i := range out.data {
							out.data[i] = 1e9 // run must overwrite, not add to, stale values.
						}
						p.Run(out.data)
						return out
					}
					got := run(kernel)
					assertClose(t, "gemm float64", got, want, 1e-14)
					assertClose(t, "gemm float64 vs Go kernel of the same tile", got, run(gemmKernelGoGenericOf[float64](kernel.mr, kernel.nr)), 1e-14)
				})
			}
		}
	}
}

// MeasurePeak runs the GEMM and reports a positive rate with the kernel it used.
func TestMeasurePeak(t *testing.T) {
	p := MeasurePeak(64, 2)
	if p.GFLOPS <= 0 || p.N != 64 || p.Threads < 1 || p.Kernel != GemmKernelName() {
		t.Fatalf("MeasurePeak(64, 2) = %+v", p)
	}
}

// A kernel's direct forms (A panels read in place, and B's too where it has that form) give the packed
// form's bits on every product layout.
func TestGemmDirectMatchesPacked(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	for _, kern := range gemmAsmKernels() {
		if kern.direct == nil {
			continue
		}
		packed := *kern
		packed.direct, packed.directB = nil, nil
		for _, dc := range dotCases() {
			lhs, rhs := randTT(rng, dc.lhsDims...), randTT(rng, dc.rhsDims...)
			for _, split := range []gemmSplit{splitNone, splitBatch, splitShared, splitK, splitRows, splitCols} {
				var outs [2][]float32
				for i, k := range []*gemmKernel{kern, &packed} {
					l := newGemmOperand(toF32(lhs), dc.lhsDims, dc.lhsContract, dc.lhsBatch)
					r := newGemmOperand(toF32(rhs), dc.rhsDims, dc.rhsContract, dc.rhsBatch)
					p := &gemmProblem{lhs: l, rhs: r, kernel: k, forceSplit: split, threads: 2,
						batch: len(l.batchOff), m: len(l.crossOff), n: len(r.crossOff), k: len(l.kOff)}
					outs[i] = make([]float32, p.batch*p.m*p.n)
					p.Run(outs[i])
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("%s split %d: output %d direct %v, packed %v", dc.name, split, i, outs[0][i], outs[1][i])
					}
				}
			}
		}
	}
}

// Products of at most gemmNarrowMaxN columns, and small ones the narrow tiles cover with less padding
// (attention's 17×17 and 17×64 per head), take the narrow kernel where there is one, or a 7-row one where
// that pads less still (Swin-T's 49×49 and 49×32 per head); they add the same terms in the same order as
// the default kernel, so the bits are the default kernel's.
func TestGemmNarrowKernelMatchesDefault(t *testing.T) {
	if gemmNarrowKernel == nil {
		t.Skip("no narrow kernel on this CPU")
	}
	rng := rand.New(rand.NewSource(29))
	if !narrowFits(17, 17, gemmDefaultKernel.mr, gemmDefaultKernel.nr) || narrowFits(136, 768, gemmDefaultKernel.mr, gemmDefaultKernel.nr) {
		t.Fatalf("narrowFits: want the narrow kernel for 17×17 and the default one for 136×768")
	}
	if gemmHalfKernel != nil && (smallProductKernel(49, 49) != gemmHalfKernel || smallProductKernel(49, 32) != gemmHalfKernel ||
		smallProductKernel(17, 17) != nil || smallProductKernel(136, 49) != nil) {
		t.Fatalf("smallProductKernel: want the 7×32 kernel for 49×49 and 49×32, none for 17×17 and 136×49")
	}
	for _, n := range []int{1, 10, 16, 17, 32, 49, 64} {
		for _, m := range []int{5, 17, 37, 49} {
			k := 600 // Several K blocks.
			lhs, rhs := randTT(rng, m, k), randTT(rng, k, n)
			for _, split := range []gemmSplit{splitNone, splitShared, splitK, splitRows} {
				var outs [3][]float32
				for i, kern := range []*gemmKernel{gemmNarrowKernel, gemmDefaultKernel, nil} {
					l := newGemmOperand(toF32(lhs), []int{m, k}, []int{1}, nil)
					r := newGemmOperand(toF32(rhs), []int{k, n}, []int{0}, nil)
					p := &gemmProblem{lhs: l, rhs: r, kernel: kern, forceSplit: split, threads: 2, batch: 1, m: m, n: n, k: k}
					outs[i] = make([]float32, m*n)
					p.Run(outs[i])
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) || outs[2][i] != outs[0][i] {
						t.Fatalf("m %d n %d split %d: output %d narrow %v, default %v, chosen %v", m, n, split, i, outs[0][i], outs[1][i], outs[2][i])
					}
				}
			}
		}
	}
}

// A direct A panel is packed when more of its rows than an L1 set's 8 ways start in the same set.
func TestSetConflicts(t *testing.T) {
	rows := func(n, stride int) []int {
		r := make([]int, n)
		for i := range r {
			r[i] = 5 + i*stride
		}
		return r
	}
	for _, c := range []struct {
		rows []int
		f64  bool
		want bool
	}{
		{rows(14, 1024), false, true},  // 4 KB apart: all in one set.
		{rows(14, 2048), false, true},  // 8 KB.
		{rows(8, 1024), false, false},  // As many as the ways.
		{rows(9, 1024), false, true},   // One more.
		{rows(14, 512), false, false},  // 2 KB: two sets of 7.
		{rows(14, 1000), false, false}, // Spread over the sets.
		{rows(14, 512), true, true},    // 512 float64s: 4 KB.
		{rows(14, 64), false, false},   // 256 bytes.
		{rows(14, 1), false, false},    // Adjacent values: one or two lines, not a conflict.
		{rows(14, 16), false, false},   // One line each, consecutive sets.
	} {
		got := setConflicts[float32](c.rows)
		if c.f64 {
			got = setConflicts[float64](c.rows)
		}
		if got != c.want {
			t.Errorf("setConflicts(%v, float64 %v) = %v, want %v", c.rows, c.f64, got, c.want)
		}
	}
}

// A DotGeneral operand's offset tables are built once per layout and shared: equal to a fresh build,
// the same arrays on a second call, and distinct for a layout that differs only in its axes.
func TestOperandTablesCached(t *testing.T) {
	dims := []int{3, 5, 7, 4}
	contracting, batch := []int{2}, []int{0}
	a := operandTablesOf(dims, contracting, batch)
	strides := RowMajorStrides(dims)
	if !slices.Equal(a.batchOff, axisOffsets(dims, strides, batch)) || !slices.Equal(a.crossOff, axisOffsets(dims, strides, []int{1, 3})) ||
		!slices.Equal(a.kOff, axisOffsets(dims, strides, contracting)) {
		t.Fatalf("tables %+v differ from a fresh build", a)
	}
	if b := operandTablesOf(dims, contracting, batch); &b.kOff[0] != &a.kOff[0] || &b.crossOff[0] != &a.crossOff[0] {
		t.Error("a second call built the tables again")
	}
	c := operandTablesOf(dims, []int{3}, batch)
	if slices.Equal(c.kOff, a.kOff) || !slices.Equal(c.kOff, axisOffsets(dims, strides, []int{3})) {
		t.Errorf("contracting axis 3: kOff %v", c.kOff)
	}
	// The lengths are part of the key: [2] contracting and no batch is not [] contracting and [2] batch.
	d, e := operandTablesOf([]int{6, 6}, []int{1}, nil), operandTablesOf([]int{6, 6}, nil, []int{1})
	if len(d.kOff) != 6 || len(d.batchOff) != 1 || len(e.kOff) != 1 || len(e.batchOff) != 6 {
		t.Errorf("layouts confused: %+v %+v", d, e)
	}
}

// Split K's private sums come from a pool: a reused buffer's stale values (NaN here) must not reach the
// result, and two runs give the same bits.
func TestGemmSplitKReusesPartialSums(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	const m, n, k = 40, 24, 3 * gemmSplitKDepth
	lhs, rhs := randTT(rng, m, k), randTT(rng, k, n)
	want := refDotGeneral(lhs, rhs, dotCase{lhsDims: []int{m, k}, rhsDims: []int{k, n}, lhsContract: []int{1}, rhsContract: []int{0}})
	for range 4 {
		b := getPartial[float32](m * n)
		for i := range b {
			b[i] = float32(math.NaN())
		}
		putPartial(b)
	}
	var first []float32
	for run := range 3 {
		l := newGemmOperand(toF32(lhs), []int{m, k}, []int{1}, nil)
		r := newGemmOperand(toF32(rhs), []int{k, n}, []int{0}, nil)
		p := &gemmProblem{lhs: l, rhs: r, forceSplit: splitK, threads: 2}
		p.batch, p.m, p.n, p.k = 1, m, n, k
		out := make([]float32, m*n)
		p.Run(out)
		got := newTT(m, n)
		for i, v := range out {
			got.data[i] = float64(v)
		}
		assertClose(t, fmt.Sprintf("split K, run %d", run), got, want, 1e-5)
		if first == nil {
			first = out
			continue
		}
		for i := range out {
			if math.Float32bits(out[i]) != math.Float32bits(first[i]) {
				t.Fatalf("run %d: value %d is %v, the first run gave %v", run, i, out[i], first[i])
			}
		}
	}
}

// A small product whose transpose the tiles pad less (attention's v gradient, head dim × tokens) is
// computed as B·Aᵀ per head and transposed into out, with the bits of the product computed as asked:
// every output adds the same products in the same order. Each attention form a step emits (per-head
// operands as the step lays them out) and shapes around the tile edges, one worker and two.
func TestGemmSwappedMatchesDirect(t *testing.T) {
	if gemmNarrowKernel == nil {
		t.Skip("no narrow kernel on this CPU")
	}
	prev := SetSplitMinNs(0)
	defer SetSplitMinNs(prev)
	type form struct {
		lhsDims, rhsDims []int
		lc, rc           []int
		swaps            bool // Must be computed swapped (the others may be).
	}
	forms := []form{
		{[]int{8, 3, 17, 64}, []int{8, 3, 17, 64}, []int{3}, []int{3}, false}, // q·kᵀ
		{[]int{8, 3, 17, 17}, []int{8, 3, 17, 64}, []int{3}, []int{2}, false}, // weights·v
		{[]int{8, 3, 17, 17}, []int{8, 3, 17, 64}, []int{2}, []int{2}, false}, // k's gradient
		{[]int{8, 3, 17, 64}, []int{8, 3, 17, 17}, []int{2}, []int{2}, true},  // v's gradient, transposed
		{[]int{2, 5, 49, 32}, []int{2, 5, 49, 49}, []int{2}, []int{2}, true},  // Swin-T's
		{[]int{3, 40, 9}, []int{3, 40, 33}, []int{1}, []int{1}, false},
		{[]int{3, 9, 40}, []int{3, 37, 9}, []int{1}, []int{2}, false},
	}
	for _, m := range []int{7, 20, 33, 64} {
		for _, n := range []int{5, 15, 17, 31} {
			forms = append(forms, form{[]int{4, 3, m}, []int{4, 3, n}, []int{1}, []int{1}, false})
		}
	}
	rng := rand.New(rand.NewSource(41))
	swapped := 0
	for _, f := range forms {
		lhs, rhs := randTT(rng, f.lhsDims...), randTT(rng, f.rhsDims...)
		batchAxes := []int{0}
		if len(f.lhsDims) == 4 {
			batchAxes = []int{0, 1}
		}
		for _, threads := range []int{1, 2} {
			var outs [2][]float32
			for i := range outs {
				l := newGemmOperand(toF32(lhs), f.lhsDims, f.lc, batchAxes)
				r := newGemmOperand(toF32(rhs), f.rhsDims, f.rc, batchAxes)
				p, ok := NewDotProblem(toF32(lhs), toF32(rhs), f.lhsDims, f.rhsDims, f.lc, batchAxes, f.rc, batchAxes,
					len(l.batchOff), len(l.crossOff), len(r.crossOff), len(l.kOff))
				if !ok {
					t.Fatal("NewDotProblem refused the product")
				}
				p.threads = threads
				out := make([]float32, p.batch*p.m*p.n)
				for j := range out {
					out[j] = float32(math.NaN()) // Every value must be written.
				}
				if i == 1 {
					p.kernel = productKernel[float32](p.m, p.n) // As asked: a given kernel is never swapped.
				} else {
					kern := productKernel[float32](p.m, p.n)
					if got := p.swapWins(out, kern, threads); f.swaps && !got {
						t.Fatalf("%v×%v: swapWins %v, want %v", f.lhsDims, f.rhsDims, got, f.swaps)
					} else if got {
						swapped++
					}
				}
				p.Run(out)
				outs[i] = out
			}
			want := refDotGeneral(lhs, rhs, dotCase{lhsDims: f.lhsDims, rhsDims: f.rhsDims, lhsContract: f.lc, rhsContract: f.rc,
				lhsBatch: batchAxes, rhsBatch: batchAxes})
			for i, w := range toF32(want) {
				if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) || math.Abs(float64(outs[0][i]-w)) > 1e-3 {
					t.Fatalf("%v×%v threads %d: output %d swapped %v, as asked %v, reference %v", f.lhsDims, f.rhsDims, threads, i,
						outs[0][i], outs[1][i], w)
				}
			}
		}
	}
	if swapped < 6 {
		t.Fatalf("only %d products were swapped", swapped)
	}
}
