package graphs

import (
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ConvNeXt as torchvision 0.14 builds it (models/convnext.py), with its module paths as scopes:
//
//	features/0/{0 conv 4x4/4, 1 LayerNorm2d}      stem
//	features/{1,3,5,7}/j                           CNBlocks of stage 0..3 (layer_scale lives here)
//	  block/{0 dwconv 7x7, 2 LayerNorm, 3 Linear 4·dim, 5 Linear dim}
//	features/{2,4,6}/{0 LayerNorm2d, 1 conv 2x2/2} downsampling
//	classifier/{0 LayerNorm2d, 2 Linear}           head (after global average pooling)
//
// torchvision's LayerNorm2d normalises channels; in NHWC those are the last axis, so every norm here is
// the plain LayerNorm (eps 1e-6).

// convNeXtConfig is one member of the family; tests build reduced ones directly.
type convNeXtConfig struct {
	depths, dims [4]int
	// layerScale initialises every block's layer_scale (torchvision: 1e-6).
	layerScale float64
	// dropPath is the default stochastic-depth rate of the last block (torchvision convnext_tiny: 0.1).
	dropPath float64
}

var convNeXtTiny = convNeXtConfig{
	depths: [4]int{3, 3, 9, 3}, dims: [4]int{96, 192, 384, 768}, layerScale: 1e-6, dropPath: 0.1,
}

// convNeXtEps is torchvision's LayerNorm epsilon for ConvNeXt.
const convNeXtEps = 1e-6

func init() {
	Register(Spec{
		Name:        "convnext_tiny",
		Description: "ConvNeXt-T: depths (3,3,9,3), dims (96,192,384,768), 7x7 depthwise, layer scale, drop path 0.1",
		InputShape:  [3]int{224, 224, 3}, NumClasses: 1000,
		Eval:          ImageNetEval,
		Reference:     "torchvision 0.14 convnext_tiny (state_dict names; layer_scale stored [C] instead of [C,1,1])",
		NoWeightDecay: convNeXtNoWeightDecay,
		TorchShape:    LayerScaleTorchShape,
		Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
			return buildConvNeXt(ctx, x, train, opts, convNeXtTiny)
		},
	})
}

// LayerScaleTorchShape is a Spec.TorchShape for nets with torchvision ConvNeXt's layer scale, a [C, 1, 1]
// parameter there and [C] here.
func LayerScaleTorchShape(_, name string, dims []int) []int {
	if name == "layer_scale" && len(dims) == 1 {
		return []int{dims[0], 1, 1}
	}
	return nil
}

// buildConvNeXt builds the net of config c; Width scales every stage's channels.
func buildConvNeXt(ctx *context.Context, x *Node, train bool, opts Options, c convNeXtConfig) *Node {
	x = ToCompute(x, opts)
	var dims [4]int
	for i, d := range c.dims {
		dims[i] = scaled(d, opts.Width)
	}
	trunc := InitTruncNormal(0.02)
	zeros := InitConst(0)
	// Stem and downsampling are non-overlapping patchify convs (kernel = stride, no padding): they have no
	// padding phase, so Options.Padding does not apply to them.
	features := ctx.In("features")
	x = Conv(features.In("0").In("0"), x, ConvConfig{
		Filters: dims[0], Kernel: 4, Stride: 4, Padding: PadValid, Bias: true, Init: trunc, BiasInit: zeros,
	}, opts)
	x = LayerNorm(features.In("0").In("1"), x, convNeXtEps, opts)

	total := 0
	for _, d := range c.depths {
		total += d
	}
	maxRate := opts.DropPath(c.dropPath)
	blockID := 0
	for stage := range 4 {
		stageCtx := features.In(strconv.Itoa(2*stage + 1))
		for j := range c.depths[stage] {
			// torchvision's ramp: rate·id/(total−1), 0 for the first block.
			rate := 0.0
			if total > 1 {
				rate = maxRate * float64(blockID) / float64(total-1)
			}
			x = convNeXtBlock(stageCtx.In(strconv.Itoa(j)), x, train, opts, c.layerScale, rate)
			blockID++
		}
		if stage < 3 {
			down := features.In(strconv.Itoa(2*stage + 2))
			x = LayerNorm(down.In("0"), x, convNeXtEps, opts)
			x = Conv(down.In("1"), x, ConvConfig{
				Filters: dims[stage+1], Kernel: 2, Stride: 2, Padding: PadValid, Bias: true, Init: trunc, BiasInit: zeros,
			}, opts)
		}
	}

	head := ctx.In("classifier")
	x = LayerNorm(head.In("0"), GlobalAvgPool(x), convNeXtEps, opts)
	x = Linear(head.In("2"), x, LinearConfig{Units: classes(opts, 1000), Init: trunc, BiasInit: zeros}, opts)
	return FromCompute(x, opts)
}

// convNeXtBlock is torchvision's CNBlock: x + drop_path(layer_scale · MLP(LN(dwconv(x)))).
func convNeXtBlock(ctx *context.Context, x *Node, train bool, opts Options, layerScale, dropPath float64) *Node {
	dim := x.Shape().Dimensions[3]
	trunc := InitTruncNormal(0.02)
	zeros := InitConst(0)
	block := ctx.In("block")
	y := Conv(block.In("0"), x, ConvConfig{
		Filters: dim, Kernel: 7, Groups: dim, Padding: PadSymmetric, Bias: true, Init: trunc, BiasInit: zeros,
	}, opts)
	y = LayerNorm(block.In("2"), y, convNeXtEps, opts)
	y = Linear(block.In("3"), y, LinearConfig{Units: 4 * dim, Init: trunc, BiasInit: zeros}, opts)
	y = GELU(y, opts.GELU)
	y = Linear(block.In("5"), y, LinearConfig{Units: dim, Init: trunc, BiasInit: zeros}, opts)
	scale := AsDType(Param(ctx, x.Graph(), opts, "layer_scale", InitConst(layerScale), 0, 0, dim), y)
	y = Mul(y, Reshape(scale, 1, 1, 1, dim))
	return Add(x, DropPath(ctx, y, dropPath, train))
}

// convNeXtNoWeightDecay excludes biases, layer scales and every LayerNorm's weight (the norms' scopes:
// features/0/1, features/{2,4,6}/0, features/*/*/block/2, classifier/0).
func convNeXtNoWeightDecay(scope, name string) bool {
	if name == "bias" || name == "layer_scale" {
		return true
	}
	return name == "weight" && convNeXtIsNorm(scope)
}

func convNeXtIsNorm(scope string) bool {
	p := strings.Split(strings.Trim(scope, "/"), "/")
	n := len(p)
	if n < 2 {
		return false
	}
	switch p[n-2] {
	case "block":
		return p[n-1] == "2"
	case "classifier":
		return p[n-1] == "0"
	}
	if n < 3 || p[n-3] != "features" {
		return false
	}
	index, err := strconv.Atoi(p[n-2])
	if err != nil {
		return false
	}
	if index == 0 {
		return p[n-1] == "1" // stem: 0 conv, 1 norm
	}
	return index%2 == 0 && p[n-1] == "0" // downsampling: 0 norm, 1 conv
}
