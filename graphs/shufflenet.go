package graphs

import (
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ShuffleNet V2 as torchvision 0.14 builds it (shufflenetv2.py): a 3x3/2 conv stem with BN and ReLU, a
// 3x3/2 max-pool, three stages of units (the first of each stage strided, with two branches; the others
// split the channels in half and transform one half), a 1x1 conv to 1024, global pooling and a linear
// head. Every unit ends with a channel shuffle over two groups. Scopes mirror torchvision's module paths
// (conv1/0, stage2/0/branch1/2, conv5/1, fc), so DefaultTorchName yields the state_dict keys.

// shuffleNetV2Repeats are the units per stage; shuffleNetV2X10Channels the stem, the three stages' and
// the last conv's output channels of shufflenet_v2_x1_0.
var (
	shuffleNetV2Repeats     = [3]int{4, 8, 4}
	shuffleNetV2X10Channels = [5]int{24, 116, 232, 464, 1024}
)

func init() {
	Register(Spec{
		Name: "shufflenet_v2_x1_0",
		Description: "ShuffleNet V2 1.0x (torchvision): 3x3/2 stem, max-pool, units with channel split, depthwise 3x3 " +
			"and channel shuffle (stages of 4, 8, 4), 1x1 conv to 1024, avg-pool, fc; PyTorch's default init; 2.3M params",
		InputShape:    [3]int{224, 224, 3},
		Eval:          ImageNetEval,
		NumClasses:    1000,
		Reference:     "torchvision 0.14 shufflenet_v2_x1_0",
		NoWeightDecay: shuffleNetV2NoWeightDecay,
		Build:         buildShuffleNetV2,
	})
}

// shuffleNetV2NoWeightDecay excludes biases and every BatchNorm's weight: conv1/1 and conv5/1, entries 1
// and 3 of branch1, entries 1, 4 and 6 of branch2.
func shuffleNetV2NoWeightDecay(scope, name string) bool {
	if name != "weight" {
		return true
	}
	parts := strings.Split(strings.Trim(scope, "/"), "/")
	if len(parts) < 2 {
		return false
	}
	last, parent := parts[len(parts)-1], parts[len(parts)-2]
	switch parent {
	case "conv1", "conv5":
		return last == "1"
	case "branch1":
		return last == "1" || last == "3"
	case "branch2":
		return last == "1" || last == "4" || last == "6"
	}
	return false
}

// shuffleNetV2Widths scales the channels: every width by opts.Width, the stages' to an even number (the
// units split them in half).
func shuffleNetV2Widths(width float64) [5]int {
	var c [5]int
	for i, ch := range shuffleNetV2X10Channels {
		if i >= 1 && i <= 3 {
			c[i] = 2 * scaled(ch/2, width)
		} else {
			c[i] = scaled(ch, width)
		}
	}
	return c
}

// shuffleNetPadding is torchvision's symmetric padding or the override for the strided layers; "valid"
// would break the units' concatenations.
func shuffleNetPadding(opts Options, net string) Padding {
	p := opts.Padding.Or(PadSymmetric)
	if p == PadValid {
		panic("graphs: " + net + " needs padded convolutions, Padding \"valid\" would break its shapes")
	}
	return p
}

func buildShuffleNetV2(ctx *context.Context, x *Node, train bool, opts Options) *Node {
	x = ToCompute(x, opts)
	strided := shuffleNetPadding(opts, "ShuffleNetV2")
	ch := shuffleNetV2Widths(opts.Width)
	x = shuffleConvBN(ctx.In("conv1"), x, train, opts, ch[0], 3, 1, 2, strided, true)
	x = resnetMaxPool(x, strided)
	for stage, units := range shuffleNetV2Repeats {
		x = ShuffleV2Block(ctx.In("stage"+strconv.Itoa(stage+2)), x, train, opts, ch[stage+1], units, strided)
	}
	x = shuffleConvBN(ctx.In("conv5"), x, train, opts, ch[4], 1, 1, 1, strided, true)
	x = GlobalAvgPool(x)
	x = Dropout(ctx, x, opts.Dropout(0), train)
	x = Linear(ctx.In("fc"), x, LinearConfig{Units: classes(opts, 1000)}, opts)
	return FromCompute(x, opts)
}

// ShuffleV2Block is the bestiary's shuffleV2Block (ic oc nUnits): one ShuffleNet V2 stage of units
// (scopes ctx/0..n-1), the first strided by 2 and widening to out channels, the others at stride 1.
// strided is the padding of the strided depthwise convs.
func ShuffleV2Block(ctx *context.Context, x *Node, train bool, opts Options, out, units int, strided Padding) *Node {
	for i := range units {
		stride := 1
		if i == 0 {
			stride = 2
		}
		x = ShuffleUnit(ctx.In(strconv.Itoa(i)), x, train, opts, out, stride, strided)
	}
	return x
}

// shuffleConvBN is entries 0 (a bias-free conv, depthwise when groups is the input width) and 1 (its
// BatchNorm) of a Sequential, plus ReLU when relu; the scopes are ctx/0 and ctx/1, or, through
// shuffleConvBNAt, any pair of entries.
func shuffleConvBN(ctx *context.Context, x *Node, train bool, opts Options, filters, kernel, groups, stride int,
	strided Padding, relu bool) *Node {
	return shuffleConvBNAt(ctx, 0, x, train, opts, filters, kernel, groups, stride, strided, relu)
}

func shuffleConvBNAt(ctx *context.Context, at int, x *Node, train bool, opts Options, filters, kernel, groups, stride int,
	strided Padding, relu bool) *Node {
	p := PadSymmetric
	if stride > 1 {
		p = strided
	}
	x = Conv(ctx.In(strconv.Itoa(at)), x, ConvConfig{Filters: filters, Kernel: kernel, Stride: stride, Groups: groups,
		Padding: p}, opts)
	x = BatchNorm(ctx.In(strconv.Itoa(at+1)), x, train, TorchBN, opts)
	if relu {
		x = ReLU(x)
	}
	return x
}

// ShuffleUnit is torchvision's InvertedResidual. Strided: branch1 (depthwise 3x3/s-BN, 1x1-BN-ReLU) on
// the whole input, concatenated with branch2 (1x1-BN-ReLU, depthwise 3x3/s-BN, 1x1-BN-ReLU) on the whole
// input. Stride 1: the first half of the channels passes, branch2 transforms the second. Then the
// channels are shuffled over two groups.
func ShuffleUnit(ctx *context.Context, x *Node, train bool, opts Options, out, stride int, strided Padding) *Node {
	in := x.Shape().Dimensions[3]
	half := out / 2
	var left, right *Node
	if stride > 1 {
		b1 := ctx.In("branch1")
		left = shuffleConvBNAt(b1, 0, x, train, opts, in, 3, in, stride, strided, false)
		left = shuffleConvBNAt(b1, 2, left, train, opts, half, 1, 1, 1, strided, true)
		right = x
	} else {
		if in != out {
			panic("graphs: a stride-1 ShuffleNet unit needs as many input as output channels")
		}
		left = SliceAxis(x, 3, AxisRange(0, half))
		right = SliceAxis(x, 3, AxisRange(half, in))
	}
	b2 := ctx.In("branch2")
	right = shuffleConvBNAt(b2, 0, right, train, opts, half, 1, 1, 1, strided, true)
	right = shuffleConvBNAt(b2, 3, right, train, opts, half, 3, half, stride, strided, false)
	right = shuffleConvBNAt(b2, 5, right, train, opts, half, 1, 1, 1, strided, true)
	return ChannelShuffle(Concatenate([]*Node{left, right}, 3), 2)
}

// ChannelShuffle interleaves the channels (the last axis) of groups equal groups: channel g·(C/groups)+i
// moves to i·groups+g, as torchvision's channel_shuffle does in NCHW.
func ChannelShuffle(x *Node, groups int) *Node {
	dims := x.Shape().Dimensions
	c := dims[len(dims)-1]
	split := append(append([]int{}, dims[:len(dims)-1]...), groups, c/groups)
	r := len(split)
	y := Transpose(Reshape(x, split...), r-2, r-1)
	return Reshape(y, dims...)
}
