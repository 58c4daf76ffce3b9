package verify

import (
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's vision blocks (docs/bestiary.md#vision-blocks), each checked as a layer in training
// mode (BatchNorm on batch statistics) against verify/reference's plain loops. ReLU and LeakyReLU make
// the blocks piecewise smooth and the batch statistics curve them between the kinks, so the differences
// are Richardson-extrapolated at a small step, 1e-4: a kink within the step of a perturbed value would
// show as a gradient error.

func init() {
	extraCases = append(extraCases,
		denseBlockCase, transitionLayerCase, inceptionModuleCase,
		func() opCase { return shuffleV2Case("shufflev2_block_strided", 4, 8, 2) },
		func() opCase { return shuffleV2Case("shufflev2_block_keep", 6, 6, 1) },
		swinStageCase,
		func() opCase { return shuffleV1Case("shuffle_block_strided", 8, 16, 2, 2) },
		func() opCase { return shuffleV1Case("shuffle_block_keep", 16, 16, 2, 1) },
		darknetBlockCase, cspBlockCase,
	)
}

// blockStep is the finite-difference step of the blocks with ReLU kinks.
const blockStep = 1e-4

// blockParams lists a block's parameters in the order its reference reads them (paramCursor).
type blockParams struct{ ops []operand }

func (b *blockParams) add(scope, name string, g gen, dims ...int) {
	b.ops = append(b.ops, param(scope, name, g, dims...))
}

// bn adds a BatchNorm's weight and bias.
func (b *blockParams) bn(scope string, c int) {
	b.add(scope, "weight", uniform(0.5, 1.5), c)
	b.add(scope, "bias", normal(0.3), c)
}

// conv adds a bias-free k×k conv's weight, HWIO.
func (b *blockParams) conv(scope string, k, in, out int) {
	b.add(scope, "weight", normal(0.5), k, k, in, out)
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
	b.convBN(conv, bn, k, in, out)
	b.ops[len(b.ops)-1].fixed = true
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

func (c *paramCursor) bn(eps float64) reference.BN {
	g := c.next()
	return reference.BN{Gamma: g.Data, Beta: c.next().Data, Eps: eps}
}

func (c *paramCursor) convBN(eps float64) reference.ConvBN {
	w := c.next()
	return reference.ConvBN{W: w, BN: c.bn(eps)}
}

// torchEps is PyTorch's BatchNorm2d epsilon (graphs.TorchBN).
var torchEps = graphs.TorchBN.Epsilon

func denseBlockCase() opCase {
	const ic, growth, bnSize, layers = 3, 2, 4, 2
	var p blockParams
	for i := range layers {
		s, in := "block/denselayer"+strconv.Itoa(i+1), ic+i*growth
		p.bn(s+"/norm1", in)
		p.conv(s+"/conv1", 1, in, bnSize*growth)
		p.bn(s+"/norm2", bnSize*growth)
		p.conv(s+"/conv2", 3, bnSize*growth, growth)
	}
	return opCase{
		name:   "dense_block",
		inputs: []operand{input("x", normal(1), 2, 4, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.DenseBlock(ctx.In("block"), in[0], true, opts, growth, bnSize, layers)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			ls := make([]reference.DenseLayer, layers)
			for i := range ls {
				ls[i] = reference.DenseLayer{Norm1: c.bn(torchEps), Conv1: c.next(), Norm2: c.bn(torchEps), Conv2: c.next()}
			}
			return reference.DenseBlock(in[0], ls)
		},
	}
}

func transitionLayerCase() opCase {
	const ic, oc = 6, 3
	var p blockParams
	p.bn("trans/norm", ic)
	p.conv("trans/conv", 1, ic, oc)
	return opCase{
		name:   "transition_layer",
		inputs: []operand{input("x", normal(1), 2, 5, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.TransitionLayer(ctx.In("trans"), in[0], true, opts, oc)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			return reference.Transition(in[0], c.bn(torchEps), c.next())
		},
	}
}

// googLeNetEps is BasicConv2d's BatchNorm epsilon.
const googLeNetEps = 1e-3

func inceptionModuleCase() opCase {
	const ic, b1, b2r, b2, b3r, b3, b4 = 3, 2, 2, 3, 2, 2, 2
	var p blockParams
	basic := func(scope string, k, in, out int) { p.convBN(scope+"/conv", scope+"/bn", k, in, out) }
	basic("inc/branch1", 1, ic, b1)
	basic("inc/branch2/0", 1, ic, b2r)
	basic("inc/branch2/1", 3, b2r, b2)
	basic("inc/branch3/0", 1, ic, b3r)
	basic("inc/branch3/1", 3, b3r, b3)
	basic("inc/branch4/1", 1, ic, b4)
	return opCase{
		name: "inception_module",
		// distinct values keep the branch-4 max-pool free of near-ties.
		inputs: []operand{input("x", distinct(), 2, 4, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.InceptionModule(ctx.In("inc"), in[0], true, opts, b1, b2r, b2, b3r, b3, b4)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			one := c.convBN(googLeNetEps)
			two := [2]reference.ConvBN{c.convBN(googLeNetEps), c.convBN(googLeNetEps)}
			three := [2]reference.ConvBN{c.convBN(googLeNetEps), c.convBN(googLeNetEps)}
			return reference.Inception(in[0], one, two, three, c.convBN(googLeNetEps))
		},
	}
}

// shuffleV2Case checks graphs.ShuffleV2Units: torchvision's stage (first unit strided) when ic ≠ oc,
// else stride-1 units.
func shuffleV2Case(name string, ic, oc, units int) opCase {
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
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), 2, 4, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.ShuffleV2Units(ctx.In("stage"), in[0], true, opts, oc, units)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for u := range units {
				strided := u == 0 && ic != oc
				var b1 [2]reference.ConvBN
				if strided {
					b1 = [2]reference.ConvBN{c.convBN(torchEps), c.convBN(torchEps)}
				}
				b2 := [3]reference.ConvBN{c.convBN(torchEps), c.convBN(torchEps), c.convBN(torchEps)}
				x = reference.ShuffleV2Unit(x, strided, b1, b2)
			}
			return x
		},
	}
}

// swinStageCase: two blocks (the second on windows shifted by 1) on a 3×3 map with 2×2 windows, so
// the padding, the shift mask's three regions per axis and the relative position bias all take part.
func swinStageCase() opCase {
	const dim, heads, window, mlpRatio, blocks = 4, 2, 2, 2, 2
	var p blockParams
	for i := range blocks {
		s := "stage/" + strconv.Itoa(i)
		p.add(s+"/norm1", "weight", uniform(0.5, 1.5), dim)
		p.add(s+"/norm1", "bias", normal(0.3), dim)
		p.add(s+"/attn/qkv", "weight", normal(0.5), dim, 3*dim)
		p.add(s+"/attn/qkv", "bias", normal(0.3), 3*dim)
		p.add(s+"/attn/proj", "weight", normal(0.5), dim, dim)
		p.add(s+"/attn/proj", "bias", normal(0.3), dim)
		p.add(s+"/attn", "relative_position_bias_table", normal(0.5), (2*window-1)*(2*window-1), heads)
		p.add(s+"/norm2", "weight", uniform(0.5, 1.5), dim)
		p.add(s+"/norm2", "bias", normal(0.3), dim)
		p.add(s+"/mlp/0", "weight", normal(0.5), dim, mlpRatio*dim)
		p.add(s+"/mlp/0", "bias", normal(0.3), mlpRatio*dim)
		p.add(s+"/mlp/3", "weight", normal(0.5), mlpRatio*dim, dim)
		p.add(s+"/mlp/3", "bias", normal(0.3), dim)
	}
	return opCase{
		name:   "swin_stage",
		inputs: []operand{input("x", normal(1), 2, 3, 3, dim)},
		params: p.ops,
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.SwinStage(ctx.In("stage"), in[0], true, opts, heads, window, mlpRatio, make([]float64, blocks))
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for i := range blocks {
				bp := reference.SwinBlockParams{Eps: 1e-5, Heads: heads, Window: window, Shift: (i % 2) * (window / 2), GELU: reference.GELUErf}
				bp.Norm1G, bp.Norm1B = c.next().Data, c.next().Data
				bp.QKVW, bp.QKVB = c.next(), c.next().Data
				bp.ProjW, bp.ProjB = c.next(), c.next().Data
				bp.Table = c.next()
				bp.Norm2G, bp.Norm2B = c.next().Data, c.next().Data
				bp.FC1W, bp.FC1B = c.next(), c.next().Data
				bp.FC2W, bp.FC2B = c.next(), c.next().Data
				x = reference.SwinBlock(x, bp)
			}
			return x
		},
	}
}

func shuffleV1Case(name string, ic, oc, groups, units int) opCase {
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
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), 2, 4, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.ShuffleBlock(ctx.In("block"), in[0], true, opts, oc, groups, units)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for u := range units {
				x = reference.ShuffleV1Unit(x, groups, u == 0 && ic != oc, c.convBN(torchEps), c.convBN(torchEps), c.convBN(torchEps))
			}
			return x
		},
	}
}

