package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/shapeinference"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// defaultIm2colLimit bounds the intermediate tensors of the im2col/col2im convolutions (elements, not
// bytes; simplego's DotGeneral makes a blocked copy of its operands too): larger convolutions use
// simplego's native ConvGeneral, slow but memory-light. (Splitting the batch would be the better answer.)
// The backend option im2col_limit=N changes it.
const defaultIm2colLimit = 1 << 28

// convMode selects how ConvGeneral is computed: the backend option conv=auto|native|im2col|col2im
// (auto unless given; the others are for comparing the algorithms and for checking each of them).
type convMode int

const (
	convAuto   convMode = iota // the fused GEMM where it applies, else col2im when it does less work, else im2col.
	convNative                 // simplego's own ConvGeneral (with sanitized parameters).
	convIm2col
	convCol2im // Falls back to im2col where col2im doesn't apply (grouped convolutions).
)

// convModes are the values of the conv= option.
var convModes = map[string]convMode{"auto": convAuto, "native": convNative, "im2col": convIm2col, "col2im": convCol2im}

// convParams holds ConvGeneral's parameters with every optional one filled in, and derived sizes.
type convParams struct {
	axes                               backends.ConvolveAxesConfig
	strides                            []int
	paddings                           [][2]int
	inputDilations, kernelDilations    []int
	channelGroupCount, batchGroupCount int
	input, kernel, output              shapes.Shape
	spatialRank                        int

	inputSpatial, kernelSpatial, outSpatial []int // Dimensions, in spatial-axis order.
	batch, inChannels, outChannels          int
	kernelInputChannels                     int // inChannels / channelGroupCount.
	kkernel                                 int // Number of kernel positions (product of kernelSpatial).
	numOutputPositions                      int // Product of outSpatial.
}

// ConvGeneral overrides simplego's ConvGeneral (a single-threaded loop) with im2col: the padded, dilated
// input is cut into patches by strided Slices (one per kernel position, or one per output position when
// the kernel is larger than the output, as in the kernel gradient), concatenated, and multiplied by the
// kernel with one DotGeneral, the only op simplego runs on several cores. Channel groups (grouped and
// depthwise convolutions), batch groups, input dilations (via Pad's interior padding), kernel dilations
// (via the slice offsets), arbitrary axes layouts and negative paddings are handled. nil strides and
// dilations are read as ones (GoMLX's conv gradient passes nil strides).
func (b *goBuilder) ConvGeneral(input, kernel backends.Op, axes backends.ConvolveAxesConfig,
	strides []int, paddings [][2]int, inputDilations, kernelDilations []int,
	channelGroupCount, batchGroupCount int) (backends.Op, error) {
	c := b.composer()
	inShape, kShape := c.shape(input), c.shape(kernel)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, "ConvGeneral")
	}
	spatialRank := inShape.Rank() - 2
	if spatialRank < 1 {
		return nil, errors.Errorf("ConvGeneral: input must have rank >= 3, got %s", inShape)
	}
	p := &convParams{
		axes:              axes,
		strides:           fillOnes(strides, spatialRank),
		paddings:          paddings,
		inputDilations:    fillOnes(inputDilations, spatialRank),
		kernelDilations:   fillOnes(kernelDilations, spatialRank),
		channelGroupCount: max(channelGroupCount, 1),
		batchGroupCount:   max(batchGroupCount, 1),
		input:             inShape,
		kernel:            kShape,
		spatialRank:       spatialRank,
	}
	if len(p.paddings) == 0 {
		p.paddings = make([][2]int, spatialRank)
	}
	var err error
	p.output, err = shapeinference.ConvGeneralOp(inShape, kShape, axes, p.strides, p.paddings, p.inputDilations,
		p.kernelDilations, p.channelGroupCount, p.batchGroupCount)
	if err != nil {
		return nil, err
	}
	native := func() (backends.Op, error) {
		// simplego's grouped path indexes the dilations unconditionally: always pass them explicitly.
		return b.Builder.ConvGeneral(input, kernel, axes, p.strides, p.paddings, p.inputDilations, p.kernelDilations,
			p.channelGroupCount, p.batchGroupCount)
	}
	if b.convMode == convNative {
		return native()
	}
	p.derive()
	if b.fusedConv && fusedConvInstalled && b.convMode == convAuto && p.fusedApplies() {
		node, err := native() // simplego's node, for the shape checks; run by execFusedConv.
		if err != nil {
			return nil, err
		}
		return newFusedConv(node, p)
	}
	useCol2im := p.col2imApplies() && (b.convMode == convCol2im || (b.convMode == convAuto && p.col2imCost() < p.im2colCost()))
	if limit := b.backend.im2colLimit; (useCol2im && p.col2imCost() > limit) || (!useCol2im && p.im2colCost() > limit) {
		return native()
	}
	var out backends.Op
	if useCol2im {
		out, err = b.col2imConv(input, kernel, p)
	} else {
		out, err = b.im2colConv(input, kernel, p)
	}
	if err != nil {
		if b.strictConv {
			return nil, err
		}
		return native()
	}
	return out, nil
}

