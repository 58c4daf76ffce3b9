package checks

import (
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	bref "github.com/trainer/trainer/bestiary/reference"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's vision blocks (docs/bestiary.md#vision-blocks), each checked as a layer in training
// mode (BatchNorm on batch statistics) against bestiary/reference's plain loops. ReLU and LeakyReLU make
// the blocks piecewise smooth and the batch statistics curve them between the kinks, so the differences
// are Richardson-extrapolated at a small step, 1e-4: a kink within the step of a perturbed value would
// show as a gradient error.

// visionCases are the rows of the vision blocks, in the order `trainer verify` prints them.
var visionCases = []func() verify.OpCase{
	denseBlockCase, transitionLayerCase, inceptionModuleCase,
	func() verify.OpCase { return shuffleV2Case("shufflev2_block_strided", 4, 8, 2) },
	func() verify.OpCase { return shuffleV2Case("shufflev2_block_keep", 6, 6, 1) },
	swinStageCase,
	func() verify.OpCase { return shuffleV1Case("shuffle_block_strided", 8, 16, 2, 2) },
	func() verify.OpCase { return shuffleV1Case("shuffle_block_keep", 16, 16, 2, 1) },
	darknetBlockCase, cspBlockCase,
}

// blockStep is the finite-difference step of the blocks with ReLU kinks.
const blockStep = 1e-4

// blockParams lists a block's parameters in the order its reference reads them (paramCursor).
type blockParams struct{ ops []verify.Operand }

func (b *blockParams) add(scope, name string, g verify.Gen, dims ...int) {
	b.ops = append(b.ops, verify.Param(scope, name, g, dims...))
}

// bn adds a BatchNorm's weight and bias.
func (b *blockParams) bn(scope string, c int) {
	b.add(scope, "weight", verify.Uniform(0.5, 1.5), c)
	b.add(scope, "bias", verify.Normal(0.3), c)
}

// conv adds a bias-free k×k conv's weight, HWIO.
func (b *blockParams) conv(scope string, k, in, out int) {
	b.add(scope, "weight", verify.Normal(0.5), k, k, in, out)
}

// convBN adds a conv and its BatchNorm.
func (b *blockParams) convBN(conv, bn string, k, in, out int) {
	b.conv(conv, k, in, out)
	b.bn(bn, out)
}

// convBNLinear adds a conv and a BatchNorm whose output reaches a training-mode BatchNorm through
// linear maps only: that norm removes any shift, so the loss does not depend on this one's bias (its
// gradient is zero, and relative errors of zeros are noise); the bias is held fixed.
func (b *blockParams) convBNLinear(conv, bn string, k, in, out int) {
	b.conv(conv, k, in, out)
	b.add(bn, "weight", verify.Uniform(0.5, 1.5), out)
	b.ops = append(b.ops, verify.State(bn, "bias", verify.Normal(0.3), out))
}

// paramCursor hands a reference the parameter values in their listed order.
type paramCursor struct {
	p []reference.Tensor
	i int
}

func (c *paramCursor) next() reference.Tensor {
	c.i++
	return c.p[c.i-1]
}

func (c *paramCursor) bn(eps float64) bref.BN {
	g := c.next()
	return bref.BN{Gamma: g.Data, Beta: c.next().Data, Eps: eps}
}

func (c *paramCursor) convBN(eps float64) bref.ConvBN {
	w := c.next()
	return bref.ConvBN{W: w, BN: c.bn(eps)}
}

// torchEps is PyTorch's BatchNorm2d epsilon (graphs.TorchBN).
var torchEps = graphs.TorchBN.Epsilon

func denseBlockCase() verify.OpCase {
	const ic, growth, bnSize, layers = 3, 2, 4, 2
	var p blockParams
	for i := range layers {
		s, in := "block/denselayer"+strconv.Itoa(i+1), ic+i*growth
		p.bn(s+"/norm1", in)
		p.conv(s+"/conv1", 1, in, bnSize*growth)
		p.bn(s+"/norm2", bnSize*growth)
		p.conv(s+"/conv2", 3, bnSize*growth, growth)
	}
	return verify.OpCase{
		Name:   "dense_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.DenseBlock(ctx.In("block"), in[0], true, opts, growth, bnSize, layers)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			ls := make([]bref.DenseLayer, layers)
			for i := range ls {
				ls[i] = bref.DenseLayer{Norm1: c.bn(torchEps), Conv1: c.next(), Norm2: c.bn(torchEps), Conv2: c.next()}
			}
			return bref.DenseBlock(in[0], ls)
		},
	}
}

