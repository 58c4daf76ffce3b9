package kernels

import (
	"runtime"
	"slices"
)

// Depthwise convolutions computed directly. A depthwise convolution (one input channel per group: the
// MobileNets', EfficientNet's and ConvNeXt's) multiplies each channel by its own few kernel taps, so it
// does 2·taps flops per value it reads: memory-bound, not a GEMM. With channels the contiguous axis,
// each output position is Σ over its taps of an input row times a weight row, whole rows at a time
// (AVX2 FMA on 32 or 8 channels, conv_depthwise_amd64.s; Go loops elsewhere and for the last few).
//
// Two forms reach the backend in a training step (graphs/gomlxfix/vjp_conv.go):
//   - channel groups with one input and one output channel per group: the forward convolution, and the
//     input gradient (the output gradient dilated by the strides, convolved with the flipped kernel);
//   - batch groups with one input batch and one output channel per group: the kernel gradient, where the
//     input's batch axis holds the channels and its channels axis the images, and the output gradient
//     plays the kernel. Each kernel tap's gradient row accumulates input row × output-gradient row over
//     every image and output position, the output-gradient row read once for all the taps it meets.
//
// Positions along the last spatial axis whose windows meet the same taps (all of them inside the input,
// or the same ones at a border; with input dilation, each phase apart) are handed to the kernels as
// runs: one call computes a run, every position's offsets a constant step from the previous one's.

// dwTap is a partner position along one axis and the input coordinate it meets there.
type dwTap struct{ b, coord int }

// dwAxisTaps lists, for each position a in [0, A), the partner positions b in [0, B) whose input
// coordinate (a·sa + b·sb − lo)/d is a whole number inside [0, size).
func dwAxisTaps(A, B, sa, sb, lo, d, size int) [][]dwTap {
	taps := make([][]dwTap, A)
	for a := range A {
		for b := range B {
			pos := a*sa + b*sb - lo
			if pos < 0 || pos%d != 0 || pos/d >= size {
				continue
			}
			taps[a] = append(taps[a], dwTap{b, pos / d})
		}
	}
	return taps
}

// dwRun is a run of positions a0, a0+step, ... (count of them) along the last spatial axis that meet
// the same partners, at input coordinates taps[i].coord + r·coordStep for the r-th position.
type dwRun struct {
	a0, count, step, coordStep int
	taps                       []dwTap
}

// dwRuns groups the positions of dwAxisTaps into runs: stepping a by e = d/gcd(sa, d) moves every
// coordinate by e·sa/d and keeps it whole, so consecutive positions of one phase with the same
// partners form a run.
func dwRuns(A, B, sa, sb, lo, d, size int) []dwRun {
	taps := dwAxisTaps(A, B, sa, sb, lo, d, size)
	e := d / gcd(sa, d)
	var runs []dwRun
	for r := 0; r < e && r < A; r++ {
		last := -1
		for a := r; a < A; a += e {
			if last >= 0 && sameTapPartners(runs[last].taps, taps[a]) {
				runs[last].count++
				continue
			}
			runs = append(runs, dwRun{a0: a, count: 1, step: e, coordStep: e * sa / d, taps: taps[a]})
			last = len(runs) - 1
		}
	}
	return runs
}

func sameTapPartners(x, y []dwTap) bool {
	return slices.EqualFunc(x, y, func(p, q dwTap) bool { return p.b == q.b })
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return max(a, 1)
}

// dwOffsets is a list of (first, second) element offsets, the operands of one kernel call.
type dwOffsets struct{ first, second []int }

// cross returns the pairs of o extended by each tap along an axis: first advances by coord·firstStride,
// second by b·secondStride.
func (o dwOffsets) cross(dst *dwOffsets, taps []dwTap, firstStride, secondStride int) {
	dst.first, dst.second = dst.first[:0], dst.second[:0]
	for i := range o.first {
		for _, t := range taps {
			dst.first = append(dst.first, o.first[i]+t.coord*firstStride)
			dst.second = append(dst.second, o.second[i]+t.b*secondStride)
		}
	}
}