func darknetBlockCase() opCase {
	const ch, blocks = 4, 2
	var p blockParams
	for i := range blocks {
		s := "block/" + strconv.Itoa(i)
		p.convBN(s+"/conv1", s+"/conv1_bn", 1, ch, ch/2)
		p.convBN(s+"/conv2", s+"/conv2_bn", 3, ch/2, ch)
	}
	return opCase{
		name:   "darknet_block",
		inputs: []operand{input("x", normal(1), 2, 4, 4, ch)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.DarknetBlock(ctx.In("block"), in[0], true, opts, blocks)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			x := in[0]
			for range blocks {
				x = reference.DarknetPair(x, c.convBN(torchEps), c.convBN(torchEps))
			}
			return x
		},
	}
}

func cspBlockCase() opCase {
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
	return opCase{
		name:   "csp_block",
		inputs: []operand{input("x", normal(1), 2, 4, 4, ic)},
		params: p.ops,
		smooth: true,
		step:   blockStep,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.CSPBlock(ctx.In("csp"), in[0], true, opts, oc, blocks)
		},
		ref: func(in, ps []reference.Tensor) reference.Tensor {
			c := &paramCursor{p: ps}
			cv1 := c.convBN(torchEps)
			pairs := make([][2]reference.ConvBN, blocks)
			for i := range pairs {
				pairs[i] = [2]reference.ConvBN{c.convBN(torchEps), c.convBN(torchEps)}
			}
			cv3, cv2 := c.next(), c.next()
			bn := c.bn(torchEps)
			return reference.CSP(in[0], cv1, pairs, cv3, cv2, bn, c.convBN(torchEps))
		},
	}
}
