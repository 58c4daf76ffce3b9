package gobackend

import (
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/trainer/trainer/gobackend/kernels"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/pkg/errors"
)

// Fused convolutions are nodes of their own: goBuilder.ConvGeneral builds simplego's ConvGeneral node
// (for its shape checks) and turns it into a fusedConvOpType node (simplego_internals.go) whose data is
// a *kernels.ConvGemmSpec, run by execFusedConv as packed GEMMs reading the input windows while packing
// (gemm_conv.go). Being the backend's own node, the spec can hold what simplego's ConvGeneral node
// can't: a kernel flip folded in at compile time (foldKernelFlips).

// newFusedConv turns simplego's ConvGeneral node into a fused convolution node.
func newFusedConv(node backends.Op, p *convParams) (backends.Op, error) {
	n, ok := node.(*simplego.Node)
	if !ok || !nodeFieldsOK {
		return nil, errors.Errorf("fused convolution: unexpected node %T", node)
	}
	spec := &kernels.ConvGemmSpec{Axes: kernels.ConvAxes(p.axes.Clone()), Strides: slices.Clone(p.strides), KernelDilations: slices.Clone(p.kernelDilations),
		InputDilations: slices.Clone(p.inputDilations), Paddings: slices.Clone(p.paddings), Flip: make([]bool, p.spatialRank),
		ChannelGroups: p.channelGroupCount, BatchGroups: p.batchGroupCount, Plans: &sync.Map{}}
	setNodeOpData(n, fusedConvOpType, spec)
	return n, nil
}

// execFusedConv runs a fused convolution node.
func execFusedConv(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, _ []bool) (*simplego.Buffer, error) {
	spec, ok := nodeDataOf(node).(*kernels.ConvGemmSpec)
	if !ok || len(inputs) != 2 {
		return nil, errors.Errorf("fused convolution node without its parameters")
	}
	inShape, err1 := backend.BufferShape(inputs[0])
	kShape, err2 := backend.BufferShape(inputs[1])
	inFlat, err3 := backend.BufferData(inputs[0])
	kFlat, err4 := backend.BufferData(inputs[1])
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return nil, err
		}
	}
	outShape := nodeShape(node)
	output := backend.NewBuffer(outShape)
	outFlat, err := backend.BufferData(output)
	if err != nil {
		return nil, err
	}
	switch {
	case inShape.DType == dtypes.Float32 && kShape.DType == dtypes.Float32:
		ok = runConvGemms(inFlat.([]float32), inShape.Dimensions, kFlat.([]float32), kShape.Dimensions, outShape.Dimensions, *spec, outFlat.([]float32))
	case inShape.DType == dtypes.Float64 && kShape.DType == dtypes.Float64:
		ok = runConvGemms(inFlat.([]float64), inShape.Dimensions, kFlat.([]float64), kShape.Dimensions, outShape.Dimensions, *spec, outFlat.([]float64))
	case inShape.DType == dtypes.BFloat16 && kShape.DType == dtypes.BFloat16:
		ok = runConvGemmsBF16(inFlat.([]bfloat16.BFloat16), inShape.Dimensions, kFlat.([]bfloat16.BFloat16), kShape.Dimensions, outShape.Dimensions, *spec, outFlat.([]bfloat16.BFloat16))
	default:
		return nil, errors.Errorf("fused convolution of %s by %s: float32, float64 or bfloat16 only", inShape, kShape)
	}
	if !ok {
		return nil, errors.Errorf("fused convolution of %s by %s into %s: layout not handled", inShape, kShape, outShape)
	}
	return output, nil
}

