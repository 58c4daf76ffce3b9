package gobackend

import (
	"math"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/shapeinference"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// This file composes the ops simplego lacks from ops it has. Each op checks its parameters, builds the
// composition with a composer and returns the composer's first error.

// flatOf returns a one-element slice of dtype's Go type holding v (converted).
func flatOf(dtype dtypes.DType, v any) any {
	goType := dtype.GoType()
	flat := reflect.MakeSlice(reflect.SliceOf(goType), 1, 1)
	flat.Index(0).Set(reflect.ValueOf(v).Convert(goType))
	return flat.Interface()
}

// zeroFlat returns a one-element slice of dtype's Go type holding 0.
func zeroFlat(dtype dtypes.DType) any {
	return reflect.MakeSlice(reflect.SliceOf(dtype.GoType()), 1, 1).Interface()
}

// Pad implements backends.Builder: Start/End may be negative (cropping, applied after the interior
// padding, as in XLA) and Interior inserts fill values between the elements.
func (b *goBuilder) Pad(x, fillValue backends.Op, axesConfig ...backends.PadAxis) (backends.Op, error) {
	c := b.composer()
	shape := c.shape(x)
	fillShape := c.shape(fillValue)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, "Pad")
	}
	if len(axesConfig) > shape.Rank() {
		return nil, errors.Errorf("Pad: %d axes configured for an operand of rank %d (%s)", len(axesConfig), shape.Rank(), shape)
	}
	if !fillShape.IsScalar() || fillShape.DType != shape.DType {
		return nil, errors.Errorf("Pad: fill value must be a scalar of the operand's dtype %s, got %s", shape.DType, fillShape)
	}
	for axis, cfg := range axesConfig {
		if cfg.Interior < 0 {
			return nil, errors.Errorf("Pad: negative interior padding %d for axis %d", cfg.Interior, axis)
		}
		dim := shape.Dimensions[axis]
		grown := dim + max(dim-1, 0)*cfg.Interior
		if grown+cfg.Start+cfg.End < 0 {
			return nil, errors.Errorf("Pad: axis %d of %s with padding %+v would have negative size", axis, shape, cfg)
		}
	}
	out := x
	for axis, cfg := range axesConfig {
		out = c.padAxis(out, fillValue, axis, cfg)
	}
	if c.err != nil {
		return nil, errors.WithMessagef(c.err, "Pad(%s, %+v)", shape, axesConfig)
	}
	if out == x {
		// A zero padding: return a distinct op, as the graph may expect a new node.
		return b.Builder.Identity(x)
	}
	return out, nil
}

// padAxis pads one axis: interior padding first; then the result is the window [0, newLen) of
// fill(start) ++ data ++ fill(end), where a negative start or end crops (possibly into the other side's
// padding, or all of the data).
func (c *composer) padAxis(x, fill backends.Op, axis int, cfg backends.PadAxis) backends.Op {
	shape := c.shape(x)
	if c.err != nil {
		return nil
	}
	dims := slices.Clone(shape.Dimensions)
	pre, n, post := kernels.Prod(dims[:axis]), dims[axis], kernels.Prod(dims[axis+1:])
	if cfg.Interior > 0 && n > 1 {
		// [pre, n, 1, post] ++ fill [pre, n, interior, post] -> [pre, n*(1+interior), post] -> drop the tail.
		step := 1 + cfg.Interior
		x3 := c.reshape(x, pre, n, 1, post)
		block := c.broadcast(fill, shapes.Make(shape.DType, pre, n, cfg.Interior, post))
		x3 = c.concat(2, x3, block)
		x3 = c.reshape(x3, pre, n*step, post)
		n = (n-1)*step + 1
		x3 = c.slice(x3, []int{0, 0, 0}, []int{pre, n, post}, nil)
		dims[axis] = n
		x = c.reshape(x3, dims...)
	}
	newLen := n + cfg.Start + cfg.End
	lo, hi := max(0, cfg.Start), min(newLen, cfg.Start+n) // Where the kept data lands in the result.
	fillBlock := func(size int) backends.Op {
		blockDims := slices.Clone(dims)
		blockDims[axis] = size
		return c.broadcast(fill, shapes.Make(shape.DType, blockDims...))
	}
	if hi <= lo {
		return fillBlock(newLen) // All the data is cropped.
	}
	if lo-cfg.Start > 0 || hi-cfg.Start < n {
		starts, limits := make([]int, len(dims)), slices.Clone(dims)
		starts[axis], limits[axis] = lo-cfg.Start, hi-cfg.Start
		x = c.slice(x, starts, limits, nil)
		dims[axis] = hi - lo
	}
	parts := make([]backends.Op, 0, 3)
	if lo > 0 {
		parts = append(parts, fillBlock(lo))
	}
	parts = append(parts, x)
	if newLen > hi {
		parts = append(parts, fillBlock(newLen-hi))
	}
	return c.concat(axis, parts...)
}

