package bestiary

import (
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The bestiary's vision blocks that no registered net builds: ShuffleNet v1's units, Darknet-53's
// residual pairs and a CSP stage built from them, plus the form of ShuffleNet V2's stage that keeps the
// width (the registered nets' blocks are DenseBlock, TransitionLayer, InceptionModule, ShuffleV2Block
// and SwinStage, next to their nets). docs/bestiary.md#vision-blocks defines each.

// darknetSlope is Darknet's LeakyReLU slope.
const darknetSlope = 0.1

// LeakyReLU is max(x, 0) + slope·min(x, 0) (nn.LeakyReLU(slope)).
func LeakyReLU(x *Node, slope float64) *Node {
	return Where(GreaterOrEqual(x, ZerosLike(x)), x, MulScalar(x, slope))
}

// ShuffleV2Units is the bestiary's shuffleV2Block (ic oc nUnits) for any widths: torchvision's stage
// (ShuffleV2Block: the first unit strided by 2 and widening to out) when out differs from the input's
// width, else units stride-1 units that keep it. Scopes ctx/0..units-1, as ShuffleV2Block's.
func ShuffleV2Units(ctx *context.Context, x *Node, train bool, opts graphs.Options, out, units int) *Node {
	if x.Shape().Dimensions[3] != out {
		return graphs.ShuffleV2Block(ctx, x, train, opts, out, units, graphs.PadSymmetric)
	}
	for i := range units {
		x = graphs.ShuffleUnit(ctx.In(strconv.Itoa(i)), x, train, opts, out, 1, graphs.PadSymmetric)
	}
	return x
}

// ShuffleBlock is the bestiary's shuffleBlock (ic oc groups nUnits): units ShuffleNet v1 units (scopes
// ctx/0..units-1; Zhang et al. 2018, Fig. 2 b and c), each a grouped 1×1 conv to out/4 channels
// (compress, BN, ReLU), a channel shuffle over groups, a depthwise 3×3 (depthwise, BN) and a grouped
// 1×1 conv (expand, BN). When the width changes, the first unit is strided: its depthwise conv has
// stride 2, its expand conv gives out−ic channels, and the shortcut, a 3×3/2 average pool padded by 1
// (zeros counted, nn.AvgPool2d's default), is concatenated before them; otherwise the shortcut is the
// identity and is added. ReLU follows the join. Convs are bias-free with PyTorch's default init.
func ShuffleBlock(ctx *context.Context, x *Node, train bool, opts graphs.Options, out, groups, units int) *Node {
	for i := range units {
		x = shuffleV1Unit(ctx.In(strconv.Itoa(i)), x, train, opts, out, groups)
	}
	return x
}

func shuffleV1Unit(ctx *context.Context, x *Node, train bool, opts graphs.Options, out, groups int) *Node {
	in := x.Shape().Dimensions[3]
	mid, branchOut, stride := out/4, out, 1
	if in != out {
		branchOut, stride = out-in, 2
	}
	conv := func(name string, x *Node, filters, kernel, stride, groups int) *Node {
		x = graphs.Conv(ctx.In(name), x, graphs.ConvConfig{Filters: filters, Kernel: kernel, Stride: stride, Groups: groups, Padding: graphs.PadSymmetric}, opts)
		return graphs.BatchNorm(ctx.In(name+"_bn"), x, train, graphs.TorchBN, opts)
	}
	y := graphs.ReLU(conv("compress", x, mid, 1, 1, groups))
	y = graphs.ChannelShuffle(y, groups)
	y = conv("depthwise", y, mid, 3, stride, mid)
	y = conv("expand", y, branchOut, 1, 1, groups)
	if stride == 1 {
		return graphs.ReLU(Add(x, y))
	}
	short := graphs.AvgPool2D(zeroPadBoth(x, 1), 3, 2)
	return graphs.ReLU(Concatenate([]*Node{short, y}, 3))
}

// zeroPadBoth pads the height and width of NHWC x by n zeros on each side (F.pad); concatenations, as
// GoMLX v0.26's Pad has no gradient.
func zeroPadBoth(x *Node, n int) *Node {
	return graphs.ZeroPad(graphs.ZeroPad(x, 1, n, n), 2, n, n)
}

// darknetConv is Darknet's convolutional layer: a bias-free conv (scope name), BatchNorm (name_bn,
// PyTorch's eps and momentum) and LeakyReLU(0.1).
func darknetConv(ctx *context.Context, name string, x *Node, train bool, opts graphs.Options, filters, kernel int) *Node {
	x = graphs.Conv(ctx.In(name), x, graphs.ConvConfig{Filters: filters, Kernel: kernel, Padding: graphs.PadSymmetric}, opts)
	return LeakyReLU(graphs.BatchNorm(ctx.In(name+"_bn"), x, train, graphs.TorchBN, opts), darknetSlope)
}

// DarknetBlock is the bestiary's darknetBlock (channels nBlocks): blocks of Darknet-53's residual pair
// (Redmon & Farhadi 2018, Table 1; scopes ctx/0..n-1), x + conv2(conv1(x)) with conv1 a 1×1 to
// channels/2 and conv2 a 3×3 back to channels, each a darknetConv. The width and size are kept.
func DarknetBlock(ctx *context.Context, x *Node, train bool, opts graphs.Options, blocks int) *Node {
	c := x.Shape().Dimensions[3]
	for i := range blocks {
		b := ctx.In(strconv.Itoa(i))
		y := darknetConv(b, "conv1", x, train, opts, c/2, 1)
		y = darknetConv(b, "conv2", y, train, opts, c, 3)
		x = Add(x, y)
	}
	return x
}

// CSPBlock is the bestiary's cspBlock (ic oc nBlocks) in the form of Scaled-YOLOv4's BottleneckCSP
// (Wang et al. 2021; YOLOv4's CSPDarknet stage without its strided entry conv), with Darknet's pairs and
// LeakyReLU(0.1): with h = out/2, y1 = cv3(m(cv1(x))) where cv1 is a darknetConv 1×1 to h, m a
// DarknetBlock of blocks pairs and cv3 a bias-free 1×1 conv; y2 = cv2(x), a bias-free 1×1 conv to h;
// then cv4(LeakyReLU(bn(concat(y1, y2)))), cv4 a darknetConv 1×1 to out. The size is kept.
func CSPBlock(ctx *context.Context, x *Node, train bool, opts graphs.Options, out, blocks int) *Node {
	h := out / 2
	plain := func(name string, x *Node) *Node {
		return graphs.Conv(ctx.In(name), x, graphs.ConvConfig{Filters: h, Kernel: 1, Padding: graphs.PadSymmetric}, opts)
	}
	y1 := darknetConv(ctx, "cv1", x, train, opts, h, 1)
	y1 = plain("cv3", DarknetBlock(ctx.In("m"), y1, train, opts, blocks))
	y2 := plain("cv2", x)
	y := Concatenate([]*Node{y1, y2}, 3)
	y = LeakyReLU(graphs.BatchNorm(ctx.In("bn"), y, train, graphs.TorchBN, opts), darknetSlope)
	return darknetConv(ctx, "cv4", y, train, opts, out, 1)
}
