package graphs

import (
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Small CIFAR-10 nets (32x32x3, 10 classes). The book's code is not available, so these follow
// its descriptions with our assumptions: 3x3 convolutions with padding 1, ReLU, 2x2 max-pools, PyTorch's
// default initialisation, and torch-like module names: a PyTorch model with
//
//	self.features = nn.Sequential(<the layers below, ReLU and MaxPool2d included>)
//	self.classifier = ...
//	forward: classifier(flatten(features(x), 1))  (cifar8*: global average pool instead of flatten)
//
// has the same state_dict keys (features.0.weight, features.1.running_mean, classifier.0.weight, ...).

// cifarLayer is one module of a features Sequential.
type cifarLayer struct {
	kind  byte // 'c' conv3x3 pad 1, 's' the same at stride 2, 'b' BatchNorm, 'r' ReLU, 'p' max-pool 2
	width int  // output channels of a conv
}

// cifarFeatures lays out the features Sequential: for each width a conv (+BN) + ReLU, and a max-pool
// where widths holds 0.
func cifarFeatures(widths []int, bn bool) []cifarLayer {
	var layers []cifarLayer
	for _, w := range widths {
		if w == 0 {
			layers = append(layers, cifarLayer{kind: 'p'})
			continue
		}
		layers = append(layers, cifarLayer{kind: 'c', width: w})
		if bn {
			layers = append(layers, cifarLayer{kind: 'b'})
		}
		layers = append(layers, cifarLayer{kind: 'r'})
	}
	return layers
}

var (
	// cifarCNNFeatures: two stages of [conv, ReLU, conv, ReLU, max-pool], widths 32 and 64.
	cifarCNNFeatures = cifarFeatures([]int{32, 32, 0, 64, 64, 0}, false)
	// cifar8Widths: VGG-style, 8 convolutions in 4 stages, each ending in a max-pool (32 -> 2 px).
	cifar8Widths = []int{64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0}
)

func init() {
	cifar := [3]int{32, 32, 3}
	Register(Spec{
		Name: "cifar_cnn",
		Description: "the book's 2-stage CIFAR-CNN as we reconstruct it: [conv3x3(32) pad 1, ReLU]x2, max-pool 2, " +
			"[conv3x3(64), ReLU]x2, max-pool 2, flatten (channel-major, as PyTorch), Linear 512, ReLU, Linear 10; " +
			"PyTorch default init",
		InputShape: cifar, NumClasses: 10, Eval: ImageNetEval,
		Reference: "our assumption of the book's CIFAR-CNN: nn.Sequential features.{0,2,5,7} convs, " +
			"classifier.{0,2} linears",
		Build: buildCIFARCNN,
	})
	for _, bn := range []bool{false, true} {
		layers := cifarFeatures(cifar8Widths, bn)
		spec := Spec{
			Name: "cifar8",
			Description: "the book's CIFAR-8 as we reconstruct it: 8 conv3x3 pad 1 + ReLU, VGG stages " +
				"64,64,pool,128,128,pool,256,256,pool,512,512,pool, global average pool, Linear 10; PyTorch default init",
			InputShape: cifar, NumClasses: 10, Eval: ImageNetEval,
			Reference: "our assumption of the book's CIFAR-8: nn.Sequential features (conv, ReLU, pool), nn.Linear classifier",
			Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
				x = ToCompute(x, opts)
				x = GlobalAvgPool(cifarApply(ctx.In("features"), x, train, opts, layers))
				x = Linear(ctx.In("classifier"), x, LinearConfig{Units: classes(opts, 10)}, opts)
				return FromCompute(x, opts)
			},
		}
		if bn {
			spec.Name = "cifar8_bn"
			spec.Description = strings.Replace(spec.Description, "+ ReLU", "+ BatchNorm + ReLU (convs without bias)", 1)
			spec.Reference = strings.Replace(spec.Reference, "conv, ReLU", "conv, BatchNorm2d, ReLU", 1)
			spec.NoWeightDecay = cifarNoWeightDecay(layers)
		}
		Register(spec)
	}
}

func buildCIFARCNN(ctx *context.Context, x *Node, train bool, opts Options) *Node {
	x = ToCompute(x, opts)
	x = cifarApply(ctx.In("features"), x, train, opts, cifarCNNFeatures)
	// Flatten in NCHW order so that classifier.0.weight is PyTorch's after the generic [in,out] transpose.
	x = Flatten(TransposeAllDims(x, 0, 3, 1, 2))
	cls := ctx.In("classifier")
	x = ReLU(Linear(cls.In("0"), x, LinearConfig{Units: scaled(512, opts.Width)}, opts))
	x = Linear(cls.In("2"), x, LinearConfig{Units: classes(opts, 10)}, opts)
	return FromCompute(x, opts)
}

// cifarApply runs a features Sequential, naming each module's scope by its index.
func cifarApply(ctx *context.Context, x *Node, train bool, opts Options, layers []cifarLayer) *Node {
	bn := false
	for _, l := range layers {
		bn = bn || l.kind == 'b'
	}
	for i, l := range layers {
		sub := ctx.In(strconv.Itoa(i))
		switch l.kind {
		case 'c', 's':
			stride := map[byte]int{'c': 1, 's': 2}[l.kind]
			x = Conv(sub, x, ConvConfig{Filters: scaled(l.width, opts.Width), Kernel: 3, Stride: stride, Padding: PadSymmetric,
				Bias: !bn}, opts)
		case 'b':
			x = BatchNorm(sub, x, train, TorchBN, opts)
		case 'r':
			x = ReLU(x)
		case 'p':
			x = MaxPool2D(x, 2, 2, 0)
		}
	}
	return x
}

// cifarNoWeightDecay puts biases and the BatchNorm modules' parameters (features/<index of a BN>) of a
// features layout in the no-decay group, whatever scope the net is built under.
func cifarNoWeightDecay(layers []cifarLayer) func(scope, name string) bool {
	bn := map[string]bool{}
	for i, l := range layers {
		if l.kind == 'b' {
			bn[strconv.Itoa(i)] = true
		}
	}
	return func(scope, name string) bool {
		parts := strings.Split(strings.TrimSuffix(scope, "/"), "/")
		n := len(parts)
		return name == "bias" || (n >= 2 && parts[n-2] == "features" && bn[parts[n-1]])
	}
}