// depthwiseApplies reports which direct form computes this grouped convolution: forward (channel
// groups, one input and one output channel each) or kernelGrad (batch groups, one input batch and one
// output channel each), both with the channels contiguous where they are read and written.
func depthwiseApplies(inDims, kDims, outDims []int, c ConvGemmSpec) (forward, kernelGrad bool) {
	a := c.Axes
	S := len(a.InputSpatial)
	if len(inDims) != S+2 || len(kDims) != S+2 || len(outDims) != S+2 || a.OutputChannels != S+1 {
		return false, false
	}
	G, BG := max(c.ChannelGroups, 1), max(c.BatchGroups, 1)
	C, Cout := inDims[a.InputChannels], kDims[a.KernelOutputChannels]
	switch {
	case G > 1 && BG == 1:
		return C == G && Cout == G && kDims[a.KernelInputChannels] == 1 && a.InputChannels == S+1, false
	case BG > 1 && G == 1:
		kStrides := RowMajorStrides(kDims)
		return false, inDims[a.InputBatch] == BG && Cout == BG && outDims[a.OutputBatch] == 1 &&
			a.InputBatch == S+1 && kStrides[a.KernelOutputChannels] == 1
	}
	return false, false
}

// depthwiseForward computes out[n, y, c] = Σ_kpos in[n, coord(y, kpos), c]·kernel[kpos, 0, c] over the
// taps inside the (dilated) input; the kernel is read reversed along the spec's flipped axes.
func depthwiseForward[T Float](in []T, inDims []int, kernel []T, kDims, outDims []int, c ConvGemmSpec, out []T) {
	a := c.Axes
	S := len(a.InputSpatial)
	sIn, sK, sOut := RowMajorStrides(inDims), RowMajorStrides(kDims), RowMajorStrides(outDims)
	N, C := inDims[a.InputBatch], inDims[a.InputChannels]
	inSp, kSp, outSp := make([]int, S), make([]int, S), make([]int, S)
	for i := range S {
		inSp[i], kSp[i], outSp[i] = inDims[a.InputSpatial[i]], kDims[a.KernelSpatial[i]], outDims[a.OutputSpatial[i]]
	}
	if N*Prod(outSp)*C == 0 {
		return
	}
	// The weights as rows of C, one per kernel position (row-major over the kernel's spatial axes).
	kStep := RowMajorStrides(kSp)
	w := make([]T, Prod(kSp)*C)
	ForEachPosition(kSp, func(kp []int) {
		flat, off := 0, 0
		for i := range S {
			flat += kp[i] * kStep[i]
			idx := kp[i]
			if c.Flip[i] {
				idx = kSp[i] - 1 - idx
			}
			off += idx * sK[a.KernelSpatial[i]]
		}
		row := w[flat*C : (flat+1)*C]
		for ch := range row {
			row[ch] = kernel[off+ch*sK[a.KernelOutputChannels]]
		}
	})
	L := S - 1
	outer := make([][][]dwTap, L)
	for i := range L {
		outer[i] = dwAxisTaps(outSp[i], kSp[i], c.Strides[i], c.KernelDilations[i], c.Paddings[i][0], c.InputDilations[i], inSp[i])
	}
	runs := dwRuns(outSp[L], kSp[L], c.Strides[L], c.KernelDilations[L], c.Paddings[L][0], c.InputDilations[L], inSp[L])
	lineDims := outSp[:L]
	perLine := Prod(lineDims)
	lines := N * perLine
	ForChunksCost(lines, outSp[L]*Prod(kSp)*C, DepthwiseNsPerMAC, func(lo, hi int) {
		var cur, next dwOffsets
		y := make([]int, L)
		for line := lo; line < hi; line++ {
			n, rest := line/perLine, line%perLine
			for i := L - 1; i >= 0; i-- {
				y[i] = rest % lineDims[i]
				rest /= lineDims[i]
			}
			cur.first, cur.second = append(cur.first[:0], n*sIn[a.InputBatch]), append(cur.second[:0], 0)
			dst := n * sOut[a.OutputBatch]
			for i := range L {
				cur.cross(&next, outer[i][y[i]], sIn[a.InputSpatial[i]], kStep[i]*C)
				cur, next = next, cur
				dst += y[i] * sOut[a.OutputSpatial[i]]
			}
			for _, run := range runs {
				cur.cross(&next, run.taps, sIn[a.InputSpatial[L]], C)
				d0, dStep := dst+run.a0*sOut[a.OutputSpatial[L]], run.step*sOut[a.OutputSpatial[L]]
				if len(next.first) == 0 {
					for r := range run.count {
						clear(out[d0+r*dStep:][:C])
					}
					continue
				}
				dwTapRows(C, out[d0:], dStep, run.count, in, run.coordStep*sIn[a.InputSpatial[L]], next.first, w, next.second)
			}
		}
	})
}

