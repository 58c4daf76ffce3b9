package verify

import (
	"fmt"
	"math/rand/v2"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/trainstep"
	"github.com/trainer/trainer/verify/reference"
)

// opCases lists the op checks that compare one op of graphs (or trainer's losses) with the reference:
// the package's own, then those registered by RegisterOpCases.
func opCases() []opCase {
	cases := []opCase{
		denseCase("dense", []int{3, 5}, 4),
		denseCase("dense_tokens", []int{2, 3, 5}, 4),
	}
	// Convolutions: both padding phases on even inputs, strides 1 and 2; the stem; 1x1; groups,
	// dilation; even kernels (ConvNeXt's stem and downsamples) and patchify (ViT).
	sym, same, valid := graphs.PadSymmetric, graphs.PadSame, graphs.PadValid
	cases = append(cases,
		convCase("conv3x3_s1_symmetric", convSpec{x: []int{2, 6, 6, 3}, filters: 4, k: 3, stride: 1, pad: sym, bias: true}),
		convCase("conv3x3_s1_same", convSpec{x: []int{2, 6, 6, 3}, filters: 4, k: 3, stride: 1, pad: same, bias: true}),
		convCase("conv3x3_s2_symmetric", convSpec{x: []int{2, 8, 8, 3}, filters: 4, k: 3, stride: 2, pad: sym}),
		convCase("conv3x3_s2_same", convSpec{x: []int{2, 8, 8, 3}, filters: 4, k: 3, stride: 2, pad: same}),
		convCase("conv1x1", convSpec{x: []int{2, 5, 5, 6}, filters: 4, k: 1, stride: 1, pad: sym, bias: true}),
		convCase("conv1x1_s2", convSpec{x: []int{2, 6, 6, 4}, filters: 6, k: 1, stride: 2, pad: sym}),
		convCase("stem7x7_s2_symmetric", convSpec{x: []int{1, 16, 16, 3}, filters: 4, k: 7, stride: 2, pad: sym}),
		convCase("stem7x7_s2_same", convSpec{x: []int{1, 16, 16, 3}, filters: 4, k: 7, stride: 2, pad: same}),
		convCase("conv3x3_groups2", convSpec{x: []int{2, 6, 6, 4}, filters: 6, k: 3, stride: 1, groups: 2, pad: sym, bias: true}),
		convCase("conv3x3_dilation2", convSpec{x: []int{1, 8, 8, 3}, filters: 4, k: 3, stride: 1, dilation: 2, pad: sym}),
		convCase("conv2x2_s2", convSpec{x: []int{2, 8, 8, 4}, filters: 6, k: 2, stride: 2, pad: valid, bias: true}),
		convCase("conv4x4_s4", convSpec{x: []int{2, 8, 8, 3}, filters: 5, k: 4, stride: 4, pad: valid, bias: true}),
		convCase("conv2x2_s1_same", convSpec{x: []int{2, 5, 5, 3}, filters: 4, k: 2, stride: 1, pad: same}),
		convCase("conv4x4_s2_symmetric", convSpec{x: []int{2, 8, 8, 3}, filters: 4, k: 4, stride: 2, pad: sym}),
		patchifyCase("patchify4", []int{2, 8, 8, 3}, 4, 5),
		patchifyCase("patchify16", []int{1, 32, 32, 3}, 16, 4),
	)
	for _, k := range []int{3, 5, 7} {
		for _, s := range []int{1, 2} {
			for _, p := range []graphs.Padding{sym, same} {
				name := fmt.Sprintf("depthwise%dx%d_s%d_%s", k, k, s, p)
				cases = append(cases, convCase(name, convSpec{x: []int{2, 8, 8, 4}, filters: 4, k: k, stride: s, groups: 4, pad: p, bias: k == 3}))
			}
		}
	}
	cases = append(cases,
		batchNormCase("batchnorm_train", true),
		batchNormCase("batchnorm_eval", false),
		layerNormCase("layernorm_channels", []int{2, 3, 3, 6}, 1e-6),
		layerNormCase("layernorm_tokens", []int{2, 5, 8}, 1e-5),
		activationCase("gelu_erf", func(x *Node) *Node { return graphs.GELU(x, graphs.GELUErf) }, reference.GELUErf, normal(1.5), true),
		activationCase("gelu_tanh", func(x *Node) *Node { return graphs.GELU(x, graphs.GELUTanh) }, reference.GELUTanh, normal(1.5), true),
		activationCase("swish", graphs.Swish, reference.Swish, normal(2), true),
		activationCase("sigmoid", Logistic, reference.Sigmoid, normal(2), true),
		activationCase("relu", graphs.ReLU, reference.ReLU, awayFrom(0.05, 2, 0), false),
		activationCase("relu6", graphs.ReLU6, reference.ReLU6, awayFrom(0.05, 3, 0, 6), false),
		squeezeExciteCase(),
		crossEntropyCase("cross_entropy", 0),
		crossEntropyCase("cross_entropy_smoothing", 0.1),
		softCrossEntropyCase(),
		bceCase(),
		maxPoolCase("maxpool3x3_s2_p1", 3, 2, 1),
		maxPoolCase("maxpool2x2_s2", 2, 2, 0),
		avgPoolCase("avgpool2x2_s2", 2, 2),
		avgPoolCase("avgpool3x3_s1", 3, 1),
		globalAvgPoolCase(),
		sdpaCase(),
		mhaCase(),
		residualCase(),
		layerScaleCase(),
		dropoutCase(),
		dropPathCase(),
	)
	cases = append(cases, gomlxBatchNormTrapCase())
	return append(cases, registeredCases()...)
}