func fillOnes(values []int, n int) []int {
	if len(values) == 0 {
		return ones(n)
	}
	return slices.Clone(values)
}

func (p *convParams) derive() {
	a := p.axes
	for i := range p.spatialRank {
		p.inputSpatial = append(p.inputSpatial, p.input.Dimensions[a.InputSpatial[i]])
		p.kernelSpatial = append(p.kernelSpatial, p.kernel.Dimensions[a.KernelSpatial[i]])
		p.outSpatial = append(p.outSpatial, p.output.Dimensions[a.OutputSpatial[i]])
	}
	p.batch = p.input.Dimensions[a.InputBatch]
	p.inChannels = p.input.Dimensions[a.InputChannels]
	p.outChannels = p.kernel.Dimensions[a.KernelOutputChannels]
	p.kernelInputChannels = p.kernel.Dimensions[a.KernelInputChannels]
	p.kkernel = kernels.Prod(p.kernelSpatial)
	p.numOutputPositions = kernels.Prod(p.outSpatial)
}

// fusedApplies reports whether the fused convolution (execFusedConv) computes this convolution:
// float32, float64 or bfloat16 (converted to float32 around it, bf16.go), output channels on the last
// axis, not both channel and batch groups. Grouped ones run as one GEMM per group, or directly when
// depthwise (kernels/conv_depthwise.go).
func (p *convParams) fusedApplies() bool {
	dt := p.input.DType
	return (dt == dtypes.Float32 || dt == dtypes.Float64 || dt == dtypes.BFloat16) && p.axes.OutputChannels == p.output.Rank()-1 &&
		(p.channelGroupCount == 1 || p.batchGroupCount == 1)
}

// im2colCost is the size of im2col's patches tensor (its multiply-adds divided by the output channels).
func (p *convParams) im2colCost() int {
	return p.batch * p.numOutputPositions * p.kkernel * p.inChannels
}

// col2imCost is the size of col2im's products tensor (its multiply-adds, N·X·KK·C·Cout with X the input
// positions, divided by the input channels) plus half the output-sized tensors it pads and adds up: a
// rough model, calibrated on the MNIST-CNN gradient convolutions.
func (p *convParams) col2imCost() int {
	return p.batch*kernels.Prod(p.inputSpatial)*p.kkernel*p.outChannels + p.kkernel*p.batch*p.numOutputPositions*p.outChannels/2
}

// col2imApplies: col2im handles ungrouped convolutions only.
func (p *convParams) col2imApplies() bool {
	return p.channelGroupCount == 1 && p.batchGroupCount == 1
}