// depthwiseKernelGrad computes the batch-grouped form: out[0, y, c] = Σ_(ci, kpos) in[c, coord(y, kpos),
// ci]·kernel[kpos, ci, c], where in's batch axis (the channels c, contiguous) pairs with the kernel's
// and the output's channels. Each worker owns a range of channels, so every sum runs in one order.
func depthwiseKernelGrad[T Float](in []T, inDims []int, kernel []T, kDims, outDims []int, c ConvGemmSpec, out []T) {
	a := c.Axes
	S := len(a.InputSpatial)
	sIn, sK, sOut := RowMajorStrides(inDims), RowMajorStrides(kDims), RowMajorStrides(outDims)
	C, NI := inDims[a.InputBatch], inDims[a.InputChannels]
	inSp, kSp, outSp := make([]int, S), make([]int, S), make([]int, S)
	for i := range S {
		inSp[i], kSp[i], outSp[i] = inDims[a.InputSpatial[i]], kDims[a.KernelSpatial[i]], outDims[a.OutputSpatial[i]]
	}
	clear(out)
	if C*Prod(outSp)*NI*Prod(kSp) == 0 {
		return
	}
	// Here the kernel positions are the rows read and the output positions the partners they meet.
	L := S - 1
	outer := make([][][]dwTap, L)
	for i := range L {
		outer[i] = dwAxisTaps(kSp[i], outSp[i], c.KernelDilations[i], c.Strides[i], c.Paddings[i][0], c.InputDilations[i], inSp[i])
	}
	runs := dwRuns(kSp[L], outSp[L], c.KernelDilations[L], c.Strides[L], c.Paddings[L][0], c.InputDilations[L], inSp[L])
	kIndex := func(i, kp int) int {
		if c.Flip[i] {
			return (kSp[i] - 1 - kp) * sK[a.KernelSpatial[i]]
		}
		return kp * sK[a.KernelSpatial[i]]
	}
	kDir := 1
	if c.Flip[L] {
		kDir = -1
	}
	lineDims := kSp[:L]
	perLine := Prod(lineDims)
	chunks := channelChunks(C, NI*Prod(kSp)*Prod(outSp))
	ParallelChunks(chunks, len(chunks)-1, func(c0, c1 int) {
		var cur, next dwOffsets
		kp := make([]int, L)
		for line := range NI * perLine {
			ci, rest := line/perLine, line%perLine
			for i := L - 1; i >= 0; i-- {
				kp[i] = rest % lineDims[i]
				rest /= lineDims[i]
			}
			// first: the input offset; second: the output (accumulator) offset.
			cur.first, cur.second = append(cur.first[:0], ci*sIn[a.InputChannels]), append(cur.second[:0], 0)
			row := ci * sK[a.KernelInputChannels]
			for i := range L {
				cur.cross(&next, outer[i][kp[i]], sIn[a.InputSpatial[i]], sOut[a.OutputSpatial[i]])
				cur, next = next, cur
				row += kIndex(i, kp[i])
			}
			for _, run := range runs {
				if len(run.taps) == 0 {
					continue
				}
				cur.cross(&next, run.taps, sIn[a.InputSpatial[L]], sOut[a.OutputSpatial[L]])
				v0 := row + kIndex(L, run.a0)
				dwAccRows(c1-c0, out[c0:], next.second, in[c0:], next.first, run.coordStep*sIn[a.InputSpatial[L]],
					kernel, v0+c0, kDir*run.step*sK[a.KernelSpatial[L]], run.count)
			}
		}
	})
}