func denseCase(name string, x []int, units int) opCase {
	in := x[len(x)-1]
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), x...)},
		params: []operand{param("fc", "weight", normal(0.3), in, units), param("fc", "bias", normal(0.3), units)},
		build: func(ctx *context.Context, x []*Node, opts graphs.Options) *Node {
			return graphs.Linear(ctx.In("fc"), x[0], graphs.LinearConfig{Units: units}, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor { return reference.Dense(in[0], p[0], p[1].Data) },
	}
}

type convSpec struct {
	x                                    []int
	filters, k, stride, dilation, groups int
	pad                                  graphs.Padding
	bias                                 bool
}

// convPads is the reference's explicit padding for the mode, computed by graphs' own rule.
func (s convSpec) convPads(h, w int) [2][2]int {
	d := max(s.dilation, 1)
	return [2][2]int{graphs.PadsFor(s.pad, h, s.k, s.stride, d), graphs.PadsFor(s.pad, w, s.k, s.stride, d)}
}

func convCase(name string, s convSpec) opCase {
	groups := max(s.groups, 1)
	params := []operand{param("conv", "weight", normal(0.3), s.k, s.k, s.x[3]/groups, s.filters)}
	if s.bias {
		params = append(params, param("conv", "bias", normal(0.3), s.filters))
	}
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), s.x...)},
		params: params,
		build: func(ctx *context.Context, x []*Node, opts graphs.Options) *Node {
			return graphs.Conv(ctx.In("conv"), x[0], graphs.ConvConfig{
				Filters: s.filters, Kernel: s.k, Stride: s.stride, Dilation: s.dilation, Groups: s.groups,
				Padding: s.pad, Bias: s.bias,
			}, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			var b []float64
			if s.bias {
				b = p[1].Data
			}
			return reference.Conv2D(in[0], p[0], b, reference.ConvParams{
				Stride: s.stride, Dilation: s.dilation, Groups: s.groups, Pads: s.convPads(s.x[1], s.x[2]),
			})
		},
	}
}

// patchifyCase is ViT's patch embedding: a k=s=p valid conv flattened to tokens.
func patchifyCase(name string, x []int, p, dim int) opCase {
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), x...)},
		params: []operand{param("proj", "weight", normal(0.1), p, p, x[3], dim), param("proj", "bias", normal(0.3), dim)},
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			y := graphs.Conv(ctx.In("proj"), in[0], graphs.ConvConfig{Filters: dim, Kernel: p, Stride: p, Padding: graphs.PadValid, Bias: true}, opts)
			return Reshape(y, x[0], -1, dim)
		},
		ref: func(in, q []reference.Tensor) reference.Tensor { return reference.Patchify(in[0], q[0], q[1].Data, p) },
	}
}

