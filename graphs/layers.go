package graphs

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Layers work on NHWC activations ([batch, height, width, channels]) with HWIO kernels
// ([kh, kw, in/groups, out]). Each layer creates its variables directly in the scope it is given, so a
// net names scopes after the reference's module paths and TorchName maps them to state_dict keys.

// Padding selects how a convolution pads its input.
type Padding int

const (
	// PadDefault means the net's reference choice (PadSymmetric unless the net says otherwise).
	PadDefault Padding = iota
	// PadSymmetric pads d·(k−1)/2 on both sides, as PyTorch nets do for odd kernels.
	PadSymmetric
	// PadSame is XLA's/TensorFlow's "SAME": the output is ceil(in/stride) and the total padding is
	// split with the extra cell at the end; for an even input at stride 2 a 3x3 conv pads [0, 1].
	PadSame
	// PadValid does not pad.
	PadValid
)

// String names the padding as configs spell it.
func (p Padding) String() string {
	switch p {
	case PadSymmetric:
		return "symmetric"
	case PadSame:
		return "same"
	case PadValid:
		return "valid"
	}
	return "default"
}

// ParsePadding reads a config's padding name ("", "default", "symmetric", "same", "valid").
func ParsePadding(s string) (Padding, error) {
	switch s {
	case "", "default":
		return PadDefault, nil
	case "symmetric":
		return PadSymmetric, nil
	case "same":
		return PadSame, nil
	case "valid":
		return PadValid, nil
	}
	return PadDefault, fmt.Errorf("unknown padding %q, expected symmetric, same or valid", s)
}

// Or returns p, or def when p is PadDefault.
func (p Padding) Or(def Padding) Padding {
	if p == PadDefault {
		return def
	}
	return p
}

// SamePads returns XLA's SAME padding [lo, hi] of one spatial axis of size in.
func SamePads(in, kernel, stride, dilation int) [2]int {
	eff := (kernel-1)*dilation + 1
	out := (in + stride - 1) / stride
	total := max((out-1)*stride+eff-in, 0)
	return [2]int{total / 2, total - total/2}
}

// PadsFor returns the [lo, hi] padding of one spatial axis under mode p (PadDefault is symmetric).
func PadsFor(p Padding, in, kernel, stride, dilation int) [2]int {
	switch p {
	case PadSame:
		return SamePads(in, kernel, stride, dilation)
	case PadValid:
		return [2]int{0, 0}
	}
	pad := dilation * (kernel - 1) / 2
	return [2]int{pad, pad}
}

// ConvConfig describes one 2-D convolution.
type ConvConfig struct {
	Filters, Kernel int
	// Stride, Dilation and Groups default to 1 when 0. Groups equal to the input channels is a
	// depthwise convolution.
	Stride, Dilation, Groups int
	Padding                  Padding
	// Bias adds a bias vector.
	Bias bool
	// Init draws the kernel (default InitTorchDefault); BiasInit the bias (default: InitTorchDefault
	// when Init is the default too, else zeros, as the references do).
	Init, BiasInit Init
}

// Conv is a 2-D convolution; its variables are weight [k, k, in/groups, filters] and bias [filters].
func Conv(ctx *context.Context, x *Node, c ConvConfig, opts Options) *Node {
	stride, dilation, groups := max(c.Stride, 1), max(c.Dilation, 1), max(c.Groups, 1)
	in := x.Shape().Dimensions[3]
	if in%groups != 0 || c.Filters%groups != 0 {
		panic(fmt.Sprintf("graphs.Conv in %s: %d input and %d output channels are not divisible by %d groups",
			ctx.Scope(), in, c.Filters, groups))
	}
	fanIn := c.Kernel * c.Kernel * in / groups
	fanOut := c.Kernel * c.Kernel * c.Filters / groups
	init, biasInit := defaultInits(c.Init, c.BiasInit)
	w := AsDType(Param(ctx, x.Graph(), opts, "weight", init, fanIn, fanOut, c.Kernel, c.Kernel, in/groups, c.Filters), x)
	dims := x.Shape().Dimensions
	pads := [][2]int{
		PadsFor(c.Padding, dims[1], c.Kernel, stride, dilation),
		PadsFor(c.Padding, dims[2], c.Kernel, stride, dilation),
	}
	// Strides and dilations are always explicit: GoMLX v0.26 misreads nil ones on some paths.
	conv := Convolve(x, w).StridePerAxis(stride, stride).DilationPerAxis(dilation, dilation).PaddingPerDim(pads)
	if groups > 1 {
		conv = conv.ChannelGroupCount(groups)
	}
	y := conv.Done()
	out := y.Shape().Dimensions
	opts.Stats.Add(int64(out[1]) * int64(out[2]) * int64(c.Filters) * int64(fanIn))
	if c.Bias {
		b := AsDType(Param(ctx, x.Graph(), opts, "bias", biasInit, fanIn, fanOut, c.Filters), x)
		y = Add(y, Reshape(b, 1, 1, 1, c.Filters))
	}
	return y
}