// Reverse implements backends.Builder with one Gather per reversed axis.
func (b *goBuilder) Reverse(x backends.Op, axes ...int) (backends.Op, error) {
	c := b.composer()
	shape := c.shape(x)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, "Reverse")
	}
	out := x
	seen := map[int]bool{}
	lead := 0 // The reversed axes (of size > 1) lie within the first lead axes.
	for _, axis := range axes {
		if axis < 0 || axis >= shape.Rank() {
			return nil, errors.Errorf("Reverse: axis %d out of range for %s", axis, shape)
		}
		if seen[axis] {
			return nil, errors.Errorf("Reverse: axis %d given twice", axis)
		}
		seen[axis] = true
		if shape.Dimensions[axis] > 1 {
			lead = max(lead, axis+1)
		}
	}
	if leading := c.reverseLeading(x, shape, seen, lead); leading != nil {
		if c.err != nil {
			return nil, errors.WithMessagef(c.err, "Reverse(%s, %v)", shape, axes)
		}
		return leading, nil
	}
	for _, axis := range axes {
		n := shape.Dimensions[axis]
		if n <= 1 {
			continue
		}
		indices := make([]int32, n)
		for i := range indices {
			indices[i] = int32(n - 1 - i)
		}
		out = c.takeAlongAxis(out, axis, indices)
	}
	if c.err != nil {
		return nil, errors.WithMessagef(c.err, "Reverse(%s, %v)", shape, axes)
	}
	if out == x {
		return b.Builder.Identity(x)
	}
	return out, nil
}

// reverseLeading reverses the axes in reversed, all among the first lead axes, with one Gather when
// every other of those axes has size 1 (a kernel's spatial flip): each index vector picks a whole
// trailing block, which the row-gather executor copies as one run. It returns nil when the axes don't
// have that form.
func (c *composer) reverseLeading(x backends.Op, shape shapes.Shape, reversed map[int]bool, lead int) backends.Op {
	if lead < 2 {
		return nil // One axis: takeAlongAxis is the same single Gather.
	}
	for a := range lead {
		if !reversed[a] && shape.Dimensions[a] > 1 {
			return nil
		}
	}
	dims := shape.Dimensions
	positions := kernels.Prod(dims[:lead])
	indices := make([]int32, 0, positions*lead)
	kernels.ForEachPosition(dims[:lead], func(pos []int) {
		for a, p := range pos {
			if reversed[a] {
				p = dims[a] - 1 - p
			}
			indices = append(indices, int32(p))
		}
	})
	idx := c.constant(indices, positions, lead)
	rank := shape.Rank()
	sliceSizes := append(ones(lead), dims[lead:]...)
	offsetAxes := make([]int, rank-lead)
	for i := range offsetAxes {
		offsetAxes[i] = 1 + i
	}
	if c.err != nil {
		return nil
	}
	g := c.keep(c.b.Gather(x, idx, 1, offsetAxes, iotaInts(lead), iotaInts(lead), sliceSizes, false))
	return c.reshape(g, dims...)
}

