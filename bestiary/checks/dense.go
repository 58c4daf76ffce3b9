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

// The bestiary's dense-prediction and sequence blocks, each checked as a layer at a tiny
// size against its plain-loop reference. BatchNorms run in training mode (batch statistics), their
// running statistics not operands, except MobileViT's (see mobileViTCase). The steps are small and Richardson-extrapolated: the layers are
// smooth away from their ReLUs' kinks, and a 1e-4 step makes crossing one unlikely.
// denseCases are the rows of the dense-prediction and sequence blocks, in the order `trainer verify` prints them.
var denseCases = []func() verify.OpCase{
	positionalEncodingCase, unetDownCase, unetUpCase, asppCase, fpnCase, nerfMLPCase, waveNetCase, mobileViTCase,
}

// bestiaryStep is the finite-difference step of the composite layers.
const bestiaryStep = 1e-4

// convBNOperands are a bias-free conv's kernel (scope conv) and its BatchNorm's weight and bias
// (scope bn).
func convBNOperands(conv, bn string, k, in, out int) []verify.Operand {
	return []verify.Operand{
		verify.Param(conv, "weight", verify.Normal(0.4), k, k, in, out),
		verify.Param(bn, "weight", verify.Uniform(0.5, 1.5), out), verify.Param(bn, "bias", verify.Normal(0.3), out),
	}
}

// convBNAt reads the ConvBNStats whose three operands start at p[i].
func convBNAt(p []reference.Tensor, i int) bref.ConvBNStats {
	return bref.ConvBNStats{W: p[i], Gamma: p[i+1].Data, Beta: p[i+2].Data}
}

func positionalEncodingCase() verify.OpCase {
	const frequencies = 4
	return verify.OpCase{
		Name:   "positional_encoding",
		Inputs: []verify.Operand{verify.Input("x", verify.Uniform(-1, 1), 2, 3, 3)},
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
			return bestiary.PositionalEncoding(in[0], frequencies)
		},
		Ref: func(in, _ []reference.Tensor) reference.Tensor {
			return bref.PositionalEncoding(in[0], frequencies)
		},
	}
}

func doubleConvOperands(scope string, in, mid, out int) []verify.Operand {
	s := scope + "/double_conv/"
	return append(convBNOperands(s+"0", s+"1", 3, in, mid), convBNOperands(s+"3", s+"4", 3, mid, out)...)
}

func unetDownCase() verify.OpCase {
	const ic, oc = 2, 3
	eps := graphs.TorchBN.Epsilon
	return verify.OpCase{
		Name:   "unet_down",
		Inputs: []verify.Operand{verify.Input("x", verify.Distinct(), 2, 6, 6, ic)},
		Params: doubleConvOperands("down/maxpool_conv/1", ic, oc, oc),
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.UNetDown(ctx.In("down"), in[0], true, opts, oc)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			return bref.UNetDown(in[0], convBNAt(p, 0), convBNAt(p, 3), eps)
		},
	}
}

func unetUpCase() verify.OpCase {
	const xc, sc, oc = 2, 2, 3
	const ic = xc + sc
	eps := graphs.TorchBN.Epsilon
	return verify.OpCase{
		Name:   "unet_up",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 3, 3, xc), verify.Input("skip", verify.Normal(1), 2, 6, 6, sc)},
		Params: doubleConvOperands("up/conv", ic, ic/2, oc),
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.UNetUp(ctx.In("up"), in[0], in[1], true, opts, oc)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			return bref.UNetUp(in[0], in[1], convBNAt(p, 0), convBNAt(p, 3), eps)
		},
	}
}

// asppCase runs DeepLab's rates 6/12/18 on a 19x8 map: 19 rows are the fewest where rate 18's outer
// taps reach inside the image, and 8 columns let rate 6's; dropout is off (rate 0), as in evaluation.
func asppCase() verify.OpCase {
	const ic, oc = 2, 2
	eps := graphs.TorchBN.Epsilon
	var params []verify.Operand
	for i := range 4 {
		k := 3
		if i == 0 {
			k = 1
		}
		s := "aspp/convs/" + strconv.Itoa(i)
		params = append(params, convBNOperands(s+"/0", s+"/1", k, ic, oc)...)
	}
	params = append(params, convBNOperands("aspp/convs/4/1", "aspp/convs/4/2", 1, ic, oc)...)
	params = append(params, convBNOperands("aspp/project/0", "aspp/project/1", 1, 5*oc, oc)...)
	return verify.OpCase{
		Name:   "aspp",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 19, 8, ic)},
		Params: params,
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			off := 0.0
			opts.DropoutRate = &off
			return bestiary.ASPPModule(ctx.In("aspp"), in[0], true, opts, oc, bestiary.ASPPRates)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			var branches []bref.ConvBNStats
			for i := range 4 {
				branches = append(branches, convBNAt(p, 3*i))
			}
			return bref.ASPP(in[0], branches, bestiary.ASPPRates, convBNAt(p, 12), convBNAt(p, 15), eps)
		},
	}
}

