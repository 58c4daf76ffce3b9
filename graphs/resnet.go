package graphs

import (
	"fmt"
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ResNets as torchvision 0.14 builds them (resnet.py): a 7x7/2 stem, a 3x3/2 max-pool, four stages of
// BasicBlocks (ResNet-18/34) or Bottlenecks (ResNet-50 and up, "v1.5": the stride sits on the 3x3), global
// average pooling and a linear head. Scopes mirror torchvision's module paths (conv1, bn1,
// layer2/0/downsample/0, fc), so DefaultTorchName yields the state_dict keys.

// resnetArch is one row of the family: the block kind and the number of blocks per stage.
type resnetArch struct {
	bottleneck bool
	blocks     [4]int
}

// resnetStageWidths are the "planes" of the four stages; a Bottleneck outputs 4× its planes.
var resnetStageWidths = [4]int{64, 128, 256, 512}

func init() {
	const desc = "torchvision %s: 7x7/2 stem, max-pool, %s blocks %v, avg-pool, fc; kaiming-normal(fan_out) " +
		"convs, BN eps 1e-5 decay 0.9. Padding symmetric as PyTorch; Padding \"same\" moves the stem conv, " +
		"the max-pool and the strided convs to XLA's SAME phase. Optional drop path (timm-style ramp) and dropout " +
		"before fc, off by default"
	for _, r := range []struct {
		name string
		arch resnetArch
	}{
		{"resnet34", resnetArch{bottleneck: false, blocks: [4]int{3, 4, 6, 3}}},
		{"resnet50", resnetArch{bottleneck: true, blocks: [4]int{3, 4, 6, 3}}},
	} {
		kind := "BasicBlock"
		if r.arch.bottleneck {
			kind = "Bottleneck (v1.5)"
		}
		arch := r.arch
		Register(Spec{
			Name:          r.name,
			Description:   fmt.Sprintf(desc, r.name, kind, arch.blocks),
			InputShape:    [3]int{224, 224, 3},
			Eval:          ImageNetEval,
			NumClasses:    1000,
			Reference:     "torchvision 0.14 " + r.name,
			NoWeightDecay: resnetNoWeightDecay,
			ZeroInitLast:  true,
			FP32Head:      true,
			Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
				return buildResNet(ctx, x, train, opts, arch)
			},
		})
	}
}

// resnetNoWeightDecay puts biases and every BatchNorm parameter (scopes bn1..bn3 and downsample/1) in the
// no-decay group.
func resnetNoWeightDecay(scope, name string) bool {
	if name == "bias" {
		return true
	}
	last := scope[strings.LastIndex(scope, "/")+1:]
	return strings.HasPrefix(last, "bn") || strings.HasSuffix(scope, "/downsample/1")
}

// resnetPadding resolves the padding of the strided layers: torchvision's symmetric padding, or the
// override. Stride-1 layers pad symmetrically in every mode (for odd kernels SAME is the same thing).
func resnetPadding(opts Options) Padding {
	p := opts.Padding.Or(PadSymmetric)
	if p == PadValid {
		panic("graphs: ResNet needs padded convolutions, Padding \"valid\" would break the residual shapes")
	}
	return p
}

func buildResNet(ctx *context.Context, x *Node, train bool, opts Options, arch resnetArch) *Node {
	x = ToCompute(x, opts)
	strided := resnetPadding(opts)
	inplanes := scaled(resnetStageWidths[0], opts.Width)
	x = Conv(ctx.In("conv1"), x, ConvConfig{Filters: inplanes, Kernel: 7, Stride: 2, Padding: strided,
		Init: InitKaimingNormalFanOut}, opts)
	x = ReLU(BatchNorm(ctx.In("bn1"), x, train, TorchBN, opts))
	x = resnetMaxPool(x, strided)

	total := 0
	for _, n := range arch.blocks {
		total += n
	}
	dropPath := opts.DropPath(0)
	index := 0
	for stage, n := range arch.blocks {
		planes := scaled(resnetStageWidths[stage], opts.Width)
		for b := range n {
			stride := 1
			if b == 0 && stage > 0 {
				stride = 2
			}
			// timm's ramp: 0 for the first block, the full rate for the last.
			rate := 0.0
			if total > 1 {
				rate = dropPath * float64(index) / float64(total-1)
			}
			bctx := ctx.In("layer" + strconv.Itoa(stage+1)).In(strconv.Itoa(b))
			if arch.bottleneck {
				x = resnetBottleneck(bctx, x, train, opts, planes, stride, strided, rate)
			} else {
				x = resnetBasicBlock(bctx, x, train, opts, planes, stride, strided, rate)
			}
			index++
		}
	}
	x = GlobalAvgPool(x)
	x = Dropout(ctx, x, opts.Dropout(0), train)
	if opts.FP32Head {
		x = FromCompute(x, opts) // the classifier's dot in float32, as the book's bf16 ResNets run it
	}
	x = Linear(ctx.In("fc"), x, LinearConfig{Units: classes(opts, 1000)}, opts)
	return FromCompute(x, opts)
}