// runConvGemms computes the fused convolution into out; false if the layout is not handled.
func runConvGemms[T kernels.Float](input []T, inDims []int, kernel []T, kDims, outDims []int, spec kernels.ConvGemmSpec, out []T) bool {
	if len(spec.Flip) == len(spec.Axes.InputSpatial) && len(spec.Strides) == len(spec.Flip) {
		switch forward, kernelGrad := kernels.DepthwiseApplies(inDims, kDims, outDims, spec); {
		case forward:
			kernels.DepthwiseForward(input, inDims, kernel, kDims, outDims, spec, out)
			return true
		case kernelGrad:
			kernels.DepthwiseKernelGrad(input, inDims, kernel, kDims, outDims, spec, out)
			return true
		}
	}
	if padded, paddedDims, paddedSpec, ok := padInput(input, inDims, spec); ok {
		defer putPadded(padded)
		input, inDims, spec = padded, paddedDims, paddedSpec
	}
	probs, ok := kernels.ConvGemmsOf(input, inDims, kernel, kDims, outDims, spec)
	if !ok {
		return false
	}
	clear(out)
	if len(probs) > 1 && max(spec.ChannelGroups, spec.BatchGroups) > 1 {
		// One GEMM per group, each writing its own output channels: small ones run side by side.
		kernels.ParallelChunks(kernels.SplitRange(len(probs), len(probs), 1), runtime.GOMAXPROCS(0), func(lo, hi int) {
			for _, p := range probs[lo:hi] {
				p.SetThreads(1)
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

// padInput returns the input with its spatial padding written out as zeros, its dims, and the spec
// without padding: every output row's window then lies inside the input, so the kernel's direct form
// reads every full panel in place (border rows included) instead of packing it. Worth it when there is
// a direct form (float32, AVX2): the copy is one pass over the input, packing is one per kernel
// position. Not for input dilation (the phases keep their own windows) or negative padding.
func padInput[T kernels.Float](input []T, inDims []int, spec kernels.ConvGemmSpec) ([]T, []int, kernels.ConvGemmSpec, bool) {
	if kernels.IsFloat64[T]() || !kernels.HasDirectKernel[T]() {
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
	dims := slices.Clone(inDims)
	lo := make([]int, len(dims))
	for i, axis := range a.InputSpatial {
		lo[axis] = spec.Paddings[i][0]
		dims[axis] += spec.Paddings[i][0] + spec.Paddings[i][1]
	}
	buf := getPadded(kernels.Prod(dims))
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf))
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
	src, dst := kernels.RowMajorStrides(inDims), kernels.RowMajorStrides(dims)
	n := kernels.Prod(inDims[last:])
	written := 0
	kernels.ForEachPosition(inDims[:last], func(pos []int) {
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

// paddedPool keeps padInput's buffers (float32 only: the direct form is float32's).
var paddedPool sync.Pool

func getPadded(n int) []float32 {
	if b, ok := paddedPool.Get().(*[]float32); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]float32, n)
}

func putPadded[T kernels.Float](b []T) {
	f := kernels.AsFloat32(b)
	paddedPool.Put(&f)
}

// foldKernelFlips rewrites, in the graph being compiled, each fused convolution whose kernel is a
// spatial flip built from unit slices and a concatenation (graphs/gomlxfix/vjp_conv.go's flipSpatial, once per
// flipped axis) to read the unflipped kernel reversed instead: the slices and concatenations are then
// unused, and simplego skips them.
func foldKernelFlips(nodes []*simplego.Node) {
	for _, n := range nodes {
		if nodeOpType(n) != fusedConvOpType {
			continue
		}
		spec, ok := nodeDataOf(n).(*kernels.ConvGemmSpec)
		inputs := nodeInputsOf(n)
		if !ok || len(inputs) != 2 {
			continue
		}
		kernel := inputs[1]
		folded := false
		for {
			src, axis, ok := flipOf(kernel)
			if !ok {
				break
			}
			i := slices.Index(spec.Axes.KernelSpatial, axis)
			if i < 0 {
				break
			}
			spec.Flip[i] = !spec.Flip[i]
			kernel, folded = src, true
		}
		if folded {
			setNodeInputs(n, []*simplego.Node{inputs[0], kernel})
		}
	}
}

// flipOf recognises k = Concatenate(axis, Slice(x, [n-1, n)), ..., Slice(x, [0, 1))) along axis, the
// other axes whole: k is x reversed along axis.
func flipOf(k *simplego.Node) (x *simplego.Node, axis int, ok bool) {
	if nodeOpType(k) != backends.OpTypeConcatenate {
		return nil, 0, false
	}
	axis, isInt := concatenateAxis(k)
	parts := nodeInputsOf(k)
	if !isInt || len(parts) < 2 {
		return nil, 0, false
	}
	for i, s := range parts {
		if nodeOpType(s) != backends.OpTypeSlice || len(nodeInputsOf(s)) != 1 {
			return nil, 0, false
		}
		src := nodeInputsOf(s)[0]
		if i == 0 {
			x = src
		} else if src != x {
			return nil, 0, false
		}
		dims := nodeShape(x).Dimensions
		if axis < 0 || axis >= len(dims) || dims[axis] != len(parts) {
			return nil, 0, false
		}
		p, ok := readSliceParams(s)
		starts, limits, strides := p.starts, p.limits, p.strides
		if !ok || len(starts) != len(dims) {
			return nil, 0, false
		}
		for a := range dims {
			want0, want1 := 0, dims[a]
			if a == axis {
				want0, want1 = len(parts)-1-i, len(parts)-i
			}
			if starts[a] != want0 || limits[a] != want1 || strides[a] != 1 {
				return nil, 0, false
			}
		}
	}
	return x, axis, true
}
