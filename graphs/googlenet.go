package graphs

import (
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// GoogLeNet (Inception v1) as torchvision 0.14 builds it (googlenet.py) without the auxiliary heads and
// without transform_input: BasicConv2d stem (7x7/2, 1x1, 3x3) with ceil-mode max-pools, nine inception
// modules in three groups, global pooling, dropout 0.2 and a linear head. BasicConv2d is a bias-free conv,
// BatchNorm with eps 1e-3, ReLU. Scopes mirror torchvision's module paths (conv1/conv, conv1/bn,
// inception4a/branch2/1/conv, fc), so DefaultTorchName yields the state_dict keys.

// inceptionRow is one Inception module's widths: torchvision's (ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5,
// pool_proj). torchvision's "5x5" branch uses a 3x3 conv (the paper has 5x5), which is what we build.
type inceptionRow struct {
	name                               string
	b1, b2reduce, b2, b3reduce, b3, b4 int
	poolAfter                          int // 0: none; else a ceil-mode max-pool of that kernel, stride 2
}

var googLeNetRows = []inceptionRow{
	{"inception3a", 64, 96, 128, 16, 32, 32, 0},
	{"inception3b", 128, 128, 192, 32, 96, 64, 3},
	{"inception4a", 192, 96, 208, 16, 48, 64, 0},
	{"inception4b", 160, 112, 224, 24, 64, 64, 0},
	{"inception4c", 128, 128, 256, 24, 64, 64, 0},
	{"inception4d", 112, 144, 288, 32, 64, 64, 0},
	{"inception4e", 256, 160, 320, 32, 128, 128, 2},
	{"inception5a", 256, 160, 320, 32, 128, 128, 0},
	{"inception5b", 384, 192, 384, 48, 128, 128, 0},
}

// googLeNetBN is BasicConv2d's BatchNorm2d(eps=0.001) at PyTorch's momentum 0.1.
var googLeNetBN = BNConfig{Epsilon: 1e-3, Decay: 0.9}

func init() {
	Register(Spec{
		Name: "googlenet",
		Description: "GoogLeNet (torchvision, no aux heads, transform_input off): conv-BN(eps 1e-3)-ReLU stem, " +
			"ceil-mode max-pools, 9 inception modules (1x1 | 1x1-3x3 | 1x1-3x3 | pool-1x1), avg-pool, dropout 0.2, fc; " +
			"truncated-normal(0.01) init; 6.6M params",
		InputShape:    [3]int{224, 224, 3},
		Eval:          ImageNetEval,
		NumClasses:    1000,
		Reference:     "torchvision 0.14 googlenet (aux_logits=False)",
		NoWeightDecay: googLeNetNoWeightDecay,
		// torchvision's ImageNet checkpoint keeps the (untrained) auxiliary heads.
		TorchIgnoredKey: func(key string) bool { return strings.HasPrefix(key, "aux1.") || strings.HasPrefix(key, "aux2.") },
		Build:           buildGoogLeNet,
	})
}

// googLeNetNoWeightDecay excludes biases and every BasicConv2d's BatchNorm weight (scopes .../bn).
func googLeNetNoWeightDecay(scope, name string) bool {
	return name != "weight" || len(scope) >= 3 && scope[len(scope)-3:] == "/bn"
}

func buildGoogLeNet(ctx *context.Context, x *Node, train bool, opts Options) *Node {
	x = ToCompute(x, opts)
	strided := shuffleNetPadding(opts, "GoogLeNet")
	w := func(c int) int { return scaled(c, opts.Width) }
	x = BasicConv2d(ctx.In("conv1"), x, train, opts, w(64), 7, 2, strided)
	x = CeilMaxPool2D(x, 3, 2, 0)
	x = BasicConv2d(ctx.In("conv2"), x, train, opts, w(64), 1, 1, strided)
	x = BasicConv2d(ctx.In("conv3"), x, train, opts, w(192), 3, 1, strided)
	x = CeilMaxPool2D(x, 3, 2, 0)
	for _, r := range googLeNetRows {
		x = InceptionModule(ctx.In(r.name), x, train, opts, w(r.b1), w(r.b2reduce), w(r.b2), w(r.b3reduce), w(r.b3), w(r.b4))
		if r.poolAfter > 0 {
			x = CeilMaxPool2D(x, r.poolAfter, 2, 0)
		}
	}
	x = GlobalAvgPool(x)
	x = Dropout(ctx, x, opts.Dropout(0.2), train)
	x = Linear(ctx.In("fc"), x, LinearConfig{Units: classes(opts, 1000), Init: InitTruncNormal(0.01),
		BiasInit: InitTorchDefault}, opts)
	return FromCompute(x, opts)
}

// BasicConv2d is torchvision GoogLeNet's conv (bias-free, truncated-normal 0.01 init, scope ctx/conv),
// BatchNorm (eps 1e-3, scope ctx/bn) and ReLU. Strided convs pad by the strided mode.
func BasicConv2d(ctx *context.Context, x *Node, train bool, opts Options, filters, kernel, stride int, strided Padding) *Node {
	p := PadSymmetric
	if stride > 1 {
		p = strided
	}
	x = Conv(ctx.In("conv"), x, ConvConfig{Filters: filters, Kernel: kernel, Stride: stride, Padding: p,
		Init: InitTruncNormal(0.01)}, opts)
	return ReLU(BatchNorm(ctx.In("bn"), x, train, googLeNetBN, opts))
}

// InceptionModule is the bestiary's inceptionModule (ic b1out b2reduce b2out b3reduce b3out b4out) as
// torchvision builds it: four branches concatenated on the channels, branch1 a 1x1 conv, branch2 1x1 then
// 3x3, branch3 1x1 then 3x3 (torchvision's; the paper's is 5x5), branch4 a 3x3/1 max-pool then a 1x1 conv;
// every conv a BasicConv2d. The output has b1out+b2out+b3out+b4out channels.
func InceptionModule(ctx *context.Context, x *Node, train bool, opts Options, b1, b2reduce, b2, b3reduce, b3, b4 int) *Node {
	conv := func(scope *context.Context, x *Node, filters, kernel int) *Node {
		return BasicConv2d(scope, x, train, opts, filters, kernel, 1, PadSymmetric)
	}
	y1 := conv(ctx.In("branch1"), x, b1, 1)
	y2 := conv(ctx.In("branch2").In("1"), conv(ctx.In("branch2").In("0"), x, b2reduce, 1), b2, 3)
	y3 := conv(ctx.In("branch3").In("1"), conv(ctx.In("branch3").In("0"), x, b3reduce, 1), b3, 3)
	y4 := conv(ctx.In("branch4").In("1"), MaxPool2D(x, 3, 1, 1), b4, 1)
	return Concatenate([]*Node{y1, y2, y3, y4}, 3)
}

// CeilMaxPool2D is nn.MaxPool2d(k, stride, pad, ceil_mode=True): the output is ceil((in+2·pad−k)/stride)+1
// (less one when the last window would start in the padding), the missing cells at the end padded so
// they never win.
func CeilMaxPool2D(x *Node, kernel, stride, pad int) *Node {
	dims := x.Shape().Dimensions
	pads := make([][2]int, 2)
	for i, in := range dims[1:3] {
		out := (in+2*pad-kernel+stride-1)/stride + 1
		if (out-1)*stride >= in+pad {
			out--
		}
		pads[i] = [2]int{pad, max(pad, (out-1)*stride+kernel-in-pad)}
	}
	if pads[0][1] == pad && pads[1][1] == pad {
		return MaxPool2D(x, kernel, stride, pad)
	}
	return maxPoolPadded(x, kernel, stride, pads)
}

// maxPoolPadded is a max-pool with explicit [lo, hi] padding per spatial axis (padded cells never win);
// half-precision inputs pool in float32, as MaxPool2D does.
func maxPoolPadded(x *Node, kernel, stride int, pads [][2]int) *Node {
	if dtype := x.DType(); HalfPrecision(x) {
		return ConvertDType(maxPoolPadded(ConvertDType(x, dtypes.Float32), kernel, stride, pads), dtype)
	}
	return MaxPool(x).Window(kernel).Strides(stride).PaddingPerDim(pads).Done()
}
