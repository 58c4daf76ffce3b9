package graphs

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Vision Transformer as timm's VisionTransformer builds vit_tiny_patch16_224, with its state_dict names:
//
//	patch_embed/proj                 conv 16x16 stride 16 (bias)
//	cls_token [1,1,D], pos_embed [1,1+N,D]
//	blocks/i/{norm1, attn/qkv, attn/proj, norm2, mlp/fc1, mlp/fc2}   pre-norm blocks
//	norm, head                       final LayerNorm, class-token pooling, Linear
//
// Initialisation is timm's default mode (init_weights_vit_timm): Linear weights trunc_normal(0.02) with
// zero biases, pos_embed trunc_normal(0.02), cls_token normal(1e-6) (current timm; before 2023 it was
// trunc_normal(0.02)), LayerNorms ones/zeros, and the patch conv keeps PyTorch's Conv2d default
// (kaiming_uniform(a=√5) weight and bias: timm's default mode only touches Linear layers; the lecun_normal
// patch conv is its "jax" mode).

// vitConfig is one member of the family; tests build reduced ones directly.
type vitConfig struct {
	patch, dim, depth, heads, mlp int
	// dropPath and dropout are the defaults of the last block's stochastic-depth rate and of the dropout
	// before the head (timm: 0 and 0; recipes set drop path 0.1).
	dropPath, dropout float64
}

var vitTiny = vitConfig{patch: 16, dim: 192, depth: 12, heads: 3, mlp: 768}

// vitEps is timm's LayerNorm epsilon for ViT (partial(nn.LayerNorm, eps=1e-6)).
const vitEps = 1e-6

func init() {
	Register(Spec{
		Name:        "vit_tiny",
		Description: "ViT-Tiny/16: 12 pre-norm blocks, dim 192, 3 heads, MLP 768, class token",
		InputShape:  [3]int{224, 224, 3}, NumClasses: 1000, FixedInputSize: true,
		Eval:          ImageNetEval,
		Reference:     "timm vit_tiny_patch16_224 (state_dict names, timm default init)",
		NoWeightDecay: vitNoWeightDecay,
		Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
			return buildViT(ctx, x, train, opts, vitTiny.widened(opts.Width))
		},
	})
}

// widened applies a width multiplier while keeping timm's 64-wide heads (Tiny, Small and Base all use
// them): the head count becomes max(1, round(heads·width)) and dim = 64·heads, MLP = 4·dim. So Width 2
// is ViT-S's shape, 4 ViT-B's, and 1/3 gives one head of 64.
func (c vitConfig) widened(width float64) vitConfig {
	if width == 0 || width == 1 {
		return c
	}
	headDim := c.dim / c.heads
	c.heads = max(1, int(math.Round(float64(c.heads)*width)))
	ratio := c.mlp / c.dim
	c.dim = headDim * c.heads
	c.mlp = ratio * c.dim
	return c
}

// buildViT builds the net of config c. The position embedding is sized for opts.ImageSize (default:
// the input's size); the input must have that size and be a multiple of the patch.
func buildViT(ctx *context.Context, x *Node, train bool, opts Options, c vitConfig) *Node {
	x = ToCompute(x, opts)
	dims := x.Shape().Dimensions
	batch, h, w := dims[0], dims[1], dims[2]
	size := opts.ImageSize
	if size == 0 {
		size = h
	}
	if h != size || w != size || size%c.patch != 0 {
		panic(fmt.Sprintf("vit: input %dx%d, but the position embedding is sized for %dx%d images in %d-pixel patches",
			h, w, size, size, c.patch))
	}
	if c.dim%c.heads != 0 {
		panic(fmt.Sprintf("vit: dim %d is not divisible by %d heads", c.dim, c.heads))
	}
	grid := size / c.patch
	tokens := grid*grid + 1

	// Patchify: a stride-p conv (non-overlapping, so Options.Padding does not apply), flattened
	// row-major over the grid as torch's flatten(2).transpose(1, 2).
	x = Conv(ctx.In("patch_embed").In("proj"), x, ConvConfig{
		Filters: c.dim, Kernel: c.patch, Stride: c.patch, Padding: PadValid, Bias: true,
	}, opts)
	x = Reshape(x, batch, grid*grid, c.dim)
	cls := AsDType(Param(ctx, x.Graph(), opts, "cls_token", InitNormal(1e-6), 0, 0, 1, 1, c.dim), x)
	x = Concatenate([]*Node{BroadcastToDims(cls, batch, 1, c.dim), x}, 1)
	pos := AsDType(Param(ctx, x.Graph(), opts, "pos_embed", InitTruncNormal(0.02), 0, 0, 1, tokens, c.dim), x)
	x = Add(x, pos)

	maxRate := opts.DropPath(c.dropPath)
	for i := range c.depth {
		// timm's ramp: linspace(0, rate, depth).
		rate := 0.0
		if c.depth > 1 {
			rate = maxRate * float64(i) / float64(c.depth-1)
		}
		x = vitBlock(ctx.In("blocks").In(strconv.Itoa(i)), x, train, opts, c, rate)
	}
	x = LayerNorm(ctx.In("norm"), x, vitEps, opts)
	x = Reshape(Slice(x, AxisRange(), AxisElem(0)), batch, c.dim) // class token
	x = Dropout(ctx, x, opts.Dropout(c.dropout), train)
	trunc := InitTruncNormal(0.02)
	x = Linear(ctx.In("head"), x, LinearConfig{Units: classes(opts, 1000), Init: trunc, BiasInit: InitConst(0)}, opts)
	return FromCompute(x, opts)
}

// vitBlock is timm's pre-norm Block: x + dp(attn(norm1(x))), then x + dp(mlp(norm2(x))).
func vitBlock(ctx *context.Context, x *Node, train bool, opts Options, c vitConfig, dropPath float64) *Node {
	trunc := InitTruncNormal(0.02)
	zeros := InitConst(0)
	y := LayerNorm(ctx.In("norm1"), x, vitEps, opts)
	y = MultiHeadAttention(ctx.In("attn"), y, c.heads, trunc, opts)
	x = Add(x, DropPath(ctx, y, dropPath, train))
	y = LayerNorm(ctx.In("norm2"), x, vitEps, opts)
	mlp := ctx.In("mlp")
	y = Linear(mlp.In("fc1"), y, LinearConfig{Units: c.mlp, Init: trunc, BiasInit: zeros}, opts)
	y = GELU(y, opts.GELU)
	y = Linear(mlp.In("fc2"), y, LinearConfig{Units: c.dim, Init: trunc, BiasInit: zeros}, opts)
	return Add(x, DropPath(ctx, y, dropPath, train))
}

// vitNoWeightDecay excludes biases, cls_token, pos_embed and the LayerNorms (norm1, norm2, norm), as
// timm's no_weight_decay plus its 1-D parameter rule.
func vitNoWeightDecay(scope, name string) bool {
	switch name {
	case "bias", "cls_token", "pos_embed":
		return true
	}
	p := strings.Split(strings.Trim(scope, "/"), "/")
	last := p[len(p)-1]
	return name == "weight" && (last == "norm" || last == "norm1" || last == "norm2")
}