// col2imConv computes the convolution as the transpose of im2col: one DotGeneral multiplies every input
// position by the whole kernel ([N·X, C] × [KK, C, Cout] -> [N·X, KK, Cout]), then the products of each
// kernel position are placed where they land in the output (a Pad: interior padding for the input
// dilation, shifted by the kernel offset, cropped by the padding; a strided Slice for the stride) and
// added up. Its multiply-adds are N·X·KK·C·Cout against im2col's N·Y·KK·C·Cout: for an input-dilated
// convolution (the input gradient of a strided one) X ≈ Y/dilation^S, where im2col multiplies zeros.
func (b *goBuilder) col2imConv(input, kernel backends.Op, p *convParams) (backends.Op, error) {
	c := b.composer()
	a := p.axes
	S := p.spatialRank
	dtype := p.input.DType
	N, C, KK, Cout := p.batch, p.inChannels, p.kkernel, p.outChannels
	X := kernels.Prod(p.inputSpatial)

	inPerm := append(append([]int{a.InputBatch}, a.InputSpatial...), a.InputChannels)
	x := c.reshape(c.transpose(input, inPerm...), N*X, C)
	kPerm := append(slices.Clone(a.KernelSpatial), a.KernelInputChannels, a.KernelOutputChannels)
	k := c.reshape(c.transpose(kernel, kPerm...), KK, C, Cout)
	products := c.dot(x, []int{1}, nil, k, []int{1}, nil) // [N·X, KK, Cout]
	productDims := append(append([]int{N}, p.inputSpatial...), KK, Cout)
	products = c.reshape(products, productDims...)

	outDims := append(append([]int{N}, p.outSpatial...), Cout)
	zero := c.zero(dtype)
	var out backends.Op
	for kk := range KK {
		starts, limits := make([]int, S+3), slices.Clone(productDims)
		starts[S+1], limits[S+1] = kk, kk+1
		inputDims := append(append([]int{N}, p.inputSpatial...), Cout)
		term := c.reshape(c.slice(products, starts, limits, nil), inputDims...) // [N, in..., Cout]
		// Input position i sits at i·d + lo in the dilated, padded input, which output o reads at
		// o·s + pos·kd: place it at u = i·d + lo - pos·kd in a row of length (O-1)·s + 1, keep every s-th.
		pos := kk
		padCfg := make([]backends.PadAxis, S+2)
		sliceStrides, sliceLimits, needSlice := ones(S+2), slices.Clone(outDims), false
		for i := S - 1; i >= 0; i-- {
			kpos := pos % p.kernelSpatial[i]
			pos /= p.kernelSpatial[i]
			d, s := p.inputDilations[i], p.strides[i]
			length := (p.outSpatial[i]-1)*s + 1
			start := p.paddings[i][0] - kpos*p.kernelDilations[i]
			grown := (p.inputSpatial[i]-1)*d + 1
			padCfg[1+i] = backends.PadAxis{Start: start, End: length - start - grown, Interior: d - 1}
			if s > 1 {
				needSlice = true
				sliceStrides[1+i], sliceLimits[1+i] = s, length
			}
		}
		term = c.padAll(term, zero, padCfg)
		if needSlice {
			term = c.slice(term, make([]int, S+2), sliceLimits, sliceStrides)
		}
		if out == nil {
			out = term
		} else {
			out = c.add(out, term)
		}
	}
	return c.toOutputLayout(out, p, "col2im")
}