// defaultInits applies the references' rule: PyTorch's default for both weight and bias unless the
// weight has its own scheme, in which case the bias starts at zero.
func defaultInits(init, biasInit Init) (Init, Init) {
	if init == nil {
		init = InitTorchDefault
		if biasInit == nil {
			biasInit = InitTorchDefault
		}
	}
	if biasInit == nil {
		biasInit = InitConst(0)
	}
	return init, biasInit
}

// LinearConfig describes one fully connected layer over the last axis.
type LinearConfig struct {
	Units int
	// NoBias drops the bias vector.
	NoBias bool
	// Init draws the weight (default InitTorchDefault); BiasInit the bias (default: InitTorchDefault
	// when Init is the default too, else zeros).
	Init, BiasInit Init
}

// Linear maps the last axis of x to c.Units; its variables are weight [in, units] and bias [units].
func Linear(ctx *context.Context, x *Node, c LinearConfig, opts Options) *Node {
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	init, biasInit := defaultInits(c.Init, c.BiasInit)
	w := AsDType(Param(ctx, x.Graph(), opts, "weight", init, in, c.Units, in, c.Units), x)
	rows := x.Shape().Size() / in
	opts.Stats.Add(int64(rows/max(dims[0], 1)) * int64(in) * int64(c.Units))
	y := Dot(Reshape(x, -1, in), w)
	if !c.NoBias {
		b := AsDType(Param(ctx, x.Graph(), opts, "bias", biasInit, in, c.Units, c.Units), x)
		y = Add(y, InsertAxes(b, 0))
	}
	outDims := append(append([]int{}, dims[:len(dims)-1]...), c.Units)
	return Reshape(y, outDims...)
}

// MaxPool2D takes the maximum over k×k windows at the given stride with symmetric zero-free padding
// pad (padded cells never win), as nn.MaxPool2d(k, stride, pad). Ties route the gradient to the first
// maximal cell, as XLA's select-and-scatter does.
//
// Half-precision inputs are pooled in float32 (the same maxima, exactly): GoMLX v0.26's xla builder
// writes the bfloat16 zero of the pool's gradient (select_and_scatter) as a malformed constant that
// PJRT refuses to parse (TestEmitBF16ConstantsWellFormed).
func MaxPool2D(x *Node, kernel, stride, pad int) *Node {
	if dtype := x.DType(); HalfPrecision(x) {
		return ConvertDType(MaxPool2D(ConvertDType(x, dtypes.Float32), kernel, stride, pad), dtype)
	}
	return MaxPool(x).Window(kernel).Strides(stride).
		PaddingPerDim([][2]int{{pad, pad}, {pad, pad}}).Done()
}

// AvgPool2D averages over k×k windows without padding.
func AvgPool2D(x *Node, kernel, stride int) *Node {
	return MeanPool(x).Window(kernel).Strides(stride).NoPadding().Done()
}

// GlobalAvgPool averages NHWC images over height and width to [batch, channels].
func GlobalAvgPool(x *Node) *Node {
	return ReduceMean(x, 1, 2)
}

// Flatten reshapes [batch, ...] to [batch, rest].
func Flatten(x *Node) *Node {
	return Reshape(x, x.Shape().Dimensions[0], -1)
}

// scaled applies a width multiplier, never going below one unit.
func scaled(units int, width float64) int {
	if width == 0 {
		width = 1
	}
	return max(1, int(math.Round(float64(units)*width)))
}

// MakeDivisible rounds v to the nearest multiple of divisor, not below minValue (default divisor)
// and not more than 10% below v: the channel rounding of MobileNet/EfficientNet/timm.
func MakeDivisible(v float64, divisor, minValue int) int {
	if minValue == 0 {
		minValue = divisor
	}
	n := max(minValue, int(v+float64(divisor)/2)/divisor*divisor)
	if float64(n) < 0.9*v {
		n += divisor
	}
	return n
}

// classes resolves the number of classes of a build.
func classes(opts Options, def int) int {
	if opts.NumClasses > 0 {
		return opts.NumClasses
	}
	return def
}

// ZeroPad adds lo zeros before and hi after x along axis, by concatenation: GoMLX v0.26's Pad has no
// gradient (Swin's window padding, Mamba's and WaveNet's causal shifts, the bestiary's borders use this).
func ZeroPad(x *Node, axis, lo, hi int) *Node {
	zeros := func(n int) *Node {
		dims := slices.Clone(x.Shape().Dimensions)
		dims[axis] = n
		return Zeros(x.Graph(), shapes.Make(x.DType(), dims...))
	}
	parts := []*Node{x}
	if lo > 0 {
		parts = append([]*Node{zeros(lo)}, parts...)
	}
	if hi > 0 {
		parts = append(parts, zeros(hi))
	}
	if len(parts) == 1 {
		return x
	}
	return Concatenate(parts, axis)
}
