package gobackend

import (
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Fused convolutions are nodes of their own: goBuilder.ConvGeneral builds simplego's ConvGeneral node
// (for its shape checks) and turns it into a fusedConvOpType node (simplego_internals.go) whose data is
// a *kernels.ConvGemmSpec, run by execFusedConv as packed GEMMs reading the input windows while packing
// (kernels/gemm_conv.go). Being the backend's own node, the spec can hold what simplego's ConvGeneral node
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
	output, outFlat, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	switch {
	case inShape.DType == dtypes.Float32 && kShape.DType == dtypes.Float32:
		ok = kernels.RunConv(inFlat.([]float32), inShape.Dimensions, kFlat.([]float32), kShape.Dimensions, outShape.Dimensions, *spec, outFlat.([]float32))
	case inShape.DType == dtypes.Float64 && kShape.DType == dtypes.Float64:
		ok = kernels.RunConv(inFlat.([]float64), inShape.Dimensions, kFlat.([]float64), kShape.Dimensions, outShape.Dimensions, *spec, outFlat.([]float64))
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