func batchNormCase(name string, train bool) opCase {
	const c = 5
	x := []int{4, 3, 3, c}
	bn := graphs.TorchBN
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), x...)},
		params: []operand{
			param("bn", "weight", uniform(0.5, 1.5), c), param("bn", "bias", normal(0.3), c),
			state("bn", "running_mean", normal(0.3), c), state("bn", "running_var", uniform(0.5, 1.5), c),
		},
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.BatchNorm(ctx.In("bn"), in[0], train, bn, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			if train {
				y, _, _ := reference.BatchNormTrain(in[0], p[0].Data, p[1].Data, bn.Epsilon)
				return y
			}
			return reference.BatchNormEval(in[0], p[0].Data, p[1].Data, p[2].Data, p[3].Data, bn.Epsilon)
		},
		after: func(ctx *context.Context, in, p []reference.Tensor) []Result {
			if !train {
				return nil
			}
			// running' = d·running + (1−d)·batch, with PyTorch's unbiased variance in running_var.
			_, mean, variance := reference.BatchNormTrain(in[0], p[0].Data, p[1].Data, bn.Epsilon)
			m := float64(in[0].Size() / c)
			var want, got []float64
			for k := range c {
				want = append(want, bn.Decay*p[2].Data[k]+(1-bn.Decay)*mean[k])
			}
			for k := range c {
				want = append(want, bn.Decay*p[3].Data[k]+(1-bn.Decay)*variance[k]*m/(m-1))
			}
			for _, v := range []string{"running_mean", "running_var"} {
				got = append(got, fromHost(ctx.GetVariableByScopeAndName("/bn", v).MustValue()).Data...)
			}
			abs, rel := reference.Errors(got, want)
			return []Result{within(name+"/running_stats", "running_mean, running_var "+dimsString([]int{c}), abs, rel, forwardTol)}
		},
	}
}

func layerNormCase(name string, x []int, eps float64) opCase {
	c := x[len(x)-1]
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), x...)},
		params: []operand{param("ln", "weight", uniform(0.5, 1.5), c), param("ln", "bias", normal(0.3), c)},
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.LayerNorm(ctx.In("ln"), in[0], eps, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			return reference.LayerNorm(in[0], p[0].Data, p[1].Data, eps)
		},
	}
}

func activationCase(name string, op func(*Node) *Node, ref func(float64) float64, g gen, smooth bool) opCase {
	return opCase{
		name:   name,
		inputs: []operand{input("x", g, 2, 3, 3, 4)},
		smooth: smooth,
		build:  func(_ *context.Context, in []*Node, _ graphs.Options) *Node { return op(in[0]) },
		ref:    func(in, _ []reference.Tensor) reference.Tensor { return reference.Map(in[0], ref) },
	}
}

// squeezeExciteCase composes the SE block of MobileNet/EfficientNet from graphs' layers as the nets do
// (timm's names conv_reduce, conv_expand; swish inside, sigmoid gate).
func squeezeExciteCase() opCase {
	const c, r = 8, 2
	return opCase{
		name:   "squeeze_excite",
		inputs: []operand{input("x", normal(1), 2, 4, 4, c)},
		params: []operand{
			param("se/conv_reduce", "weight", normal(0.5), 1, 1, c, r), param("se/conv_reduce", "bias", normal(0.3), r),
			param("se/conv_expand", "weight", normal(0.5), 1, 1, r, c), param("se/conv_expand", "bias", normal(0.3), c),
		},
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			x := in[0]
			ctx = ctx.In("se")
			s := Reshape(graphs.GlobalAvgPool(x), x.Shape().Dimensions[0], 1, 1, c)
			s = graphs.Swish(graphs.Conv(ctx.In("conv_reduce"), s, graphs.ConvConfig{Filters: r, Kernel: 1, Bias: true}, opts))
			s = Logistic(graphs.Conv(ctx.In("conv_expand"), s, graphs.ConvConfig{Filters: c, Kernel: 1, Bias: true}, opts))
			return Mul(x, s)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			return reference.SqueezeExcite(in[0], p[0].Reshape(c, r), p[1].Data, p[2].Reshape(r, c), p[3].Data, reference.Swish)
		},
	}
}

func crossEntropyCase(name string, smoothing float64) opCase {
	const b, k = 4, 5
	return opCase{
		name:   name,
		inputs: []operand{input("logits", normal(2), b, k), {name: "labels", dims: []int{b}, gen: labels(k), fixed: true, integer: true}},
		smooth: true,
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return trainstep.SoftmaxCrossEntropy(in[0], in[1], smoothing)
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor {
			lab := make([]int, b)
			for i, v := range in[1].Data {
				lab[i] = int(v)
			}
			return scalar(reference.SoftmaxCrossEntropy(in[0], lab, smoothing))
		},
	}
}

func softCrossEntropyCase() opCase {
	const b, k = 4, 5
	return opCase{
		name:   "soft_cross_entropy",
		inputs: []operand{input("logits", normal(2), b, k), {name: "targets", dims: []int{b, k}, gen: simplex(), fixed: true}},
		smooth: true,
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return trainstep.SoftCrossEntropy(in[0], in[1])
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor {
			return scalar(reference.SoftCrossEntropy(in[0], in[1]))
		},
	}
}

