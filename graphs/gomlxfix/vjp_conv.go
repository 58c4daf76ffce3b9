package gomlxfix

import (
	"reflect"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26's convolution gradient has two faults the nets here would hit: the input gradient is
// wrong for even kernels (ConvNeXt's 4x4 stem and 2x2 downsamples, ViT's 16x16 patchify), and a
// grouped convolution's gradient is built as two convolutions per group (thousands for a depthwise
// conv). This replacement computes both gradients of an NHWC/HWIO convolution the way XLA's own
// autodiff does, each as one convolution:
//
//	dx = conv(v dilated by the strides, kernel flipped with in/out swapped per group)
//	dw = conv(x with batch and channels exchanged, v as the kernel), batch-grouped for G > 1
//
// Other layouts, input dilations and padding beyond the kernel fall back to stock, GoMLX's own gradient.
// Install registers it (gomlx_internals.go).
func convGeneralVJP(stock VJP) VJP {
	return func(node *Node, v []*Node, out shapes.Shape) []*Node {
		p, ok := readConvParams(node)
		if !ok || !p.standard() {
			return stock(node, v, out)
		}
		x, kernel := node.Inputs()[0], node.Inputs()[1]
		dx, ok := convInputGradient(x, kernel, v[0], p)
		if !ok {
			return stock(node, v, out)
		}
		return []*Node{dx, convKernelGradient(x, kernel, v[0], p)}
	}
}

// convParams are the attributes of one ConvGeneral node.
type convParams struct {
	axes                               backends.ConvolveAxesConfig
	strides, inputDilations, dilations []int
	paddings                           [][2]int
	groups, batchGroups                int
}

// nhwc is the axes layout every layer here uses.
var nhwc = backends.ConvolveAxesConfig{
	InputBatch: 0, InputChannels: 3, InputSpatial: []int{1, 2},
	KernelInputChannels: 2, KernelOutputChannels: 3, KernelSpatial: []int{0, 1},
	OutputBatch: 0, OutputChannels: 3, OutputSpatial: []int{1, 2},
}

// standard reports whether the gradient below applies: NHWC/HWIO, no input dilation, no batch groups.
func (p convParams) standard() bool {
	if !reflect.DeepEqual(p.axes, nhwc) || p.batchGroups > 1 {
		return false
	}
	for _, d := range p.inputDilations {
		if d != 1 {
			return false
		}
	}
	return true
}

// fill returns values, or n ones when values is empty.
func fill(values []int, n int) []int {
	if len(values) > 0 {
		return values
	}
	ones := make([]int, n)
	for i := range ones {
		ones[i] = 1
	}
	return ones
}

// convInputGradient is the transposed convolution of v: v dilated by the strides, padded so the output
// is x's size, convolved with the spatially flipped kernel whose in/out channels are swapped per group.
func convInputGradient(x, kernel, v *Node, p convParams) (*Node, bool) {
	kd := kernel.Shape().Dimensions
	xd, vd := x.Shape().Dimensions, v.Shape().Dimensions
	pads := make([][2]int, 2)
	for a := range 2 {
		k, s, d := kd[a], p.strides[a], p.dilations[a]
		eff := (k-1)*d + 1
		in, out := xd[1+a], vd[1+a]
		lo := eff - 1 - p.paddings[a][0]
		hi := in - (out-1)*s + p.paddings[a][0] - 1
		if lo < 0 || hi < 0 {
			return nil, false
		}
		pads[a] = [2]int{lo, hi}
	}
	flipped := flipSpatial(kernel)
	axes := nhwc
	if p.groups == 1 {
		// Read the kernel's output channels as input channels instead of transposing it.
		axes.KernelInputChannels, axes.KernelOutputChannels = 3, 2
	} else {
		g, inPer, outPer := p.groups, kd[2], kd[3]/p.groups
		flipped = Reshape(flipped, kd[0], kd[1], inPer, g, outPer)
		flipped = TransposeAllAxes(flipped, 0, 1, 4, 3, 2)
		flipped = Reshape(flipped, kd[0], kd[1], outPer, g*inPer)
	}
	return ConvGeneral(v, flipped, axes, []int{1, 1}, pads, p.strides, p.dilations, p.groups, 1), true
}

// convKernelGradient correlates x with v: dw[t, i, o] = Σ_{n, pos} xpad[n, pos·s + t·d, i]·v[n, pos, o].
// x's channels play the batch (one output row per input channel) and its batch is contracted; for
// grouped convolutions batch groups pair each channel group with its outputs.
func convKernelGradient(x, kernel, v *Node, p convParams) *Node {
	kd := kernel.Shape().Dimensions
	xd, vd := x.Shape().Dimensions, v.Shape().Dimensions
	pads := make([][2]int, 2)
	for a := range 2 {
		k, s, d := kd[a], p.strides[a], p.dilations[a]
		in, out := xd[1+a], vd[1+a]
		// The last input row the forward conv reads; rows beyond it (and unused padding) are dropped.
		hi := (k-1)*d + (out-1)*s + 1 - in - p.paddings[a][0]
		if hi < 0 {
			x = SliceAxis(x, 1+a, AxisRange(0, in+hi))
			hi = 0
		}
		pads[a] = [2]int{p.paddings[a][0], hi}
	}
	axes := backends.ConvolveAxesConfig{
		InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
		KernelInputChannels: 0, KernelOutputChannels: 3, KernelSpatial: []int{1, 2},
		OutputBatch: 2, OutputChannels: 3, OutputSpatial: []int{0, 1},
	}
	return ConvGeneral(x, v, axes, p.dilations, pads, nil, p.strides, 1, p.groups)
}

// flipSpatial reverses a kernel's two spatial axes (0 and 1). It is built from unit slices and one
// concatenation per axis rather than Reverse: on the pure-Go backend Reverse becomes a Gather that
// copies element by element (a quarter of a ResNet step), while slices and concatenations copy runs;
// XLA fuses either form.
func flipSpatial(kernel *Node) *Node {
	for axis := range 2 {
		n := kernel.Shape().Dimensions[axis]
		if n == 1 {
			continue
		}
		parts := make([]*Node, n)
		for i := range n {
			parts[i] = SliceAxis(kernel, axis, AxisElem(n-1-i))
		}
		kernel = Concatenate(parts, axis)
	}
	return kernel
}