// takeAlongAxis returns x with the given indices taken along axis (numpy's take).
func (c *composer) takeAlongAxis(x backends.Op, axis int, indices []int32) backends.Op {
	shape := c.shape(x)
	if c.err != nil {
		return nil
	}
	rank := shape.Rank()
	idx := c.constant(indices, len(indices), 1)
	var offsetAxes []int
	sliceSizes := append([]int(nil), shape.Dimensions...)
	sliceSizes[axis] = 1
	for a := range rank {
		if a != axis {
			offsetAxes = append(offsetAxes, a)
		}
	}
	if c.err != nil {
		return nil
	}
	return c.keep(c.b.Gather(x, idx, 1, offsetAxes, []int{axis}, []int{axis}, sliceSizes, false))
}

// SelectAndScatterMax implements backends.Builder: see selectAndScatter.
func (b *goBuilder) SelectAndScatterMax(operand, source backends.Op, windowDimensions, windowStrides []int, paddings [][2]int) (backends.Op, error) {
	return b.selectAndScatter(operand, source, windowDimensions, windowStrides, paddings, false)
}

// SelectAndScatterMin implements backends.Builder: see selectAndScatter.
func (b *goBuilder) SelectAndScatterMin(operand, source backends.Op, windowDimensions, windowStrides []int, paddings [][2]int) (backends.Op, error) {
	return b.selectAndScatter(operand, source, windowDimensions, windowStrides, paddings, true)
}