// bceCase includes logits exactly at 0, where a max/abs formulation gets the gradient wrong.
func bceCase() opCase {
	const b, k = 4, 5
	withZeros := func(rng *rand.Rand, dims []int) []float64 {
		v := normal(2)(rng, dims)
		for i := 0; i < len(v); i += 3 {
			v[i] = 0
		}
		return v
	}
	return opCase{
		name:   "bce_with_logits",
		inputs: []operand{input("logits", withZeros, b, k), {name: "targets", dims: []int{b, k}, gen: uniform(0, 1), fixed: true}},
		smooth: true,
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return trainstep.BCEWithLogits(in[0], in[1])
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor {
			return scalar(reference.BCEWithLogits(in[0], in[1]))
		},
	}
}

func scalar(v float64) reference.Tensor { return reference.FromData([]float64{v}) }

func maxPoolCase(name string, k, s, pad int) opCase {
	return opCase{
		name:   name,
		inputs: []operand{input("x", distinct(), 2, 8, 8, 3)},
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return graphs.MaxPool2D(in[0], k, s, pad)
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor {
			y, _ := reference.MaxPool2D(in[0], k, s, [2][2]int{{pad, pad}, {pad, pad}})
			return y
		},
	}
}

func avgPoolCase(name string, k, s int) opCase {
	return opCase{
		name:   name,
		inputs: []operand{input("x", normal(1), 2, 6, 6, 3)},
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return graphs.AvgPool2D(in[0], k, s)
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor { return reference.AvgPool2D(in[0], k, s) },
	}
}

func globalAvgPoolCase() opCase {
	return opCase{
		name:   "global_avgpool",
		inputs: []operand{input("x", normal(1), 2, 4, 5, 3)},
		build:  func(_ *context.Context, in []*Node, _ graphs.Options) *Node { return graphs.GlobalAvgPool(in[0]) },
		ref:    func(in, _ []reference.Tensor) reference.Tensor { return reference.GlobalAvgPool(in[0]) },
	}
}

func sdpaCase() opCase {
	dims := []int{2, 2, 5, 4}
	return opCase{
		name:   "attention_sdpa",
		inputs: []operand{input("q", normal(1), dims...), input("k", normal(1), dims...), input("v", normal(1), dims...)},
		smooth: true,
		build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return graphs.ScaledDotProductAttention(in[0], in[1], in[2])
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor {
			return reference.ScaledDotProductAttention(in[0], in[1], in[2])
		},
	}
}

func mhaCase() opCase {
	const b, t, d, heads = 2, 5, 8, 2
	return opCase{
		name:   "attention_mha",
		inputs: []operand{input("x", normal(1), b, t, d)},
		params: []operand{
			param("attn/qkv", "weight", normal(0.3), d, 3*d), param("attn/qkv", "bias", normal(0.3), 3*d),
			param("attn/proj", "weight", normal(0.3), d, d), param("attn/proj", "bias", normal(0.3), d),
		},
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.MultiHeadAttention(ctx.In("attn"), in[0], heads, nil, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			return reference.MultiHeadAttention(in[0], heads, p[0], p[1].Data, p[2], p[3].Data)
		},
	}
}

func residualCase() opCase {
	dims := []int{2, 4, 4, 3}
	return opCase{
		name:   "residual_add",
		inputs: []operand{input("x", normal(1), dims...), input("branch", normal(1), dims...)},
		build:  func(_ *context.Context, in []*Node, _ graphs.Options) *Node { return Add(in[0], in[1]) },
		ref:    func(in, _ []reference.Tensor) reference.Tensor { return reference.Add(in[0], in[1]) },
	}
}

// layerScaleCase is ConvNeXt's per-channel scale of a residual branch, a parameter named layer_scale.
func layerScaleCase() opCase {
	const c = 6
	return opCase{
		name:   "layer_scale",
		inputs: []operand{input("x", normal(1), 2, 3, 3, c)},
		params: []operand{param("block", "layer_scale", normal(0.5), c)},
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			g := graphs.Param(ctx.In("block"), in[0].Graph(), opts, "layer_scale", graphs.InitConst(1e-6), 0, 0, c)
			return Mul(in[0], Reshape(g, 1, 1, 1, c))
		},
		ref: func(in, p []reference.Tensor) reference.Tensor { return reference.LayerScale(in[0], p[0].Data) },
	}
}