// fpnCase: four levels (8x8 down to 1x1, 2..5 channels) to 3 channels; the four output maps are
// flattened per example and concatenated, finest first, into one row.
func fpnCase() verify.OpCase {
	const target = 3
	sizes, chans := []int{8, 4, 2, 1}, []int{2, 3, 4, 5}
	var inputs, params []verify.Operand
	for i := range 4 {
		inputs = append(inputs, verify.Input("c"+strconv.Itoa(i+2), verify.Normal(1), 2, sizes[i], sizes[i], chans[i]))
	}
	for i := range 4 {
		s := "fpn/inner_blocks/" + strconv.Itoa(i) + "/0"
		params = append(params, verify.Param(s, "weight", verify.Normal(0.4), 1, 1, chans[i], target), verify.Param(s, "bias", verify.Normal(0.3), target))
	}
	for i := range 4 {
		s := "fpn/layer_blocks/" + strconv.Itoa(i) + "/0"
		params = append(params, verify.Param(s, "weight", verify.Normal(0.3), 3, 3, target, target), verify.Param(s, "bias", verify.Normal(0.3), target))
	}
	return verify.OpCase{
		Name:   "fpn",
		Inputs: inputs,
		Params: params,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			outs := bestiary.FPNModule(ctx.In("fpn"), in, opts, target)
			for i, o := range outs {
				outs[i] = Reshape(o, 2, -1)
			}
			return Concatenate(outs, 1)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			var lateral, smooth []bref.Conv
			for i := range 4 {
				lateral = append(lateral, bref.Conv{W: p[2*i], B: p[2*i+1].Data})
				smooth = append(smooth, bref.Conv{W: p[8+2*i], B: p[8+2*i+1].Data})
			}
			outs := bref.FPN(in, lateral, smooth)
			row := 0
			for _, o := range outs {
				row += o.Size() / 2
			}
			y := reference.New(2, row)
			off := 0
			for _, o := range outs {
				n := o.Size() / 2
				for b := range 2 {
					copy(y.Data[b*row+off:b*row+off+n], o.Data[b*n:(b+1)*n])
				}
				off += n
			}
			return y
		},
	}
}

func linearOperands(scope string, in, out int) []verify.Operand {
	return []verify.Operand{verify.Param(scope, "weight", verify.Normal(0.5), in, out), verify.Param(scope, "bias", verify.Normal(0.3), out)}
}

func linearAt(p []reference.Tensor, i int) bref.Linear {
	return bref.Linear{W: p[i], B: p[i+1].Data}
}

// nerfMLPCase: γ(position) of one frequency (9 wide), γ(direction) 6 wide, hidden width 8.
func nerfMLPCase() verify.OpCase {
	const pos, dir, hidden = 9, 6, 8
	var params []verify.Operand
	for i := range 8 {
		in := hidden
		switch i {
		case 0:
			in = pos
		case 5:
			in = pos + hidden
		}
		params = append(params, linearOperands("nerf/pts_linears/"+strconv.Itoa(i), in, hidden)...)
	}
	params = append(params, linearOperands("nerf/alpha_linear", hidden, 1)...)
	params = append(params, linearOperands("nerf/feature_linear", hidden, hidden)...)
	params = append(params, linearOperands("nerf/views_linears/0", hidden+dir, hidden/2)...)
	params = append(params, linearOperands("nerf/rgb_linear", hidden/2, 3)...)
	return verify.OpCase{
		Name:   "nerf_mlp",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 5, pos+dir)},
		Params: params,
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.NeRFMLP(ctx.In("nerf"), in[0], opts, pos, dir, hidden)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			pts := make([]bref.Linear, 8)
			for i := range pts {
				pts[i] = linearAt(p, 2*i)
			}
			return bref.NeRFMLP(in[0], pos, pts, linearAt(p, 16), linearAt(p, 18), linearAt(p, 20), linearAt(p, 22))
		},
	}
}