// selectAndScatter has XLA's select_and_scatter semantics with a GE (LE for min) select: in every window
// the first maximal (minimal) cell in row-major window order receives the source value of that window;
// contributions add where windows overlap. The operand is padded with -inf (+inf for min), so padding cells
// are never chosen over real ones.
//
// Composition: the K window offsets are strided slices of the padded operand stacked to [K, S] (S = number
// of windows); ArgMinMax over K picks the cell (first one on ties); a constant table maps it to the offset
// within the window, Iota gives each window's origin, and ScatterSum adds the source into a zero tensor
// shaped like the padded operand, which is finally cropped back.
//
// With the fast ops on, float32, float64, int32 and int64 run instead as one node looping over the
// windows directly (pool_grad.go), with the same result bit for bit.
func (b *goBuilder) selectAndScatter(operand, source backends.Op, windowDims, strides []int, paddings [][2]int, isMin bool) (backends.Op, error) {
	name := "SelectAndScatterMax"
	if isMin {
		name = "SelectAndScatterMin"
	}
	c := b.composer()
	xShape := c.shape(operand)
	srcShape := c.shape(source)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, name)
	}
	rank := xShape.Rank()
	if rank == 0 {
		return nil, errors.Errorf("%s: scalar operand", name)
	}
	if len(windowDims) != rank || (len(strides) != 0 && len(strides) != rank) || (len(paddings) != 0 && len(paddings) != rank) {
		return nil, errors.Errorf("%s: operand %s needs one window dimension, stride and padding per axis, got window=%v strides=%v paddings=%v",
			name, xShape, windowDims, strides, paddings)
	}
	if len(strides) == 0 {
		strides = windowDims
	}
	if len(paddings) == 0 {
		paddings = make([][2]int, rank)
	}
	if srcShape.DType != xShape.DType {
		return nil, errors.Errorf("%s: source dtype %s != operand dtype %s", name, srcShape.DType, xShape.DType)
	}
	padCfg := make([]backends.PadAxis, rank)
	cropCfg := make([]backends.PadAxis, rank)
	paddedDims := make([]int, rank)
	numWindows := make([]int, rank)
	for a := range rank {
		if windowDims[a] < 1 || strides[a] < 1 {
			return nil, errors.Errorf("%s: window dimensions %v and strides %v must be >= 1", name, windowDims, strides)
		}
		padCfg[a] = backends.PadAxis{Start: paddings[a][0], End: paddings[a][1]}
		cropCfg[a] = backends.PadAxis{Start: -paddings[a][0], End: -paddings[a][1]}
		paddedDims[a] = xShape.Dimensions[a] + paddings[a][0] + paddings[a][1]
		if paddedDims[a] < windowDims[a] {
			return nil, errors.Errorf("%s: window %v larger than padded operand %v", name, windowDims, paddedDims)
		}
		numWindows[a] = (paddedDims[a]-windowDims[a])/strides[a] + 1
	}
	if !srcShape.Equal(shapes.Make(xShape.DType, numWindows...)) {
		return nil, errors.Errorf("%s: source shape %s doesn't match the %v windows of operand %s (window %v, strides %v, paddings %v)",
			name, srcShape, numWindows, xShape, windowDims, strides, paddings)
	}
	if b.nativePoolGrad {
		if out, ok, err := b.nativeSelectAndScatter(operand, source, xShape.DType, windowDims, strides, paddings, isMin); ok || err != nil {
			return out, err
		}
	}
	numS := kernels.Prod(numWindows)
	numK := kernels.Prod(windowDims)

	padded := c.padAll(operand, c.extreme(xShape.DType, isMin), padCfg) // -inf for max, +inf for min.
	offsets := make([]int32, 0, numK*rank)                              // Table [K, rank] of offsets within the window, row-major.
	stack := make([]backends.Op, 0, numK)
	for k := range numK {
		starts := make([]int, rank)
		limits := make([]int, rank)
		rem := k
		for a := rank - 1; a >= 0; a-- {
			starts[a] = rem % windowDims[a]
			rem /= windowDims[a]
		}
		for a := range rank {
			offsets = append(offsets, int32(starts[a]))
			limits[a] = starts[a] + (numWindows[a]-1)*strides[a] + 1
		}
		stack = append(stack, c.reshape(c.slice(padded, starts, limits, strides), 1, numS))
	}
	stacked := c.concat(0, stack...) // [K, S]
	var choice backends.Op           // [S] int32: index k of the chosen cell.
	if c.err == nil {
		choice = c.keep(c.b.ArgMinMax(stacked, 0, dtypes.Int32, isMin))
	}
	if slices.Equal(strides, windowDims) {
		// Windows don't overlap (the usual pool): no scatter needed. Mask the source into the chosen cells
		// ([K, S]), then interleave window positions and window indices back into the operand's layout.
		kS := shapes.Make(dtypes.Int32, numK, numS)
		var kIota backends.Op
		if c.err == nil {
			kIota = c.keep(c.b.Iota(kS, 0))
		}
		var mask backends.Op
		if c.err == nil {
			mask = c.keep(c.b.Equal(kIota, c.broadcast(c.reshape(choice, 1, numS), kS, 0, 1)))
		}
		srcKS := c.broadcast(c.reshape(source, 1, numS), shapes.Make(xShape.DType, numK, numS), 0, 1)
		var contrib backends.Op
		if c.err == nil {
			contrib = c.keep(c.b.Where(mask, srcKS, c.zero(xShape.DType)))
		}
		contrib = c.reshape(contrib, append(slices.Clone(windowDims), numWindows...)...) // [w..., S...]
		perm := make([]int, 0, 2*rank)
		covered := make([]int, rank)
		for a := range rank {
			perm = append(perm, rank+a, a) // [S_0, w_0, S_1, w_1, ...]
			covered[a] = numWindows[a] * windowDims[a]
		}
		contrib = c.reshape(c.transpose(contrib, perm...), covered...)
		// Cells past the last window get nothing; then crop the padding.
		for a := range rank {
			cropCfg[a].End += paddedDims[a] - covered[a]
		}
		out := c.padAll(contrib, c.zero(xShape.DType), cropCfg)
		if c.err != nil {
			return nil, errors.WithMessagef(c.err, "%s(operand=%s, source=%s, window=%v, strides=%v, paddings=%v)",
				name, xShape, srcShape, windowDims, strides, paddings)
		}
		return out, nil
	}
	table := c.constant(offsets, numK, rank)
	var within backends.Op // [S, rank]
	if c.err == nil {
		within = c.keep(c.b.Gather(table, c.reshape(choice, numS, 1), 1, []int{1}, []int{0}, []int{0}, []int{1, rank}, false))
	}
	// origins[s, a] = window index along a times stride a.
	origins := make([]backends.Op, rank)
	iotaShape := shapes.Make(dtypes.Int32, append(append([]int(nil), numWindows...), 1)...)
	for a := range rank {
		var iota backends.Op
		if c.err == nil {
			iota = c.keep(c.b.Iota(iotaShape, a))
		}
		origins[a] = c.mul(iota, c.constant([]int32{int32(strides[a])}))
	}
	origin := c.reshape(c.concat(rank, origins...), numS, rank)
	indices := c.add(origin, within)
	zeros := c.broadcast(c.zero(xShape.DType), shapes.Make(xShape.DType, paddedDims...))
	updates := c.reshape(source, numS)
	var scattered backends.Op
	if c.err == nil {
		allAxes := make([]int, rank)
		for a := range allAxes {
			allAxes[a] = a
		}
		scattered = c.keep(c.b.ScatterSum(zeros, indices, updates, 1, nil, allAxes, allAxes, false, false))
	}
	out := c.padAll(scattered, c.zero(xShape.DType), cropCfg)
	if c.err != nil {
		return nil, errors.WithMessagef(c.err, "%s(operand=%s, source=%s, window=%v, strides=%v, paddings=%v)",
			name, xShape, srcShape, windowDims, strides, paddings)
	}
	return out, nil
}