func transitionLayerCase() verify.OpCase {
	const ic, oc = 6, 3
	var p blockParams
	p.bn("trans/norm", ic)
	p.conv("trans/conv", 1, ic, oc)
	return verify.OpCase{
		Name:   "transition_layer",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 5, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.TransitionLayer(ctx.In("trans"), in[0], true, opts, oc)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			return bref.Transition(in[0], c.bn(torchEps), c.next())
		},
	}
}

// googLeNetEps is BasicConv2d's BatchNorm epsilon.
const googLeNetEps = 1e-3

func inceptionModuleCase() verify.OpCase {
	const ic, b1, b2r, b2, b3r, b3, b4 = 3, 2, 2, 3, 2, 2, 2
	var p blockParams
	basic := func(scope string, k, in, out int) { p.convBN(scope+"/conv", scope+"/bn", k, in, out) }
	basic("inc/branch1", 1, ic, b1)
	basic("inc/branch2/0", 1, ic, b2r)
	basic("inc/branch2/1", 3, b2r, b2)
	basic("inc/branch3/0", 1, ic, b3r)
	basic("inc/branch3/1", 3, b3r, b3)
	basic("inc/branch4/1", 1, ic, b4)
	return verify.OpCase{
		Name: "inception_module",
		// distinct values keep the branch-4 max-pool free of near-ties.
		Inputs: []verify.Operand{verify.Input("x", verify.Distinct(), 2, 4, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.InceptionModule(ctx.In("inc"), in[0], true, opts, b1, b2r, b2, b3r, b3, b4)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			one := c.convBN(googLeNetEps)
			two := [2]bref.ConvBN{c.convBN(googLeNetEps), c.convBN(googLeNetEps)}
			three := [2]bref.ConvBN{c.convBN(googLeNetEps), c.convBN(googLeNetEps)}
			return bref.Inception(in[0], one, two, three, c.convBN(googLeNetEps))
		},
	}
}

// shuffleV2Case checks bestiary.ShuffleV2Units: torchvision's stage (first unit strided) when ic ≠ oc,
// else stride-1 units.
func shuffleV2Case(name string, ic, oc, units int) verify.OpCase {
	var p blockParams
	half := oc / 2
	for u := range units {
		s := "stage/" + strconv.Itoa(u)
		strided := u == 0 && ic != oc
		in := half
		if strided {
			in = ic
			p.convBNLinear(s+"/branch1/0", s+"/branch1/1", 3, 1, ic)
			p.convBN(s+"/branch1/2", s+"/branch1/3", 1, ic, half)
		}
		p.convBN(s+"/branch2/0", s+"/branch2/1", 1, in, half)
		p.convBNLinear(s+"/branch2/3", s+"/branch2/4", 3, 1, half)
		p.convBN(s+"/branch2/5", s+"/branch2/6", 1, half, half)
	}
	return verify.OpCase{
		Name:   name,
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.ShuffleV2Units(ctx.In("stage"), in[0], true, opts, oc, units)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for u := range units {
				strided := u == 0 && ic != oc
				var b1 [2]bref.ConvBN
				if strided {
					b1 = [2]bref.ConvBN{c.convBN(torchEps), c.convBN(torchEps)}
				}
				b2 := [3]bref.ConvBN{c.convBN(torchEps), c.convBN(torchEps), c.convBN(torchEps)}
				x = bref.ShuffleV2Unit(x, strided, b1, b2)
			}
			return x
		},
	}
}