func (b *goBuilder) im2colConv(input, kernel backends.Op, p *convParams) (backends.Op, error) {
	c := b.composer()
	a := p.axes
	S := p.spatialRank
	dtype := p.input.DType

	// Canonical layouts: input [N, spatial..., C], kernel [kspatial..., Cin/G, Cout].
	inPerm := append(append([]int{a.InputBatch}, a.InputSpatial...), a.InputChannels)
	x := c.transpose(input, inPerm...)
	kPerm := append(slices.Clone(a.KernelSpatial), a.KernelInputChannels, a.KernelOutputChannels)
	k := c.transpose(kernel, kPerm...)

	// Input dilation and padding in one Pad.
	padCfg := make([]backends.PadAxis, S+2)
	needPad := false
	for i := range S {
		padCfg[1+i] = backends.PadAxis{Start: p.paddings[i][0], End: p.paddings[i][1], Interior: p.inputDilations[i] - 1}
		if padCfg[1+i] != (backends.PadAxis{}) {
			needPad = true
		}
	}
	if needPad {
		x = c.padAll(x, c.zero(dtype), padCfg)
	}

	N, C, Y, KK := p.batch, p.inChannels, p.numOutputPositions, p.kkernel
	G, BG := p.channelGroupCount, p.batchGroupCount
	Cg := p.kernelInputChannels // == C/G
	Cout := p.outChannels
	outDims := append(append([]int{N / BG}, p.outSpatial...), Cout) // canonical output [N/BG, out..., Cout].

	// slab returns, for kernel position kk, the input values it meets at every output position: [N, out..., C].
	slab := func(kk int) backends.Op {
		return c.spatialWindow(x, p, unravel(kk, p.kernelSpatial), p.kernelDilations, p.outSpatial, p.strides)
	}

	var out backends.Op
	switch {
	case G > 1 && Cg == 1:
		// Depthwise (with channel multiplier M = Cout/C): out[..., c, m] = Σ_kk slab_kk[..., c] · k[kk, c, m].
		M := Cout / C
		kRows := c.reshape(k, KK, C, M)
		bcastDims := append(append([]int{N}, p.outSpatial...), C, M)
		rowDims := append(ones(S+1), C, M)
		for kk := range KK {
			s := c.reshape(slab(kk), append(append([]int{N}, p.outSpatial...), C, 1)...)
			if M > 1 {
				s = c.broadcast(s, shapes.Make(dtype, bcastDims...), iotaInts(S+3)...)
			}
			row := c.reshape(c.slice(kRows, []int{kk, 0, 0}, []int{kk + 1, C, M}, nil), rowDims...)
			term := c.mul(s, row)
			if out == nil {
				out = term
			} else {
				out = c.add(out, term)
			}
		}
		out = c.reshape(out, outDims...)

	default:
		// patches holds P[kk, n·Y+y, c] ([KK, N·Y, C]) when slicing per kernel position (kLoop), and
		// P[y, n, kk·C+c] ([Y, N, KK·C]) when slicing per output position. Slabs are stacked on the leading
		// axis, so Concatenate copies whole slabs (concatenating on the channels axis copies C values at a
		// time and cost as much as the slicing).
		patches, kLoop := c.patches(x, p, slab)
		Nb := N / BG
		switch {
		case G == 1 && BG == 1 && kLoop:
			out = c.dot(patches, []int{0, 2}, nil, c.reshape(k, KK, C, Cout), []int{0, 1}, nil) // [N·Y, Cout]
		case G == 1 && BG == 1:
			out = c.dot(patches, []int{2}, nil, c.reshape(k, KK*C, Cout), []int{0}, nil) // [Y, N, Cout]
			out = c.transpose(out, 1, 0, 2)
		case G > 1 && kLoop:
			lhs := c.reshape(patches, KK, N*Y, G, Cg)
			rhs := c.reshape(k, KK, Cg, G, Cout/G)
			out = c.dot(lhs, []int{0, 3}, []int{2}, rhs, []int{0, 1}, []int{2}) // [G, N·Y, Cout/G]
			out = c.transpose(out, 1, 0, 2)
		case G > 1:
			lhs := c.reshape(patches, Y, N, KK, G, Cg)
			rhs := c.reshape(k, KK, Cg, G, Cout/G)
			out = c.dot(lhs, []int{2, 4}, []int{3}, rhs, []int{0, 1}, []int{2}) // [G, Y, N, Cout/G]
			out = c.transpose(out, 2, 1, 0, 3)
		// Batch groups: input batch j·(N/BG)+n pairs with output channels [j·Cout/BG, (j+1)·Cout/BG).
		case kLoop:
			lhs := c.reshape(patches, KK, BG, Nb*Y, C)
			rhs := c.reshape(k, KK, C, BG, Cout/BG)
			out = c.dot(lhs, []int{0, 3}, []int{1}, rhs, []int{0, 1}, []int{2}) // [BG, Nb·Y, Cout/BG]
			out = c.transpose(out, 1, 0, 2)
		default:
			lhs := c.reshape(patches, Y, BG, Nb, KK*C)
			rhs := c.reshape(k, KK*C, BG, Cout/BG)
			out = c.dot(lhs, []int{3}, []int{1}, rhs, []int{0}, []int{1}) // [BG, Y, Nb, Cout/BG]
			out = c.transpose(out, 2, 1, 0, 3)
		}
		out = c.reshape(out, outDims...)
	}

	// Back to the requested output layout: canonical axis i holds output axis outAxes[i].
	return c.toOutputLayout(out, p, "im2col")
}