// padAll pads every axis as configured.
func (c *composer) padAll(x, fill backends.Op, cfg []backends.PadAxis) backends.Op {
	for axis, a := range cfg {
		if a != (backends.PadAxis{}) {
			x = c.padAxis(x, fill, axis, a)
		}
	}
	return x
}

// batchNormSetup checks the operand and returns the reduction axes (all but featureAxis), the number of
// elements per feature and a function broadcasting a [features] vector to the operand's shape.
func (c *composer) batchNormSetup(name string, operand backends.Op, featureAxis int, vectors ...backends.Op) (
	shape shapes.Shape, reduceAxes []int, count int, bcast func(v backends.Op) backends.Op, err error) {
	shape = c.shape(operand)
	if c.err != nil {
		return shape, nil, 0, nil, errors.WithMessage(c.err, name)
	}
	if !shape.DType.IsFloat() {
		return shape, nil, 0, nil, errors.Errorf("%s: operand must be a float, got %s", name, shape)
	}
	if featureAxis < 0 || featureAxis >= shape.Rank() {
		return shape, nil, 0, nil, errors.Errorf("%s: featureAxis %d out of range for %s", name, featureAxis, shape)
	}
	features := shape.Dimensions[featureAxis]
	want := shapes.Make(shape.DType, features)
	for i, v := range vectors {
		if vs := c.shape(v); c.err == nil && !vs.Equal(want) {
			return shape, nil, 0, nil, errors.Errorf("%s: parameter #%d shaped %s, expected %s", name, i+1, vs, want)
		}
	}
	if c.err != nil {
		return shape, nil, 0, nil, errors.WithMessage(c.err, name)
	}
	for a := range shape.Rank() {
		if a != featureAxis {
			reduceAxes = append(reduceAxes, a)
		}
	}
	count = shape.Size() / max(features, 1)
	bcast = func(v backends.Op) backends.Op { return c.broadcast(v, shape, featureAxis) }
	return shape, reduceAxes, count, bcast, nil
}