// swinStageCase: two blocks (the second on windows shifted by 1) on a 3×3 map with 2×2 windows, so
// the padding, the shift mask's three regions per axis and the relative position bias all take part.
func swinStageCase() verify.OpCase {
	const dim, heads, window, mlpRatio, blocks = 4, 2, 2, 2, 2
	var p blockParams
	for i := range blocks {
		s := "stage/" + strconv.Itoa(i)
		p.add(s+"/norm1", "weight", verify.Uniform(0.5, 1.5), dim)
		p.add(s+"/norm1", "bias", verify.Normal(0.3), dim)
		p.add(s+"/attn/qkv", "weight", verify.Normal(0.5), dim, 3*dim)
		p.add(s+"/attn/qkv", "bias", verify.Normal(0.3), 3*dim)
		p.add(s+"/attn/proj", "weight", verify.Normal(0.5), dim, dim)
		p.add(s+"/attn/proj", "bias", verify.Normal(0.3), dim)
		p.add(s+"/attn", "relative_position_bias_table", verify.Normal(0.5), (2*window-1)*(2*window-1), heads)
		p.add(s+"/norm2", "weight", verify.Uniform(0.5, 1.5), dim)
		p.add(s+"/norm2", "bias", verify.Normal(0.3), dim)
		p.add(s+"/mlp/0", "weight", verify.Normal(0.5), dim, mlpRatio*dim)
		p.add(s+"/mlp/0", "bias", verify.Normal(0.3), mlpRatio*dim)
		p.add(s+"/mlp/3", "weight", verify.Normal(0.5), mlpRatio*dim, dim)
		p.add(s+"/mlp/3", "bias", verify.Normal(0.3), dim)
	}
	return verify.OpCase{
		Name:   "swin_stage",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 3, 3, dim)},
		Params: p.ops,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.SwinStage(ctx.In("stage"), in[0], true, opts, heads, window, mlpRatio, make([]float64, blocks))
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for i := range blocks {
				bp := bref.SwinBlockParams{Eps: 1e-5, Heads: heads, Window: window, Shift: (i % 2) * (window / 2), GELU: reference.GELUErf}
				bp.Norm1G, bp.Norm1B = c.next().Data, c.next().Data
				bp.QKVW, bp.QKVB = c.next(), c.next().Data
				bp.ProjW, bp.ProjB = c.next(), c.next().Data
				bp.Table = c.next()
				bp.Norm2G, bp.Norm2B = c.next().Data, c.next().Data
				bp.FC1W, bp.FC1B = c.next(), c.next().Data
				bp.FC2W, bp.FC2B = c.next(), c.next().Data
				x = bref.SwinBlock(x, bp)
			}
			return x
		},
	}
}

func shuffleV1Case(name string, ic, oc, groups, units int) verify.OpCase {
	var p blockParams
	mid := oc / 4
	for u := range units {
		s := "block/" + strconv.Itoa(u)
		in, out := oc, oc
		if u == 0 && ic != oc {
			in, out = ic, oc-ic
		}
		p.convBN(s+"/compress", s+"/compress_bn", 1, in/groups, mid)
		p.convBNLinear(s+"/depthwise", s+"/depthwise_bn", 3, 1, mid)
		p.convBN(s+"/expand", s+"/expand_bn", 1, mid/groups, out)
	}
	return verify.OpCase{
		Name:   name,
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.ShuffleBlock(ctx.In("block"), in[0], true, opts, oc, groups, units)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for u := range units {
				x = bref.ShuffleV1Unit(x, groups, u == 0 && ic != oc, c.convBN(torchEps), c.convBN(torchEps), c.convBN(torchEps))
			}
			return x
		},
	}
}

func darknetBlockCase() verify.OpCase {
	const ch, blocks = 4, 2
	var p blockParams
	for i := range blocks {
		s := "block/" + strconv.Itoa(i)
		p.convBN(s+"/conv1", s+"/conv1_bn", 1, ch, ch/2)
		p.convBN(s+"/conv2", s+"/conv2_bn", 3, ch/2, ch)
	}
	return verify.OpCase{
		Name:   "darknet_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ch)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.DarknetBlock(ctx.In("block"), in[0], true, opts, blocks)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for range blocks {
				x = bref.DarknetPair(x, c.convBN(torchEps), c.convBN(torchEps))
			}
			return x
		},
	}
}

func cspBlockCase() verify.OpCase {
	const ic, oc, blocks = 3, 8, 1
	h := oc / 2
	var p blockParams
	p.convBN("csp/cv1", "csp/cv1_bn", 1, ic, h)
	for i := range blocks {
		s := "csp/m/" + strconv.Itoa(i)
		p.convBN(s+"/conv1", s+"/conv1_bn", 1, h, h/2)
		p.convBN(s+"/conv2", s+"/conv2_bn", 3, h/2, h)
	}
	p.conv("csp/cv3", 1, h, h)
	p.conv("csp/cv2", 1, ic, h)
	p.bn("csp/bn", 2*h)
	p.convBN("csp/cv4", "csp/cv4_bn", 1, 2*h, oc)
	return verify.OpCase{
		Name:   "csp_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ic)},
		Params: p.ops,
		Smooth: true,
		Step:   blockStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.CSPBlock(ctx.In("csp"), in[0], true, opts, oc, blocks)
		},
		Ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			cv1 := c.convBN(torchEps)
			pairs := make([][2]bref.ConvBN, blocks)
			for i := range pairs {
				pairs[i] = [2]bref.ConvBN{c.convBN(torchEps), c.convBN(torchEps)}
			}
			cv3, cv2 := c.next(), c.next()
			bn := c.bn(torchEps)
			return bref.CSP(in[0], cv1, pairs, cv3, cv2, bn, c.convBN(torchEps))
		},
	}
}
