package netspec

import (
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The blocks: residual (a nested body), MBConv and squeeze-excite as torchvision's EfficientNet builds
// them, and ViT's patch embedding, attention and pre-norm encoder block as timm's.

func registerBlockKinds() {
	Register(Kind{
		Name: "residual", Doc: "y = body(x) + shortcut(x): the body is a nested list; the shortcut is the identity, or a 1×1 projection when the body changes the shape",
		Args: []Arg{
			{Name: "layers", Type: TypeLayers, Required: true, Doc: "the body, a list of layers (numbered from 0: layer 3's second entry is 3.1)"},
			{Name: "projection", Type: TypeChoice, Default: "none", Choices: []string{"none", "conv", "conv_bn"},
				Doc: "`none` (identity: the body must keep the shape), `conv` (1×1 conv with bias, strided to the body's size) or `conv_bn` (1×1 conv without bias + batchnorm, ResNet's downsample)"},
		},
		Norms: []string{"projection_bn"},
		Infer: func(p *Checker, l *Layer, in []int) ([]int, error) {
			out, err := p.Body(l, "layers", in)
			if err != nil {
				return nil, err
			}
			proj := l.Str("projection")
			if proj == "none" {
				if !slices.Equal(in, out) {
					return nil, ArgError("projection", "none, but the body maps %s to %s; expected a body that keeps the shape, or projection conv or conv_bn", shapeString(in), shapeString(out))
				}
				return out, nil
			}
			if len(in) != 3 || len(out) != 3 {
				return nil, ArgError("projection", "%s needs an image in and out of the body, got %s -> %s", proj, shapeString(in), shapeString(out))
			}
			if projectionStride(in, out) == 0 {
				return nil, ArgError("projection", "the body maps %s to %s, which no strided 1×1 projection matches; expected a body that keeps the size or divides it by a stride", shapeString(in), shapeString(out))
			}
			l.Params += Product(in[2], out[2])
			if proj == "conv" {
				l.Params += int64(out[2])
			} else {
				l.Params += 2 * int64(out[2])
			}
			l.MACs += Product(out[0], out[1], out[2], in[2])
			return out, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			y := b.Sequence(ctx, x, l.Body("layers"))
			short := x
			if proj := l.Str("projection"); proj != "none" {
				s := projectionStride(x.Shape().Dimensions[1:], y.Shape().Dimensions[1:])
				short = graphs.Conv(ctx.In("projection"), x, graphs.ConvConfig{Filters: y.Shape().Dimensions[3], Kernel: 1, Stride: s,
					Padding: graphs.PadValid, Bias: proj == "conv"}, b.Opts)
				if proj == "conv_bn" {
					short = graphs.BatchNorm(ctx.In("projection_bn"), short, b.Train, graphs.TorchBN, b.Opts)
				}
			}
			return Add(y, short)
		},
	})
	Register(Kind{
		Name: "mbconv", Doc: "MobileNetV2/EfficientNet inverted residual (torchvision's MBConv): 1×1 expand + BN + act, k×k depthwise + BN + act, optional squeeze-excite, 1×1 project + BN, identity shortcut when stride 1 and the width is kept; kaiming-normal (fan-out) init",
		Args: []Arg{
			WidthArg("filters", "output channels"),
			{Name: "expand", Type: TypeInt, Default: 6, Min: 1, Max: 64, Doc: "hidden width = expand × input channels (1: no expansion conv)"},
			KernelArg("kernel", false, 3, "depthwise kernel"),
			KernelArg("stride", false, 1, "depthwise stride"),
			{Name: "se", Type: TypeFloat, Default: 0.0, Min: 0, Max: 1, Doc: "squeeze-excite width as a fraction of the input channels (EfficientNet 0.25); 0: none"},
			{Name: "activation", Type: TypeChoice, Default: "silu", Choices: []string{"silu", "relu6", "relu"}, Doc: "the block's activation"},
		},
		Norms: []string{"expand_bn", "depthwise_bn", "project_bn"},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedImage(in); err != nil {
				return nil, err
			}
			c, f, k := in[2], l.Int("filters"), l.Int("kernel")
			hidden := c * l.Int("expand")
			if err := Bound("expand", hidden); err != nil {
				return nil, err
			}
			h, w, err := convShape(in, k, l.Int("stride"), 1, "symmetric", "kernel")
			if err != nil {
				return nil, err
			}
			if hidden != c {
				l.Params += Product(c, hidden) + 2*int64(hidden)
				l.MACs += Product(in[0], in[1], hidden, c)
			}
			l.Params += Product(k, k, hidden) + 2*int64(hidden)
			l.MACs += Product(h, w, hidden, k, k)
			if sq := squeeze(c, l.Float("se")); sq > 0 {
				l.Params += Product(hidden, sq) + int64(sq) + Product(sq, hidden) + int64(hidden)
				l.MACs += 2 * Product(hidden, sq)
			}
			l.Params += Product(hidden, f) + 2*int64(f)
			l.MACs += Product(h, w, f, hidden)
			return []int{h, w, f}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			c := x.Shape().Dimensions[3]
			hidden, f, k, s := c*l.Int("expand"), l.Int("filters"), l.Int("kernel"), l.Int("stride")
			act := func(x *Node) *Node { return activation(l.Str("activation"), x) }
			h := x
			if hidden != c {
				h = act(b.convBN(ctx, "expand", h, hidden, 1, 1, 1))
			}
			h = act(b.convBN(ctx, "depthwise", h, hidden, k, s, hidden))
			if sq := squeeze(c, l.Float("se")); sq > 0 {
				h = b.squeezeExcite(ctx.In("se"), h, sq, act)
			}
			h = b.convBN(ctx, "project", h, f, 1, 1, 1)
			if s == 1 && c == f {
				h = Add(h, x)
			}
			return h
		},
	})
	Register(Kind{
		Name: "se", Doc: "squeeze-excite (torchvision's SqueezeExcitation): global mean, 1×1 conv reduce + act, 1×1 conv expand, sigmoid gate on the input",
		Args: []Arg{
			WidthArg("squeeze", "the reduced width"),
			{Name: "activation", Type: TypeChoice, Default: "relu", Choices: []string{"relu", "silu"}, Doc: "between the two convs"},
		},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedImage(in); err != nil {
				return nil, err
			}
			c, sq := in[2], l.Int("squeeze")
			l.Params = Product(c, sq) + int64(sq) + Product(sq, c) + int64(c)
			l.MACs = 2 * Product(c, sq)
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return b.squeezeExcite(ctx, x, l.Int("squeeze"), func(x *Node) *Node { return activation(l.Str("activation"), x) })
		},
	})
	Register(Kind{
		Name: "patch_embed", Doc: "ViT's patch embedding: a patch×patch conv at stride patch to dim channels, the grid flattened row-major to tokens, a class token prepended and a learned position embedding added (timm's init); fixes the input size",
		Args: []Arg{
			KernelArg("patch", true, 0, "patch size; must divide the input size"),
			WidthArg("dim", "token width"),
			{Name: "class_token", Type: TypeBool, Default: true, Doc: "prepend a learned class token"},
		},
		Infer: func(p *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedImage(in); err != nil {
				return nil, err
			}
			pt, d := l.Int("patch"), l.Int("dim")
			if in[0]%pt != 0 || in[1]%pt != 0 {
				return nil, ArgError("patch", "%d does not divide the %d×%d input; expected a divisor of the size", pt, in[0], in[1])
			}
			grid := (in[0] / pt) * (in[1] / pt)
			tokens := grid
			if l.Bool("class_token") {
				tokens++
				l.Params += int64(d)
			}
			l.Params += Product(pt, pt, in[2], d) + int64(d) + Product(tokens, d)
			l.MACs = Product(grid, d, pt, pt, in[2])
			p.FixInputSize()
			return []int{tokens, d}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			pt, d := l.Int("patch"), l.Int("dim")
			batch := x.Shape().Dimensions[0]
			x = graphs.Conv(ctx.In("proj"), x, graphs.ConvConfig{Filters: d, Kernel: pt, Stride: pt, Padding: graphs.PadValid, Bias: true}, b.Opts)
			grid := x.Shape().Dimensions[1] * x.Shape().Dimensions[2]
			x = Reshape(x, batch, grid, d)
			if l.Bool("class_token") {
				cls := graphs.Param(ctx, x.Graph(), b.Opts, "cls_token", graphs.InitNormal(1e-6), 0, 0, 1, 1, d)
				x = Concatenate([]*Node{BroadcastToDims(ConvertDType(cls, x.DType()), batch, 1, d), x}, 1)
			}
			tokens := x.Shape().Dimensions[1]
			pos := graphs.Param(ctx, x.Graph(), b.Opts, "pos_embed", graphs.InitTruncNormal(0.02), 0, 0, 1, tokens, d)
			return Add(x, ConvertDType(pos, x.DType()))
		},
	})
	Register(Kind{
		Name: "attention", Doc: "multi-head self-attention over tokens (timm's Attention: one qkv Linear, heads, proj Linear; trunc-normal 0.02 init)",
		Args: []Arg{WidthArg("heads", "attention heads; must divide the token width")},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedTokens(in); err != nil {
				return nil, err
			}
			if in[1]%l.Int("heads") != 0 {
				return nil, ArgError("heads", "%d does not divide the token width %d", l.Int("heads"), in[1])
			}
			l.Params, l.MACs = AttentionCost(in[0], in[1])
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.MultiHeadAttention(ctx, x, l.Int("heads"), graphs.InitTruncNormal(0.02), b.Opts)
		},
	})
	Register(Kind{
		Name: "transformer", Doc: "ViT's pre-norm encoder block: x + attn(norm1(x)), then x + mlp(norm2(x)) with a GELU MLP (timm's Block and init)",
		Args: []Arg{
			WidthArg("heads", "attention heads; must divide the token width"),
			WidthArg("mlp", "hidden width of the MLP"),
			epsArg(1e-6),
		},
		Norms: []string{"norm1", "norm2"},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedTokens(in); err != nil {
				return nil, err
			}
			t, d, m := in[0], in[1], l.Int("mlp")
			if d%l.Int("heads") != 0 {
				return nil, ArgError("heads", "%d does not divide the token width %d", l.Int("heads"), d)
			}
			l.Params, l.MACs = AttentionCost(t, d)
			l.Params += 4*int64(d) + Product(d, m) + int64(m) + Product(m, d) + int64(d)
			l.MACs += 2 * Product(t, d, m)
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			trunc, zeros := graphs.InitTruncNormal(0.02), graphs.InitConst(0)
			eps, d := l.Float("eps"), x.Shape().Dimensions[2]
			y := graphs.LayerNorm(ctx.In("norm1"), x, eps, b.Opts)
			x = Add(x, graphs.MultiHeadAttention(ctx.In("attn"), y, l.Int("heads"), trunc, b.Opts))
			y = graphs.LayerNorm(ctx.In("norm2"), x, eps, b.Opts)
			y = graphs.Linear(ctx.In("mlp").In("fc1"), y, graphs.LinearConfig{Units: l.Int("mlp"), Init: trunc, BiasInit: zeros}, b.Opts)
			y = graphs.GELU(y, b.Opts.GELU)
			y = graphs.Linear(ctx.In("mlp").In("fc2"), y, graphs.LinearConfig{Units: d, Init: trunc, BiasInit: zeros}, b.Opts)
			return Add(x, y)
		},
	})
	Register(Kind{
		Name: "token_pool", Doc: "tokens [T, D] -> [D]: the class token (the first) or the mean of the tokens",
		Args: []Arg{{Name: "mode", Type: TypeChoice, Default: "class", Choices: []string{"class", "mean"}, Doc: "`class` or `mean`"}},
		Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) {
			if err := NeedTokens(in); err != nil {
				return nil, err
			}
			return []int{in[1]}, nil
		},
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node {
			if l.Str("mode") == "mean" {
				return ReduceMean(x, 1)
			}
			dims := x.Shape().Dimensions
			return Reshape(Slice(x, AxisRange(), AxisElem(0)), dims[0], dims[2])
		},
	})
}

