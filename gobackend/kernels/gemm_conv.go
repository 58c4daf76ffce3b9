package kernels

import (
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// A convolution as one packed GEMM without an im2col tensor: out[(n, y), co] = Σ_(kpos, ci)
// A[(n, y), (kpos, ci)]·B[(kpos, ci), co], where A is read straight from the input while packing (an
// output position's row, a kernel position's offset, zeros where the window crosses the padding) and
// B is the kernel addressed through offset tables. Each output row lands at its place in the output
// layout through the GEMM's row offsets. No patches, slices, concatenations, pads or transposes are
// materialised; any axes layout works as long as the output's channels axis is its last (contiguous)
// one. Grouped convolutions are one such GEMM per group (its input channels or batches, its output
// channels), except the depthwise forms, which conv_depthwise.go computes directly.

// ConvAxes says which axis of the input, kernel and output tensors is which: the same fields as
// GoMLX's backends.ConvolveAxesConfig, so the glue converts one into the other.
type ConvAxes struct {
	InputBatch, InputChannels int
	InputSpatial              []int

	KernelInputChannels, KernelOutputChannels int
	KernelSpatial                             []int

	OutputBatch, OutputChannels int
	OutputSpatial               []int
}

// ConvGemmSpec holds the ConvGeneral parameters the fused path uses (every one filled in), and the
// spatial axes along which the kernel is read reversed (a flip folded in by the fusion pass).
type ConvGemmSpec struct {
	Axes                                     ConvAxes
	Strides, KernelDilations, InputDilations []int
	Paddings                                 [][2]int
	Flip                                     []bool
	ChannelGroups, BatchGroups               int       // 0 or 1: none.
	Plans                                    *sync.Map // convPlanKey -> []*GemmProblemOf[T] without data; nil: none kept.
}

// Kind names the convolution for op statistics: FusedConv, GroupedConv (one GEMM per group) or
// DepthwiseConv (the direct kernels; decided at run time from the dims, so named by the groups here).
func (s *ConvGemmSpec) Kind() string {
	switch {
	case s.ChannelGroups > 1 || s.BatchGroups > 1:
		return fmt.Sprintf("GroupedConv[%d, %d]", max(s.ChannelGroups, 1), max(s.BatchGroups, 1))
	}
	return "FusedConv"
}

// convPlanKey names a fused convolution's GEMM problems: the dims of its input, kernel and output
// (rank 6 at most) and the element type.
type convPlanKey struct {
	dims  [3][6]int
	ranks [3]int
	f64   bool
}

// convGemmsOf returns newConvGemms' problems for these tensors, their offset tables built once per
// node and dims (spec.Plans) and copied with the tensors' data: a step runs each convolution with the
// same dims every time, and building the tables cost about as much as packing.
func convGemmsOf[T Float](input []T, inDims []int, kernel []T, kDims, outDims []int, c ConvGemmSpec) ([]*GemmProblemOf[T], bool) {
	var key convPlanKey
	key.f64 = IsFloat64[T]()
	cacheable := c.Plans != nil
	for i, d := range [][]int{inDims, kDims, outDims} {
		if len(d) > len(key.dims[i]) {
			cacheable = false
			break
		}
		key.ranks[i] = copy(key.dims[i][:], d)
	}
	if !cacheable {
		return newConvGemms(input, inDims, kernel, kDims, outDims, c)
	}
	var templates []*GemmProblemOf[T]
	if v, found := c.Plans.Load(key); found {
		templates = v.([]*GemmProblemOf[T])
	} else {
		probs, ok := newConvGemms[T](nil, inDims, nil, kDims, outDims, c)
		if !ok {
			return nil, false
		}
		c.Plans.Store(key, probs)
		templates = probs
	}
	probs := make([]*GemmProblemOf[T], len(templates))
	for i, t := range templates {
		p := *t
		lhs := *t.lhs.(*convOperand[T])
		rhs := *t.rhs.(*gemmOperandOf[T])
		lhs.data, rhs.data = input, kernel
		p.lhs, p.rhs = &lhs, &rhs
		probs[i] = &p
	}
	return probs, true
}

// convOperand is the input seen as A: row i (an output position) starts at rowBase[i] with spatial
// coordinates rowCoord[i·S+a] (position·stride − low padding), contracting index k (a kernel position
// and input channel) adds kOff[k] and kCoord[k·S+a] (kernel position·dilation). A(i, k) is
// data[rowBase[i]+kOff[k]] when every coordinate sum lies inside the input, else 0.
type convOperand[T Float] struct {
	data              []T
	S                 int
	inDims            []int // Input spatial sizes.
	rowBase, rowCoord []int
	kOff, kCoord      []int
	kOffMin, kOffMax  int    // Extremes of kOff (a whole-window row reads between them).
	kRunEnd           []int  // End of the run from k of contracting indices with consecutive offsets and the same kernel position.
	kGroupEnd         []int  // End of the run from k of contracting indices with the same kernel position.
	rowInterior       []bool // The row's whole window is inside the input.
	rowRun            []int  // Number of rows from i on that are consecutive in memory with the same coordinates.
}

// valid reports whether A(i, k) reads the input (not padding).
func (o *convOperand[T]) valid(i, k int) bool {
	rc, kc := o.rowCoord[i*o.S:][:o.S], o.kCoord[k*o.S:][:o.S]
	for a, d := range o.inDims {
		if c := rc[a] + kc[a]; c < 0 || c >= d {
			return false
		}
	}
	return true
}

func (o *convOperand[T]) pack(dst []T, _, i0, i1, k0, k1, w int) {
	o.packUnmarked(dst, 0, i0, i1, k0, k1, w, nil)
}

// markDirect implements gemmDirectA: a panel of whole-window rows is read in place when every offset
// it can read is inside the input. The last panel may have fewer than w rows (block repeats its last
// row): a kernel gradient has few rows (9 × input channels) and many contracting indices, and packing
// its 576 rows' last 2 value by value took 5% of the product.
func (o *convOperand[T]) markDirect(mark []bool, i0, i1, w int) bool {
	any := false
	for q := range mark {
		r0 := i0 + q*w
		r1 := min(r0+w, i1)
		ok := r0 < r1 && allInterior(o.rowInterior[r0:r1])
		for r := r0; ok && r < r1; r++ {
			ok = o.rowBase[r]+o.kOffMin >= 0 && o.rowBase[r]+o.kOffMax < len(o.data)
		}
		mark[q] = ok
		any = any || ok
	}
	return any
}

// directTables implements gemmDirectA (a convolution's GEMM has one batch).
func (o *convOperand[T]) directTables(int) ([]T, []int, []int) { return o.data, o.rowBase, o.kOff }

// packUnmarked packs the panels of rows [i0, i1) not marked (mark nil: all of them).
func (o *convOperand[T]) packUnmarked(dst []T, _, i0, i1, k0, k1, w int, mark []bool) {
	kl := k1 - k0
	for q := 0; q*w < i1-i0; q++ {
		if mark != nil && mark[q] {
			continue
		}
		panel := dst[q*kl*w:][:kl*w]
		r0 := i0 + q*w
		valid := min(w, i1-r0)
		if valid == w && o.rowRun[r0] >= w {
			// w rows adjacent in memory (a channels-as-batch layout, as in the kernel gradient): w values
			// at a time.
			base, interior := o.rowBase[r0], o.rowInterior[r0]
			for k := k0; k < k1; {
				end := min(o.kGroupEnd[k], k1) // Same window offset: one validity test for the group.
				if interior || o.valid(r0, k) {
					copyRows(panel[(k-k0)*w:], o.data, base, o.kOff[k:end], w)
					k = end
				} else {
					clear(panel[(k-k0)*w : (end-k0)*w])
					k = end
				}
			}
			continue
		}
		o.packRows(panel, r0, valid, k0, k1, w)
	}
}

// packRows packs one panel: rows r0 .. r0+valid-1 of A (the panel's other rows are past the end:
// zeros) over contracting indices [k0, k1), w rows wide. Per kernel position, the rows whose window
// reaches the input there are copied through the 8×8 transposes (whole runs of consecutive offsets),
// the others (in the padding) read a valid row's values and are cleared afterwards: rows near the
// border, a large part of a small feature map, take the same path as interior ones. Runs shorter than
// a transpose (few input channels, or the kernel gradient's layout, whose consecutive contracting
// indices are batches apart) are copied by packShortRun instead.
func (o *convOperand[T]) packRows(panel []T, r0, valid, k0, k1, w int) {
	allIn := valid == w && allInterior(o.rowInterior[r0:r0+w])
	var ok [maxPanelRows]bool
	var base, offs [maxPanelRows]int
	for k := k0; k < k1; {
		group := min(o.kGroupEnd[k], k1) // Same window offset: one validity test per row.
		nOK, ref := 0, 0
		for r := valid - 1; r >= 0; r-- {
			ok[r] = allIn || o.rowInterior[r0+r] || o.valid(r0+r, k)
			if ok[r] {
				nOK, ref = nOK+1, r
			}
		}
		if nOK == 0 {
			clear(panel[(k-k0)*w : (group-k0)*w])
			k = group
			continue
		}
		for r := range w {
			rr := ref
			if r < valid && ok[r] {
				rr = r
			}
			base[r] = o.rowBase[r0+rr]
		}
		kg := k
		for k < group {
			end := min(o.kRunEnd[k], group) // Consecutive in memory.
			if end-k < 8 {
				packShortRun(panel[(k-k0)*w:], o.data, base[:w], o.kOff[k], end-k)
				k = end
				continue
			}
			for r := range w {
				offs[r] = base[r] + o.kOff[k]
			}
			packRowOffsets(panel[(k-k0)*w:], o.data, offs[:w], end-k, w)
			k = end
		}
		if nOK < w {
			for r := range w {
				if r >= valid || !ok[r] {
					for j := kg; j < group; j++ {
						panel[(j-k0)*w+r] = 0
					}
				}
			}
		}
	}
}

// packShortRun writes panel[j·w + r] = src[base[r]+off+j] for rows r < w = len(base) and j < n: a run
// too short for the 8×8 transposes. Rows adjacent in memory (the kernel gradient's input channels) go
// as one copy per run of them, the others value by value.
func packShortRun[T Float](panel, src []T, base []int, off, n int) {
	w := len(base)
	for j := range n {
		row := panel[j*w : j*w+w]
		for r := 0; r < w; {
			e := r + 1
			for e < w && base[e] == base[e-1]+1 {
				e++
			}
			at := base[r] + off + j
			if e-r == 1 {
				row[r] = src[at]
			} else {
				copy(row[r:e], src[at:at+e-r])
			}
			r = e
		}
	}
}

// newConvGemms lays out the fused convolution of input (dims inDims) by kernel (kDims) into the output
// (outDims) as GEMMs over disjoint output rows: one, or with input dilation d one per phase (the
// output positions whose window starts at the same offset modulo d), each contracting only the kernel
// positions that meet real input values, so the zeros of the dilation are never multiplied. ok is
// false for layouts it does not handle (output channels not contiguous). Output rows no phase reaches
// stay zero: the caller clears the output and runs the problems with accumulate set (or, when the
// problems' rows cover the output, without it: RunConv).
func newConvGemms[T Float](input []T, inDims []int, kernel []T, kDims, outDims []int, c ConvGemmSpec) ([]*GemmProblemOf[T], bool) {
	a := c.Axes
	S := len(a.InputSpatial)
	if len(a.KernelSpatial) != S || len(a.OutputSpatial) != S || len(c.Strides) != S || len(c.KernelDilations) != S ||
		len(c.InputDilations) != S || len(c.Paddings) != S || len(c.Flip) != S {
		return nil, false
	}
	sIn, sK, sOut := RowMajorStrides(inDims), RowMajorStrides(kDims), RowMajorStrides(outDims)
	N, C, Cout := inDims[a.InputBatch], inDims[a.InputChannels], kDims[a.KernelOutputChannels]
	G, BG := max(c.ChannelGroups, 1), max(c.BatchGroups, 1)
	if G > 1 && BG > 1 || C%G != 0 || N%BG != 0 || Cout%(G*BG) != 0 {
		return nil, false
	}
	Cg, Nb, Coutg := C/G, N/BG, Cout/(G*BG)
	if sOut[a.OutputChannels] != 1 || kDims[a.KernelInputChannels] != Cg || outDims[a.OutputBatch] != Nb || outDims[a.OutputChannels] != Cout {
		return nil, false
	}
	inSp, kSp, outSp := make([]int, S), make([]int, S), make([]int, S)
	for i := range S {
		inSp[i], kSp[i], outSp[i] = inDims[a.InputSpatial[i]], kDims[a.KernelSpatial[i]], outDims[a.OutputSpatial[i]]
		if c.InputDilations[i] < 1 || c.Strides[i] < 1 || c.KernelDilations[i] < 1 {
			return nil, false
		}
	}
	if Nb*Prod(outSp) == 0 || Prod(kSp)*Cg == 0 || Coutg == 0 {
		return nil, true // Nothing to multiply: the output is empty or zeros.
	}
	classes := paddingClasses(c, inSp, kSp, outSp)
	if classes == nil {
		classes = []convClass{{}} // One GEMM over every output position and kernel position.
	}
	// Rows: batch-major unless the batch axis is the input's densest (the kernel gradient's layout, whose
	// "batch" is the input channels): then consecutive rows are consecutive in memory.
	batchInner := Nb > 1
	for i := range S {
		if outSp[i] > 1 && c.Strides[i]*sIn[a.InputSpatial[i]] < sIn[a.InputBatch]*c.InputDilations[i] {
			batchInner = false
		}
	}
	var probs []*GemmProblemOf[T]
	for g := range G * BG {
		// Group g reads input channels [g·Cg, (g+1)·Cg) (channel groups) or input batches [g·Nb, (g+1)·Nb)
		// (batch groups), and writes output channels [g·Coutg, (g+1)·Coutg).
		grp := convGroup{N: Nb, C: Cg, Cout: Coutg, outCol0: g * Coutg}
		if G > 1 {
			grp.inChan0 = g * Cg
		} else {
			grp.inBatch0 = g * Nb
		}
		cross := make([]int, Coutg)
		for co := range cross {
			cross[co] = (grp.outCol0 + co) * sK[a.KernelOutputChannels]
		}
		for _, cls := range classes {
			ForEachPosition(c.InputDilations, func(phase []int) {
				if p := newConvPhase(input, kernel, c, phase, cls, batchInner, inSp, kSp, outSp, sIn, sK, sOut, grp, cross); p != nil {
					probs = append(probs, p)
				}
			})
		}
	}
	return probs, true
}

// convGroup is the part of a convolution one GEMM computes: N input batches from inBatch0, C input
// channels from inChan0, Cout output channels from outCol0 (the whole convolution when ungrouped).
type convGroup struct {
	inBatch0, N, inChan0, C, outCol0, Cout int
}

// floorMod is x mod d in [0, d).
func floorMod(x, d int) int { return ((x % d) + d) % d }

// floorDiv is ⌊x/d⌋ for d > 0.
func floorDiv(x, d int) int { return (x - floorMod(x, d)) / d }

// convClass is a box of output positions (a range per spatial axis) whose windows all meet the input
// at the same box of kernel positions: one GEMM over those rows contracts only those kernel positions.
// Nil ranges: every position.
type convClass struct{ y, kp [][2]int }

// paddingClasses splits the output positions by the kernel positions at which their window meets the
// input, when the padded convolution would spend more than half of its products on padding zeros (a
// 1×1 feature map under a 3×3 kernel with padding 1 meets the input at one kernel position of 9, a 2×2
// map at 4 of 9): one GEMM per class then multiplies only real input values. Classes whose window
// meets no input are left out (their output rows stay zero). nil when the padding is the smaller part
// (one GEMM over the padded input wastes less than many small ones would lose) or for input dilation,
// whose phases already contract only the kernel positions that meet real values.
func paddingClasses(c ConvGemmSpec, inSp, kSp, outSp []int) []convClass {
	S := len(inSp)
	var useful, total float64 = 1, 1
	axes := make([][]convClass, S) // Per axis, its classes (y and kp set for that axis only).
	for i := range S {
		if c.InputDilations[i] != 1 {
			return nil
		}
		s, kd, lo0 := c.Strides[i], c.KernelDilations[i], c.Paddings[i][0]
		sum := 0
		for y := range outSp[i] {
			// Kernel positions kp with 0 <= y·s − lo0 + kp·kd < inSp.
			origin := y*s - lo0
			lo := max(0, -floorDiv(origin, kd))
			hi := min(kSp[i], floorDiv(inSp[i]-1-origin, kd)+1)
			hi = max(hi, lo)
			sum += hi - lo
			last := len(axes[i]) - 1
			if last >= 0 && axes[i][last].kp[0] == [2]int{lo, hi} {
				axes[i][last].y[0][1] = y + 1
				continue
			}
			axes[i] = append(axes[i], convClass{y: [][2]int{{y, y + 1}}, kp: [][2]int{{lo, hi}}})
		}
		useful *= float64(sum)
		total *= float64(outSp[i] * kSp[i])
	}
	if useful > total/2 {
		return nil
	}
	classes := []convClass{{}}
	for i := range S {
		var next []convClass
		for _, cl := range classes {
			for _, ax := range axes[i] {
				if ax.kp[0][0] == ax.kp[0][1] {
					continue // No kernel position meets the input: zeros.
				}
				next = append(next, convClass{y: append(slices.Clone(cl.y), ax.y[0]), kp: append(slices.Clone(cl.kp), ax.kp[0])})
			}
		}
		classes = next
	}
	if classes == nil {
		classes = []convClass{} // Every output position is all padding: nothing to multiply.
	}
	return classes
}

// newConvPhase is the GEMM of the output rows whose dilated window origin y·stride − low padding is
// phase (per axis) modulo the input dilation; nil if no row or no kernel position qualifies. In that
// class a window offset kpos·kernelDilation meets a real input value exactly when it is −phase modulo
// the dilation, at input index (origin − phase)/d + (offset + phase)/d.
func newConvPhase[T Float](input, kernel []T, c ConvGemmSpec, phase []int, cls convClass, batchInner bool,
	inSp, kSp, outSp, sIn, sK, sOut []int, grp convGroup, cross []int) *GemmProblemOf[T] {
	N, C, Cout := grp.N, grp.C, grp.Cout
	a := c.Axes
	S := len(inSp)
	d := c.InputDilations
	// Contracting indices: the qualifying kernel positions row-major, input channels innermost.
	maxK := Prod(kSp) * C
	kOff, kCoord, kOffB := make([]int, 0, maxK), make([]int, 0, maxK*S), make([]int, 0, maxK)
	kMin, kMax := make([]int, S), make([]int, S)
	first := true
	ForEachPosition(kSp, func(kp []int) {
		baseA, baseB := 0, 0
		coord := make([]int, S)
		for i := range S {
			if cls.kp != nil && (kp[i] < cls.kp[i][0] || kp[i] >= cls.kp[i][1]) {
				return // Not this class's kernel position.
			}
			off := kp[i]*c.KernelDilations[i] + phase[i]
			if off%d[i] != 0 {
				return
			}
			coord[i] = off / d[i]
			baseA += coord[i] * sIn[a.InputSpatial[i]]
			kIdx := kp[i]
			if c.Flip[i] {
				kIdx = kSp[i] - 1 - kp[i]
			}
			baseB += kIdx * sK[a.KernelSpatial[i]]
		}
		for i := range S {
			if first || coord[i] < kMin[i] {
				kMin[i] = coord[i]
			}
			if first || coord[i] > kMax[i] {
				kMax[i] = coord[i]
			}
		}
		first = false
		for ci := range C {
			kOff = append(kOff, baseA+(grp.inChan0+ci)*sIn[a.InputChannels])
			kOffB = append(kOffB, baseB+ci*sK[a.KernelInputChannels])
			kCoord = append(kCoord, coord...)
		}
	})
	K := len(kOff)
	if K == 0 {
		return nil
	}
	maxM := N * Prod(outSp)
	op := &convOperand[T]{data: input, S: S, inDims: inSp, kOff: kOff, kCoord: kCoord, kRunEnd: make([]int, K), kGroupEnd: make([]int, K),
		rowBase: make([]int, 0, maxM), rowCoord: make([]int, 0, maxM*S), rowInterior: make([]bool, 0, maxM)}
	rowOff := make([]int, 0, maxM)
	rc := make([]int, S)
	emit := func(n int, y []int) {
		for i := range S {
			if cls.y != nil && (y[i] < cls.y[i][0] || y[i] >= cls.y[i][1]) {
				return // Another class's row.
			}
			origin := y[i]*c.Strides[i] - c.Paddings[i][0]
			if floorMod(origin, d[i]) != phase[i] {
				return // Another phase's row.
			}
			rc[i] = (origin - phase[i]) / d[i]
		}
		op.rowCoord = append(op.rowCoord, rc...)
		base, off, interior := (grp.inBatch0+n)*sIn[a.InputBatch], n*sOut[a.OutputBatch]+grp.outCol0, true
		for i, rc := range rc {
			base += rc * sIn[a.InputSpatial[i]]
			off += y[i] * sOut[a.OutputSpatial[i]]
			interior = interior && rc+kMin[i] >= 0 && rc+kMax[i] < inSp[i]
		}
		op.rowBase = append(op.rowBase, base)
		op.rowInterior = append(op.rowInterior, interior)
		rowOff = append(rowOff, off)
	}
	if batchInner {
		ForEachPosition(outSp, func(y []int) {
			for n := range N {
				emit(n, y)
			}
		})
	} else {
		for n := range N {
			ForEachPosition(outSp, func(y []int) { emit(n, y) })
		}
	}
	M := len(rowOff)
	if M == 0 {
		return nil
	}
	op.rowRun = make([]int, M)
	op.rowRun[M-1] = 1
	for i := M - 2; i >= 0; i-- {
		op.rowRun[i] = 1
		if op.rowBase[i+1] == op.rowBase[i]+1 && slices.Equal(op.rowCoord[i*S:(i+1)*S], op.rowCoord[(i+1)*S:(i+2)*S]) {
			op.rowRun[i] = op.rowRun[i+1] + 1
		}
	}
	op.kOffMin, op.kOffMax = slices.Min(kOff), slices.Max(kOff)
	op.kRunEnd[K-1], op.kGroupEnd[K-1] = K, K
	for k := K - 2; k >= 0; k-- {
		op.kRunEnd[k], op.kGroupEnd[k] = k+1, k+1
		if slices.Equal(op.kCoord[k*S:(k+1)*S], op.kCoord[(k+1)*S:(k+2)*S]) {
			op.kGroupEnd[k] = op.kGroupEnd[k+1]
			if op.kOff[k+1] == op.kOff[k]+1 {
				op.kRunEnd[k] = op.kRunEnd[k+1]
			}
		}
	}
	rhs := &gemmOperandOf[T]{data: kernel, batchOff: []int{0}, crossOff: cross, kOff: kOffB}
	return &GemmProblemOf[T]{lhs: op, rhs: rhs, batch: 1, m: M, n: Cout, k: K, rowOff: rowOff, accumulate: true}
}

func allInterior(rows []bool) bool {
	for _, in := range rows {
		if !in {
			return false
		}
	}
	return true
}

// RunConv computes the fused convolution into out; false if the layout is not handled.
func RunConv[T Float](input []T, inDims []int, kernel []T, kDims, outDims []int, spec ConvGemmSpec, out []T) bool {
	if len(spec.Flip) == len(spec.Axes.InputSpatial) && len(spec.Strides) == len(spec.Flip) {
		switch forward, kernelGrad := depthwiseApplies(inDims, kDims, outDims, spec); {
		case forward:
			depthwiseForward(input, inDims, kernel, kDims, outDims, spec, out)
			return true
		case kernelGrad:
			depthwiseKernelGrad(input, inDims, kernel, kDims, outDims, spec, out)
			return true
		}
	}
	if padded, paddedDims, paddedSpec, ok := padInput(input, inDims, kDims, outDims, spec); ok {
		defer putPadded(padded)
		input, inDims, spec = padded, paddedDims, paddedSpec
	}
	probs, ok := convGemmsOf(input, inDims, kernel, kDims, outDims, spec)
	if !ok {
		return false
	}
	if problemsCover(probs, len(out)) {
		// Each problem stores its first K block into its own rows instead of adding into a cleared output.
		for _, p := range probs {
			p.accumulate, p.rowsOnly = false, true
		}
	} else {
		clear(out)
	}
	threads := runtime.GOMAXPROCS(0)
	work := 0.0
	for _, p := range probs {
		work += float64(p.batch*p.m*p.n*p.k) * GemmNsPerMAC
	}
	if threads > 1 && WorthSplitting(work) && len(probs) > 1 && (max(spec.ChannelGroups, spec.BatchGroups) > 1 || evenProblems(probs, threads)) {
		// One GEMM per group, each writing its own output channels, or per class of output positions
		// (its own output rows): small ones run side by side, with no join inside each.
		ParallelChunks(SplitRange(len(probs), len(probs), 1), threads, func(lo, hi int) {
			for _, p := range probs[lo:hi] {
				p.threads = 1
				p.Run(out)
			}
		})
		return true
	}
	for _, p := range probs {
		p.Run(out)
	}
	return true
}

// problemsCover reports whether a convolution's problems write every one of its n output values: their
// rows (output positions, or a group's channels of them) are disjoint, so they cover the output when
// their sizes add up to it. Rows that no problem reaches (windows all padding, an input dilation's
// phase with no kernel position) stay zero, and need the output cleared.
func problemsCover[T Float](probs []*GemmProblemOf[T], n int) bool {
	covered := 0
	for _, p := range probs {
		if p.k == 0 {
			return false
		}
		covered += p.batch * p.m * p.n
	}
	return covered == n && n > 0
}

// evenProblems reports whether the workers can take the problems whole: as many as a multiple of the
// workers (or four per worker or more), none below three quarters of the largest one's products (the
// padding classes of a 2×2 map under a padded 3×3 kernel: four equal ones; not an input gradient's
// stride phases, whose kernel positions go 4:2:2:1).
func evenProblems[T Float](probs []*GemmProblemOf[T], threads int) bool {
	if threads < 2 || len(probs) < threads || (len(probs)%threads != 0 && len(probs) < 4*threads) {
		return false
	}
	lo, hi := -1, 0
	for _, p := range probs {
		f := p.batch * p.m * p.n * p.k
		hi = max(hi, f)
		if lo < 0 || f < lo {
			lo = f
		}
	}
	return 4*lo >= 3*hi
}

// padInput returns the input with its spatial padding written out as zeros, its dims, and the spec
// without padding: every output row's window then lies inside the input, so the kernel's direct form
// reads every full panel in place (border rows included) instead of packing it. Worth it when there is
// a direct form (float32, AVX2): the copy is one pass over the input, packing is one per kernel
// position. Not for input dilation (the phases keep their own windows), negative padding, or padding
// that paddingClasses' GEMMs skip (kDims and outDims nil: not checked).
func padInput[T Float](input []T, inDims, kDims, outDims []int, spec ConvGemmSpec) ([]T, []int, ConvGemmSpec, bool) {
	if IsFloat64[T]() || defaultKernelOf[T]().direct == nil {
		return nil, nil, spec, false
	}
	padded := false
	for i, p := range spec.Paddings {
		if p[0] < 0 || p[1] < 0 || spec.InputDilations[i] != 1 {
			return nil, nil, spec, false
		}
		padded = padded || p != [2]int{}
	}
	if !padded {
		return nil, nil, spec, false
	}
	a := spec.Axes
	if kDims != nil && outDims != nil {
		inSp, kSp, outSp := make([]int, len(a.InputSpatial)), make([]int, len(a.InputSpatial)), make([]int, len(a.InputSpatial))
		for i := range inSp {
			inSp[i], kSp[i], outSp[i] = inDims[a.InputSpatial[i]], kDims[a.KernelSpatial[i]], outDims[a.OutputSpatial[i]]
		}
		if paddingClasses(spec, inSp, kSp, outSp) != nil {
			return nil, nil, spec, false // The GEMMs skip the padding instead of reading it.
		}
	}
	dims := slices.Clone(inDims)
	lo := make([]int, len(dims))
	for i, axis := range a.InputSpatial {
		lo[axis] = spec.Paddings[i][0]
		dims[axis] += spec.Paddings[i][0] + spec.Paddings[i][1]
	}
	buf := getPadded(Prod(dims))
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf))), cap(buf))[:len(buf)] // The capacity goes back to its pool.
	// Copy block by block, each to its place in the padded tensor, and zero only the gaps between them:
	// the places rise with the blocks, so each value is written once. (Clearing the whole pooled buffer
	// first cost as much as the copy: most of it is interior.) A block is everything from the last
	// padded axis on (NHWC's rows of W·C values): no padding inside it, so it is contiguous in both.
	last := 0
	for i := range dims {
		if dims[i] != inDims[i] {
			last = i
		}
	}
	src, dst := RowMajorStrides(inDims), RowMajorStrides(dims)
	n := Prod(inDims[last:])
	written := 0
	ForEachPosition(inDims[:last], func(pos []int) {
		so, do := 0, lo[last]*dst[last]
		for i, p := range pos {
			so += p * src[i]
			do += (p + lo[i]) * dst[i]
		}
		if do > written {
			clear(out[written:do])
		}
		copy(out[do:do+n], input[so:so+n])
		written = do + n
	})
	clear(out[written:])
	spec.Paddings = make([][2]int, len(spec.Paddings))
	return out, dims, spec, true
}

// paddedPools keeps padInput's buffers (float32 only: the direct form is float32's), one pool per power
// of two of capacity: a step's convolutions pad inputs of many sizes, and one pool for all returned a
// buffer too small for the next about as often as not, which was then dropped and a new one allocated
// and cleared (MNIST-fast: 2% of a step's CPU time in that clearing alone).
var paddedPools [64]sync.Pool

// paddedClass is the pool of a request for n values: buffers of that class hold at least n.
func paddedClass(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

func getPadded(n int) []float32 {
	c := paddedClass(n)
	if b, ok := paddedPools[c].Get().(*[]float32); ok {
		return (*b)[:n]
	}
	return make([]float32, n, 1<<c)
}

func putPadded[T Float](b []T) {
	if cap(b) == 0 {
		return
	}
	// The whole capacity goes back, to the class it fills: every buffer of class c holds 2^c values.
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), cap(b))
	paddedPools[bits.Len(uint(cap(f)))-1].Put(&f)
}