// BatchNormForInference implements backends.Builder: (x-mean)/sqrt(variance+epsilon)*scale + offset.
func (b *goBuilder) BatchNormForInference(operand, scale, offset, mean, variance backends.Op, epsilon float32, featureAxis int) (backends.Op, error) {
	const name = "BatchNormForInference"
	c := b.composer()
	shape, _, _, bcast, err := c.batchNormSetup(name, operand, featureAxis, scale, offset, mean, variance)
	if err != nil {
		return nil, err
	}
	eps := c.scalar(shape.DType, float64(epsilon))
	invStd := c.unary(c.b.Rsqrt, c.add(variance, eps))
	factor := c.mul(invStd, scale)              // [features]
	shift := c.sub(offset, c.mul(mean, factor)) // [features]
	out := c.add(c.mul(operand, bcast(factor)), bcast(shift))
	if c.err != nil {
		return nil, errors.WithMessage(c.err, name)
	}
	return out, nil
}

// BatchNormForTraining implements backends.Builder: it normalizes with the batch mean and the biased batch
// variance over every axis but featureAxis, and returns them too.
func (b *goBuilder) BatchNormForTraining(operand, scale, offset backends.Op, epsilon float32, featureAxis int) (
	normalized, batchMean, batchVariance backends.Op, err error) {
	const name = "BatchNormForTraining"
	c := b.composer()
	shape, reduceAxes, count, bcast, err := c.batchNormSetup(name, operand, featureAxis, scale, offset)
	if err != nil {
		return nil, nil, nil, err
	}
	invCount := c.scalar(shape.DType, 1/float64(max(count, 1)))
	batchMean = c.mul(c.reduceSum(operand, reduceAxes...), invCount)
	centered := c.sub(operand, bcast(batchMean))
	batchVariance = c.mul(c.reduceSum(c.mul(centered, centered), reduceAxes...), invCount)
	eps := c.scalar(shape.DType, float64(epsilon))
	factor := c.mul(c.unary(c.b.Rsqrt, c.add(batchVariance, eps)), scale)
	normalized = c.add(c.mul(centered, bcast(factor)), bcast(offset))
	if c.err != nil {
		return nil, nil, nil, errors.WithMessage(c.err, name)
	}
	return normalized, batchMean, batchVariance, nil
}

// BatchNormGradient implements backends.Builder with XLA's batch_norm_grad formulas:
//
//	xhat = (x-mean)/sqrt(var+eps); gradOffset = Σ g; gradScale = Σ g·xhat;
//	gradOperand = scale/sqrt(var+eps) · (g - gradOffset/N - xhat·gradScale/N)
func (b *goBuilder) BatchNormGradient(operand, scale, mean, variance, gradOutput backends.Op, epsilon float32, featureAxis int) (
	gradOperand, gradScale, gradOffset backends.Op, err error) {
	const name = "BatchNormGradient"
	c := b.composer()
	shape, reduceAxes, count, bcast, err := c.batchNormSetup(name, operand, featureAxis, scale, mean, variance)
	if err != nil {
		return nil, nil, nil, err
	}
	if gs := c.shape(gradOutput); c.err == nil && !gs.Equal(shape) {
		return nil, nil, nil, errors.Errorf("%s: gradOutput shaped %s, expected %s", name, gs, shape)
	}
	eps := c.scalar(shape.DType, float64(epsilon))
	invStd := c.unary(c.b.Rsqrt, c.add(variance, eps))
	xhat := c.mul(c.sub(operand, bcast(mean)), bcast(invStd))
	gradOffset = c.reduceSum(gradOutput, reduceAxes...)
	gradScale = c.reduceSum(c.mul(gradOutput, xhat), reduceAxes...)
	invCount := c.scalar(shape.DType, 1/float64(max(count, 1)))
	meanG := c.mul(gradOffset, invCount)
	meanGX := c.mul(gradScale, invCount)
	inner := c.sub(c.sub(gradOutput, bcast(meanG)), c.mul(xhat, bcast(meanGX)))
	gradOperand = c.mul(inner, bcast(c.mul(scale, invStd)))
	if c.err != nil {
		return nil, nil, nil, errors.WithMessage(c.err, name)
	}
	return gradOperand, gradScale, gradOffset, nil
}