// toOutputLayout transposes a canonical [batch, spatial..., channels] result to the requested output
// layout (canonical axis i holds output axis outAxes[i]) and checks the shape against shape inference.
func (c *composer) toOutputLayout(out backends.Op, p *convParams, method string) (backends.Op, error) {
	a := p.axes
	outAxes := append(append([]int{a.OutputBatch}, a.OutputSpatial...), a.OutputChannels)
	perm := make([]int, len(outAxes))
	for i, axis := range outAxes {
		perm[axis] = i
	}
	out = c.transpose(out, perm...)
	if c.err != nil {
		return nil, errors.WithMessage(c.err, "ConvGeneral ("+method+")")
	}
	if got := c.shape(out); !got.Equal(p.output) {
		return nil, errors.Errorf("ConvGeneral (%s): built %s, expected %s", method, got, p.output)
	}
	return out, nil
}

// unravel turns a row-major flat index over dims into per-axis indices.
func unravel(flat int, dims []int) []int {
	pos := make([]int, len(dims))
	for i := len(dims) - 1; i >= 0; i-- {
		pos[i] = flat % dims[i]
		flat /= dims[i]
	}
	return pos
}

// spatialWindow slices the canonical padded input [N, spatial..., C] along each spatial axis i from
// pos[i]·posStep[i], taking count[i] values step[i] apart. A kernel position's slab (posStep = kernel
// dilation, count = output size, step = stride) and an output position's window (posStep = stride,
// count = kernel size, step = dilation) are the two uses.
func (c *composer) spatialWindow(x backends.Op, p *convParams, pos, posStep, count, step []int) backends.Op {
	S := p.spatialRank
	starts, limits, strides := make([]int, S+2), make([]int, S+2), ones(S+2)
	limits[0], limits[S+1] = p.batch, p.inChannels
	for i := range S {
		starts[1+i] = pos[i] * posStep[i]
		limits[1+i] = starts[1+i] + (count[i]-1)*step[i] + 1
		strides[1+i] = step[i]
	}
	return c.slice(x, starts, limits, strides)
}

// patches builds the im2col tensor from the padded canonical input: [KK, N·Y, C] slicing once per kernel
// position (kLoop) or, when there are fewer output positions than kernel positions (the kernel gradient,
// whose "kernel" is the output gradient), [Y, N, KK·C] slicing once per output position.
func (c *composer) patches(x backends.Op, p *convParams, slab func(kk int) backends.Op) (patches backends.Op, kLoop bool) {
	N, C, Y, KK := p.batch, p.inChannels, p.numOutputPositions, p.kkernel
	if KK <= Y {
		parts := make([]backends.Op, KK)
		for kk := range parts {
			parts[kk] = c.reshape(slab(kk), 1, N*Y, C)
		}
		return c.concat(0, parts...), true
	}
	parts := make([]backends.Op, Y)
	for y := range parts {
		// The input values output position y meets under every kernel position: [N, kspatial..., C].
		window := c.spatialWindow(x, p, unravel(y, p.outSpatial), p.strides, p.kernelSpatial, p.kernelDilations)
		parts[y] = c.reshape(window, 1, N, KK*C)
	}
	return c.concat(0, parts...), false
}

func (c *composer) dot(lhs backends.Op, lhsContracting, lhsBatch []int, rhs backends.Op, rhsContracting, rhsBatch []int) backends.Op {
	if c.err != nil {
		return nil
	}
	if lhsBatch == nil {
		lhsBatch, rhsBatch = []int{}, []int{}
	}
	return c.keep(c.b.DotGeneral(lhs, lhsContracting, lhsBatch, rhs, rhsContracting, rhsBatch))
}

func iotaInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