// channelChunks splits C channels among the workers in multiples of 8 (the kernels' width), one chunk
// when the work is small.
func channelChunks(C, perChannel int) []int {
	workers := runtime.GOMAXPROCS(0)
	if !WorthSplitting(float64(C*perChannel) * DepthwiseNsPerMAC) {
		workers = 1
	}
	workers = max(min(workers, C/8), 1)
	return SplitRange(C, workers, 8)
}

// ForChunks runs fn over [0, n) in chunks on up to GOMAXPROCS goroutines, when n items of the given
// work each (values copied or computed) are worth splitting.
func ForChunks(n, work int, fn func(lo, hi int)) { ForChunksCost(n, work, ElementNs, fn) }

// ForChunksCost is ForChunks with each unit of work estimated at perWorkNs nanoseconds on one core.
func ForChunksCost(n, work int, perWorkNs float64, fn func(lo, hi int)) {
	threads := runtime.GOMAXPROCS(0)
	if threads == 1 || n < 2 || !WorthSplitting(float64(n*work)*perWorkNs) {
		fn(0, n)
		return
	}
	chunks := min(n, 4*threads)
	ParallelChunks(SplitRange(n, chunks, 1), min(threads, chunks), fn)
}

// dwTapRows computes count output rows of c channels: row r (at dst[r·dstStep]) is Σ_t src[srcOffs[t] +
// r·srcStep + j]·w[wOffs[t] + j] for j < c.
func dwTapRows[T Float](c int, dst []T, dstStep, count int, src []T, srcStep int, srcOffs []int, w []T, wOffs []int) {
	done := dwTapRowsVec(c, dst, dstStep, count, src, srcStep, srcOffs, w, wOffs)
	if done == c {
		return
	}
	for r := range count {
		row := dst[r*dstStep:][done:c]
		clear(row)
		for t, so := range srcOffs {
			s := src[so+r*srcStep:][done:c]
			wr := w[wOffs[t]:][done:c]
			for j := range row {
				row[j] += s[j] * wr[j]
			}
		}
	}
}

// dwAccRows adds, for each of count kernel rows (the r-th at v[v0 + r·vStep], c values), the row times
// the input rows into the accumulator rows: acc[accOffs[t] + j] += x[xOffs[t] + r·xStep + j]·v[.. + j].
func dwAccRows[T Float](c int, acc []T, accOffs []int, x []T, xOffs []int, xStep int, v []T, v0, vStep, count int) {
	done := dwAccRowsVec(c, acc, accOffs, x, xOffs, xStep, v, v0, vStep, count)
	if done == c {
		return
	}
	for r := range count {
		vr := v[v0+r*vStep:][done:c]
		for t, ao := range accOffs {
			ar := acc[ao:][done:c]
			xr := x[xOffs[t]+r*xStep:][done:c]
			for j := range ar {
				ar[j] += xr[j] * vr[j]
			}
		}
	}
}

// dwOffsetRange returns the smallest and largest of offs[t] + r·step over r < count (offs non-empty).
func dwOffsetRange(offs []int, step, count int) (lo, hi int) {
	lo, hi = slices.Min(offs), slices.Max(offs)
	if step > 0 {
		hi += (count - 1) * step
	} else {
		lo += (count - 1) * step
	}
	return lo, hi
}