// maxReduceWindowPositions bounds the window size ReduceWindow composes from slices; larger windows
// (global pools) use simplego's own ReduceWindow.
const maxReduceWindowPositions = 64

// ReduceWindow overrides simplego's (an element-by-element loop through a generic index iterator,
// ~0.35 s for a 2x2 max-pool of the 128x24x24x64 MNIST-CNN activations): float32 and float64 windows
// over rows of at least poolMinInner values run as one native node (pool.go); the rest as one strided
// Slice of the padded, base-dilated operand per window position, combined with Max, Min, Add or Mul.
func (b *goBuilder) ReduceWindow(x backends.Op, reductionType backends.ReduceOpType,
	windowDimensions, strides, baseDilations, windowDilations []int, paddings [][2]int) (backends.Op, error) {
	c := b.composer()
	shape := c.shape(x)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, "ReduceWindow")
	}
	outShape, err := shapeinference.ReduceWindowOp(shape, windowDimensions, strides, baseDilations, windowDilations, paddings)
	if err != nil {
		return nil, err
	}
	rank := shape.Rank()
	native := func() (backends.Op, error) {
		return b.Builder.ReduceWindow(x, reductionType, windowDimensions, strides, baseDilations, windowDilations, paddings)
	}
	var combine func(a, b backends.Op) (backends.Op, error)
	var fill backends.Op
	var rowOp kernels.BinOp // The same combination as the native node's row operation (pool.go).
	fillValue := 0.0
	switch reductionType {
	case backends.ReduceOpMax:
		combine, fill, rowOp, fillValue = c.b.Max, c.extreme(shape.DType, false), kernels.BinMax, math.Inf(-1)
	case backends.ReduceOpMin:
		combine, fill, rowOp, fillValue = c.b.Min, c.extreme(shape.DType, true), kernels.BinMin, math.Inf(1)
	case backends.ReduceOpSum:
		combine, fill, rowOp = c.b.Add, c.zero(shape.DType), kernels.BinAdd
	case backends.ReduceOpProduct:
		combine, fill, rowOp, fillValue = c.b.Mul, c.constant(flatOf(shape.DType, 1)), kernels.BinMul, 1
	default:
		return native()
	}
	window := fillOnes(windowDimensions, rank)
	if rank == 0 || kernels.Prod(window) > maxReduceWindowPositions || shape.DType == dtypes.Bool {
		return native()
	}
	if len(strides) == 0 {
		strides = window
	}
	baseDil, winDil := fillOnes(baseDilations, rank), fillOnes(windowDilations, rank)
	if len(paddings) == 0 {
		paddings = make([][2]int, rank)
	}
	if out, ok, err := b.nativeReduceWindow(x, reductionType, shape, outShape, rowOp, fillValue, window, strides, baseDil, winDil, paddings); ok || err != nil {
		return out, err
	}
	padCfg := make([]backends.PadAxis, rank)
	for a := range rank {
		padCfg[a].Interior = baseDil[a] - 1
		if len(paddings) > 0 {
			padCfg[a].Start, padCfg[a].End = paddings[a][0], paddings[a][1]
		}
	}
	padded := c.padAll(x, fill, padCfg)
	var out backends.Op
	kernels.ForEachPosition(window, func(pos []int) {
		starts, limits := make([]int, rank), make([]int, rank)
		for a := range rank {
			starts[a] = pos[a] * winDil[a]
			limits[a] = starts[a] + (outShape.Dimensions[a]-1)*strides[a] + 1
		}
		s := c.slice(padded, starts, limits, strides)
		if out == nil {
			out = s
		} else {
			out = c.binary(combine, out, s)
		}
	})
	if c.err != nil {
		return nil, errors.WithMessagef(c.err, "ReduceWindow(%s, window=%v, strides=%v)", shape, window, strides)
	}
	return out, nil
}