// resnetMaxPool is nn.MaxPool2d(3, 2, padding=1), or under PadSame a 3x3/2 max-pool with SAME padding.
func resnetMaxPool(x *Node, p Padding) *Node {
	if p != PadSame {
		return MaxPool2D(x, 3, 2, 1)
	}
	dims := x.Shape().Dimensions
	return MaxPool(x).Window(3).Strides(2).
		PaddingPerDim([][2]int{SamePads(dims[1], 3, 2, 1), SamePads(dims[2], 3, 2, 1)}).Done()
}

// resnetConv is a bias-free kaiming-normal(fan_out) convolution; strided ones use the strided padding.
func resnetConv(ctx *context.Context, x *Node, opts Options, filters, kernel, stride int, strided Padding) *Node {
	p := PadSymmetric
	if stride > 1 {
		p = strided
	}
	return Conv(ctx, x, ConvConfig{Filters: filters, Kernel: kernel, Stride: stride, Padding: p,
		Init: InitKaimingNormalFanOut}, opts)
}

// resnetShortcut is the identity, or downsample = Sequential(conv1x1(stride), BatchNorm) when the shape
// changes.
func resnetShortcut(ctx *context.Context, x *Node, train bool, opts Options, out, stride int, strided Padding) *Node {
	if stride == 1 && x.Shape().Dimensions[3] == out {
		return x
	}
	ds := ctx.In("downsample")
	y := resnetConv(ds.In("0"), x, opts, out, 1, stride, strided)
	return BatchNorm(ds.In("1"), y, train, TorchBN, opts)
}

// resnetLastBN is the BatchNorm that ends a block's residual branch: γ starts at 0 under
// opts.ZeroInitLast (timm's zero_init_last; RSB-A3 trains with it), at 1 otherwise (torchvision's default).
func resnetLastBN(opts Options) BNConfig {
	c := TorchBN
	c.ZeroGamma = opts.ZeroInitLast
	return c
}

// resnetBasicBlock: conv3x3(stride)-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU.
func resnetBasicBlock(ctx *context.Context, x *Node, train bool, opts Options, planes, stride int, strided Padding, dropPath float64) *Node {
	y := resnetConv(ctx.In("conv1"), x, opts, planes, 3, stride, strided)
	y = ReLU(BatchNorm(ctx.In("bn1"), y, train, TorchBN, opts))
	y = resnetConv(ctx.In("conv2"), y, opts, planes, 3, 1, strided)
	y = BatchNorm(ctx.In("bn2"), y, train, resnetLastBN(opts), opts)
	y = DropPath(ctx, y, dropPath, train)
	return ReLU(Add(y, resnetShortcut(ctx, x, train, opts, planes, stride, strided)))
}

// resnetBottleneck: conv1x1-BN-ReLU, conv3x3(stride)-BN-ReLU, conv1x1(4×planes)-BN, plus the shortcut,
// then ReLU.
func resnetBottleneck(ctx *context.Context, x *Node, train bool, opts Options, planes, stride int, strided Padding, dropPath float64) *Node {
	out := 4 * planes
	y := resnetConv(ctx.In("conv1"), x, opts, planes, 1, 1, strided)
	y = ReLU(BatchNorm(ctx.In("bn1"), y, train, TorchBN, opts))
	y = resnetConv(ctx.In("conv2"), y, opts, planes, 3, stride, strided)
	y = ReLU(BatchNorm(ctx.In("bn2"), y, train, TorchBN, opts))
	y = resnetConv(ctx.In("conv3"), y, opts, out, 1, 1, strided)
	y = BatchNorm(ctx.In("bn3"), y, train, resnetLastBN(opts), opts)
	y = DropPath(ctx, y, dropPath, train)
	return ReLU(Add(y, resnetShortcut(ctx, x, train, opts, out, stride, strided)))
}