// waveNetCase: 3 layers (dilations 1, 2, 4) over 9 steps of 3 channels, skips 4 wide.
func waveNetCase() verify.OpCase {
	const batch, steps, res, skip, layers = 2, 9, 3, 4, 3
	var params []verify.Operand
	for i := range layers {
		s := "wavenet/layers/" + strconv.Itoa(i) + "/"
		params = append(params,
			verify.Param(s+"filter", "weight", verify.Normal(0.5), 2, res, res), verify.Param(s+"filter", "bias", verify.Normal(0.3), res),
			verify.Param(s+"gate", "weight", verify.Normal(0.5), 2, res, res), verify.Param(s+"gate", "bias", verify.Normal(0.3), res))
		params = append(params, linearOperands(s+"skip", res, skip)...)
		if i < layers-1 {
			params = append(params, linearOperands(s+"residual", res, res)...)
		}
	}
	return verify.OpCase{
		Name:   "wavenet_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), batch, steps, res)},
		Params: params,
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.WaveNetBlock(ctx.In("wavenet"), in[0], opts, skip, layers)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			var ls []bref.WaveNetLayer
			k := 0
			for i := range layers {
				l := bref.WaveNetLayer{
					Filter: bref.Conv{W: p[k], B: p[k+1].Data}, Gate: bref.Conv{W: p[k+2], B: p[k+3].Data},
					Skip: bref.Conv{W: p[k+4], B: p[k+5].Data},
				}
				k += 6
				if i < layers-1 {
					l.Residual = bref.Conv{W: p[k], B: p[k+1].Data}
					k += 2
				}
				ls = append(ls, l)
			}
			return bref.WaveNet(in[0], ls)
		},
	}
}

// evalConvBNOperands are convBNOperands plus the BatchNorm's running statistics, for evaluation mode.
func evalConvBNOperands(conv, bn string, k, in, out int) []verify.Operand {
	return append(convBNOperands(conv, bn, k, in, out),
		verify.State(bn, "running_mean", verify.Normal(0.3), out), verify.State(bn, "running_var", verify.Uniform(0.5, 1.5), out))
}

// evalConvBNAt reads the ConvBNStats with running statistics whose five operands start at p[i].
func evalConvBNAt(p []reference.Tensor, i int) bref.ConvBNStats {
	c := convBNAt(p, i)
	c.Mean, c.Var = p[i+3].Data, p[i+4].Data
	return c
}

// mobileViTCase: a 4x4 map of 3 channels, dim 4, 2 heads, MLP 8, 2 transformer layers. Its BatchNorms
// run in evaluation mode: in training mode the batch mean after conv_proj cancels the final LayerNorm's
// bias exactly, so that bias's gradient would be 0 and its check only compare rounding noise.
func mobileViTCase() verify.OpCase {
	const ic, dim, heads, mlp, blocks = 3, 4, 2, 8, 2
	norm := func(scope string, c int) []verify.Operand {
		return []verify.Operand{verify.Param(scope, "weight", verify.Uniform(0.5, 1.5), c), verify.Param(scope, "bias", verify.Normal(0.3), c)}
	}
	params := evalConvBNOperands("mvit/conv_kxk/conv", "mvit/conv_kxk/bn", 3, ic, ic)
	params = append(params, verify.Param("mvit/conv_1x1", "weight", verify.Normal(0.4), 1, 1, ic, dim))
	for i := range blocks {
		s := "mvit/transformer/" + strconv.Itoa(i) + "/"
		params = append(params, norm(s+"norm1", dim)...)
		params = append(params, linearOperands(s+"attn/qkv", dim, 3*dim)...)
		params = append(params, linearOperands(s+"attn/proj", dim, dim)...)
		params = append(params, norm(s+"norm2", dim)...)
		params = append(params, linearOperands(s+"mlp/fc1", dim, mlp)...)
		params = append(params, linearOperands(s+"mlp/fc2", mlp, dim)...)
	}
	params = append(params, norm("mvit/norm", dim)...)
	params = append(params, evalConvBNOperands("mvit/conv_proj/conv", "mvit/conv_proj/bn", 1, dim, ic)...)
	params = append(params, evalConvBNOperands("mvit/conv_fusion/conv", "mvit/conv_fusion/bn", 3, 2*ic, ic)...)
	return verify.OpCase{
		Name:   "mobilevit_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), 2, 4, 4, ic)},
		Params: params,
		Smooth: true,
		Step:   bestiaryStep,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.MobileViTBlock(ctx.In("mvit"), in[0], false, opts, dim, heads, mlp, blocks)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			mp := bref.MobileViTParams{ConvKxK: evalConvBNAt(p, 0), Conv1x1: p[5]}
			k := 6
			for range blocks {
				mp.Layers = append(mp.Layers, bref.TransformerLayer{
					Norm1Gamma: p[k].Data, Norm1Beta: p[k+1].Data, QKV: linearAt(p, k+2), Proj: linearAt(p, k+4),
					Norm2Gamma: p[k+6].Data, Norm2Beta: p[k+7].Data, FC1: linearAt(p, k+8), FC2: linearAt(p, k+10),
				})
				k += 12
			}
			mp.NormGamma, mp.NormBeta = p[k].Data, p[k+1].Data
			mp.ConvProj, mp.ConvFusion = evalConvBNAt(p, k+2), evalConvBNAt(p, k+7)
			return bref.MobileViT(in[0], mp, heads, 1e-5, graphs.TorchBN.Epsilon)
		},
	}
}
