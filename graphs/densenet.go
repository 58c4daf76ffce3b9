package graphs

import (
	"regexp"
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// DenseNet-BC as torchvision 0.14 builds it (densenet.py): a 7x7/2 conv stem with BN and ReLU, a 3x3/2
// max-pool, four dense blocks joined by transition layers, a final BatchNorm, ReLU, global pooling and a
// linear head. Scopes mirror torchvision's module paths (features/denseblock1/denselayer1/norm1,
// features/transition1/conv, features/norm5, classifier), so DefaultTorchName yields the state_dict keys.

// denseNetArch is one row of the family: the growth rate k, the layers per dense block, the stem's
// width and the bottleneck factor (the 1x1 conv outputs bnSize·k channels).
type denseNetArch struct {
	growth, stem, bnSize int
	blocks               [4]int
}

var denseNet121 = denseNetArch{growth: 32, stem: 64, bnSize: 4, blocks: [4]int{6, 12, 24, 16}}

func init() {
	Register(Spec{
		Name: "densenet121",
		Description: "DenseNet-121 (torchvision): 7x7/2 stem, max-pool, dense blocks of 6, 12, 24, 16 layers " +
			"(BN-ReLU-1x1-BN-ReLU-3x3, growth 32, bottleneck 4x) joined by transitions (BN-ReLU-1x1 halving the " +
			"channels, 2x2 avg-pool), BN-ReLU, avg-pool, fc; kaiming-normal(fan_in) convs; 8.0M params",
		InputShape:     [3]int{224, 224, 3},
		Eval:           ImageNetEval,
		NumClasses:     1000,
		Reference:      "torchvision 0.14 densenet121",
		NoWeightDecay:  denseNetNoWeightDecay,
		TorchLegacyKey: denseNetLegacyKey,
		Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
			return buildDenseNet(ctx, x, train, opts, denseNet121)
		},
	})
}

// denseNetLegacyKeyPattern finds the dense layers' module names as torchvision's densenet checkpoints
// spell them, from when the modules were named "norm.1", "conv.2": ".denselayerN.norm.1." and the like.
var denseNetLegacyKeyPattern = regexp.MustCompile(`(\.denselayer\d+\.(?:norm|conv))\.([12])\.`)

// denseNetLegacyKey renames "...denselayerN.norm.1.weight" to "...denselayerN.norm1.weight", as
// torchvision does when it loads its densenet checkpoints; other keys are unchanged.
func denseNetLegacyKey(key string) string {
	return denseNetLegacyKeyPattern.ReplaceAllString(key, "${1}${2}.")
}

// denseNetNoWeightDecay excludes biases and every BatchNorm's weight (scopes norm, norm0..norm5).
func denseNetNoWeightDecay(scope, name string) bool {
	return name != "weight" || strings.HasPrefix(scope[strings.LastIndex(scope, "/")+1:], "norm")
}

func buildDenseNet(ctx *context.Context, x *Node, train bool, opts Options, arch denseNetArch) *Node {
	x = ToCompute(x, opts)
	strided := shuffleNetPadding(opts, "DenseNet")
	growth := scaled(arch.growth, opts.Width)
	f := ctx.In("features")
	x = Conv(f.In("conv0"), x, ConvConfig{Filters: scaled(arch.stem, opts.Width), Kernel: 7, Stride: 2,
		Padding: strided, Init: InitKaimingNormalFanIn}, opts)
	x = ReLU(BatchNorm(f.In("norm0"), x, train, TorchBN, opts))
	x = resnetMaxPool(x, strided)
	for b, layers := range arch.blocks {
		x = DenseBlock(f.In("denseblock"+strconv.Itoa(b+1)), x, train, opts, growth, arch.bnSize, layers)
		if b < len(arch.blocks)-1 {
			x = TransitionLayer(f.In("transition"+strconv.Itoa(b+1)), x, train, opts, x.Shape().Dimensions[3]/2)
		}
	}
	x = ReLU(BatchNorm(f.In("norm5"), x, train, TorchBN, opts))
	x = GlobalAvgPool(x)
	x = Dropout(ctx, x, opts.Dropout(0), train)
	x = Linear(ctx.In("classifier"), x, LinearConfig{Units: classes(opts, 1000), Init: InitTorchDefault,
		BiasInit: InitConst(0)}, opts)
	return FromCompute(x, opts)
}

// DenseBlock is the bestiary's denseBlock (ic growthRate nLayers) with DenseNet-BC's bottleneck: each of
// the layers (scopes denselayer1..n) sees the concatenation of the block's input and every earlier
// layer's output and adds growth channels, norm1-ReLU-conv1 (1x1 to bnSize·growth) then norm2-ReLU-conv2
// (3x3 to growth); the block returns the input and all new channels, ic + layers·growth wide.
func DenseBlock(ctx *context.Context, x *Node, train bool, opts Options, growth, bnSize, layers int) *Node {
	features := []*Node{x}
	for i := range layers {
		l := ctx.In("denselayer" + strconv.Itoa(i+1))
		y := x
		if len(features) > 1 {
			y = Concatenate(features, 3)
		}
		y = ReLU(BatchNorm(l.In("norm1"), y, train, TorchBN, opts))
		y = Conv(l.In("conv1"), y, ConvConfig{Filters: bnSize * growth, Kernel: 1, Init: InitKaimingNormalFanIn}, opts)
		y = ReLU(BatchNorm(l.In("norm2"), y, train, TorchBN, opts))
		y = Conv(l.In("conv2"), y, ConvConfig{Filters: growth, Kernel: 3, Padding: PadSymmetric,
			Init: InitKaimingNormalFanIn}, opts)
		features = append(features, y)
	}
	return Concatenate(features, 3)
}

// TransitionLayer is the bestiary's transitionLayer (ic oc): norm-ReLU-conv (1x1 to out channels) then a
// 2x2/2 average pool, which floors odd sizes as nn.AvgPool2d does.
func TransitionLayer(ctx *context.Context, x *Node, train bool, opts Options, out int) *Node {
	x = ReLU(BatchNorm(ctx.In("norm"), x, train, TorchBN, opts))
	x = Conv(ctx.In("conv"), x, ConvConfig{Filters: out, Kernel: 1, Init: InitKaimingNormalFanIn}, opts)
	return AvgPool2D(x, 2, 2)
}