// projectionStride is the stride of the 1×1 valid conv that maps image shape in to out's height and
// width, or 0 when none does.
func projectionStride(in, out []int) int {
	for s := 1; s <= MaxKernel; s++ {
		if (in[0]-1)/s+1 == out[0] && (in[1]-1)/s+1 == out[1] {
			return s
		}
	}
	return 0
}

// AttentionCost is timm's Attention at t tokens of width d: qkv and proj Linears with biases, and
// the two attention products (graphs.MultiHeadAttention counts heads·t²·headDim twice).
func AttentionCost(t, d int) (params, macs int64) {
	params = Product(d, 3*d) + 3*int64(d) + Product(d, d) + int64(d)
	macs = Product(t, d, 3*d) + 2*Product(t, t, d) + Product(t, d, d)
	return params, macs
}

// squeeze is the squeeze-excite width of a block with c input channels at ratio se (0: none).
func squeeze(c int, se float64) int {
	if se <= 0 {
		return 0
	}
	return max(1, int(float64(c)*se))
}

// convBN is a bias-free conv in ctx.In(name) and its BatchNorm in ctx.In(name+"_bn"), initialised as
// torchvision's EfficientNet (kaiming normal, fan-out).
func (b *Builder) convBN(ctx *context.Context, name string, x *Node, filters, kernel, stride, groups int) *Node {
	x = graphs.Conv(ctx.In(name), x, graphs.ConvConfig{Filters: filters, Kernel: kernel, Stride: stride, Groups: groups,
		Padding: graphs.PadSymmetric, Init: graphs.InitKaimingNormalFanOut}, b.Opts)
	return graphs.BatchNorm(ctx.In(name+"_bn"), x, b.Train, graphs.TorchBN, b.Opts)
}

// squeezeExcite gates x's channels by a two-conv bottleneck of its spatial mean.
func (b *Builder) squeezeExcite(ctx *context.Context, x *Node, sq int, act func(*Node) *Node) *Node {
	c := x.Shape().Dimensions[3]
	s := ReduceAndKeep(x, ReduceMean, 1, 2)
	s = act(graphs.Conv(ctx.In("reduce"), s, graphs.ConvConfig{Filters: sq, Kernel: 1, Bias: true, Init: graphs.InitKaimingNormalFanOut}, b.Opts))
	s = graphs.Conv(ctx.In("expand"), s, graphs.ConvConfig{Filters: c, Kernel: 1, Bias: true, Init: graphs.InitKaimingNormalFanOut}, b.Opts)
	return Mul(x, Logistic(s))
}
