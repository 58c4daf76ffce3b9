package checks

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	bref "github.com/trainer/trainer/bestiary/reference"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's attention and structure blocks (docs/bestiary.md) against their plain-loop references (bestiary/reference).

// attentionCases are the rows of the attention blocks.
var attentionCases = []func() verify.OpCase{
	transformerDecoderCase, detrHeadsCase, mambaBlockCase,
	func() verify.OpCase { return pairTileCase("bestiary_pair_tile", 3) },
	func() verify.OpCase { return pairTileCase("bestiary_pair_tile_no_pair", 0) },
}

// mhaOperands are one nn.MultiheadAttention's weights in scope (see bref.TorchMHA).
func mhaOperands(scope string, d int) []verify.Operand {
	return []verify.Operand{
		verify.Param(scope, "in_proj_weight", verify.Normal(0.5), d, 3*d), verify.Param(scope, "in_proj_bias", verify.Normal(0.3), 3*d),
		verify.Param(scope+"/out_proj", "weight", verify.Normal(0.5), d, d), verify.Param(scope+"/out_proj", "bias", verify.Normal(0.3), d),
	}
}

func mhaParams(p []reference.Tensor) bref.MHAParams {
	return bref.MHAParams{InW: p[0], InB: p[1].Data, OutW: p[2], OutB: p[3].Data}
}

// transformerDecoderCase: 2 post-norm blocks, 3 queries over 5 memory tokens of width 4, 2 heads.
func transformerDecoderCase() verify.OpCase {
	const b, t, d, heads, mlp, blocks, queries = 2, 5, 4, 2, 6, 2, 3
	params := []verify.Operand{verify.Param("dec/query_embed", "weight", verify.Normal(1), queries, d)}
	for i := range blocks {
		s := fmt.Sprintf("dec/layers/%d/", i)
		params = append(params, mhaOperands(s+"self_attn", d)...)
		params = append(params, mhaOperands(s+"multihead_attn", d)...)
		params = append(params,
			verify.Param(s+"linear1", "weight", verify.Normal(0.5), d, mlp), verify.Param(s+"linear1", "bias", verify.Normal(0.3), mlp),
			verify.Param(s+"linear2", "weight", verify.Normal(0.5), mlp, d), verify.Param(s+"linear2", "bias", verify.Normal(0.3), d))
		for _, n := range []string{"norm1", "norm2", "norm3"} {
			params = append(params, verify.Param(s+n, "weight", verify.Uniform(0.5, 1.5), d), verify.Param(s+n, "bias", verify.Normal(0.3), d))
		}
	}
	return verify.OpCase{
		Name:   "bestiary_transformer_decoder",
		Inputs: []verify.Operand{verify.Input("memory", verify.Normal(1), b, t, d)},
		Params: params,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.TransformerDecoder(ctx.In("dec"), in[0], heads, mlp, blocks, queries, opts)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			var layers []bref.DecoderLayerParams
			for i := range blocks {
				q := p[1+i*18 : 1+(i+1)*18]
				layers = append(layers, bref.DecoderLayerParams{
					SelfAttn: mhaParams(q[0:4]), CrossAttn: mhaParams(q[4:8]),
					W1: q[8], B1: q[9].Data, W2: q[10], B2: q[11].Data,
					Norm1W: q[12].Data, Norm1B: q[13].Data, Norm2W: q[14].Data, Norm2B: q[15].Data,
					Norm3W: q[16].Data, Norm3B: q[17].Data,
				})
			}
			return bref.TransformerDecoder(in[0], p[0], layers, heads)
		},
	}
}

// detrHeadsCase checks both heads at once: the output is the class logits (nClasses+1) and the four
// box coordinates concatenated on the last axis.
func detrHeadsCase() verify.OpCase {
	const b, q, d, classes = 2, 3, 4, 3
	params := []verify.Operand{verify.Param("heads/class_embed", "weight", verify.Normal(0.5), d, classes+1), verify.Param("heads/class_embed", "bias", verify.Normal(0.3), classes+1)}
	for i, out := range []int{d, d, 4} {
		s := fmt.Sprintf("heads/bbox_embed/layers/%d", i)
		params = append(params, verify.Param(s, "weight", verify.Normal(0.7), d, out), verify.Param(s, "bias", verify.Normal(0.3), out))
	}
	return verify.OpCase{
		Name:   "bestiary_detr_heads",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), b, q, d)},
		Params: params,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			logits, boxes := bestiary.DETRHeads(ctx.In("heads"), in[0], classes, opts)
			return Concatenate([]*Node{logits, boxes}, -1)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			logits, boxes := bref.DETRHeads(in[0], p[0], p[1].Data,
				[3]reference.Tensor{p[2], p[4], p[6]}, [3][]float64{p[3].Data, p[5].Data, p[7].Data})
			return bref.ConcatChannels(logits, boxes)
		},
	}
}

// mambaBlockCase: 2 blocks over 5 time steps of width 4, expand 2 (8 channels), state 3, dt_rank 1.
func mambaBlockCase() verify.OpCase {
	const b, l, d, state, expand, blocks, k = 2, 5, 4, 3, 2, 2, 4
	e, r := expand*d, bestiary.MambaDTRank(d)
	var params []verify.Operand
	for i := range blocks {
		s := fmt.Sprintf("mamba/layers/%d/", i)
		m := s + "mixer"
		params = append(params,
			verify.Param(s+"norm", "weight", verify.Uniform(0.5, 1.5), d),
			verify.Param(m+"/in_proj", "weight", verify.Normal(0.5), d, 2*e),
			verify.Param(m+"/conv1d", "weight", verify.Normal(0.5), k, e), verify.Param(m+"/conv1d", "bias", verify.Normal(0.3), e),
			verify.Param(m+"/x_proj", "weight", verify.Normal(0.5), e, r+2*state),
			verify.Param(m+"/dt_proj", "weight", verify.Normal(0.5), r, e), verify.Param(m+"/dt_proj", "bias", verify.Normal(0.5), e),
			verify.Param(m, "A_log", verify.Normal(0.5), e, state), verify.Param(m, "D", verify.Normal(0.5), e),
			verify.Param(m+"/out_proj", "weight", verify.Normal(0.5), e, d))
	}
	return verify.OpCase{
		Name:   "bestiary_mamba_block",
		Inputs: []verify.Operand{verify.Input("x", verify.Normal(1), b, l, d)},
		Params: params,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return bestiary.MambaBlocks(ctx.In("mamba"), in[0], state, expand, blocks, opts)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			var ps []bref.MambaParams
			for i := range blocks {
				q := p[i*10 : (i+1)*10]
				ps = append(ps, bref.MambaParams{
					Norm: q[0].Data, InProj: q[1], ConvW: q[2], ConvB: q[3].Data, XProj: q[4],
					DTW: q[5], DTB: q[6].Data, ALog: q[7], D: q[8].Data, OutProj: q[9],
				})
			}
			return bref.MambaBlocks(in[0], ps)
		},
	}
}

// pairTileCase: 4 residues of 3 features, pairIn pair channels, projected to 5.
func pairTileCase(name string, pairIn int) verify.OpCase {
	const b, l, c, out = 2, 4, 3, 5
	inputs := []verify.Operand{verify.Input("s", verify.Normal(1), b, l, c)}
	if pairIn > 0 {
		inputs = append(inputs, verify.Input("pair", verify.Normal(1), b, l, l, pairIn))
	}
	return verify.OpCase{
		Name:   name,
		Inputs: inputs,
		Params: []verify.Operand{verify.Param("tile/proj", "weight", verify.Normal(0.5), 2*c+pairIn, out), verify.Param("tile/proj", "bias", verify.Normal(0.3), out)},
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			var pair *Node
			if pairIn > 0 {
				pair = in[1]
			}
			return bestiary.PairTile(ctx.In("tile"), in[0], pair, out, opts)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			pair := reference.New(b, l, l, 0)
			if pairIn > 0 {
				pair = in[1]
			}
			return bref.PairTile(in[0], pair, p[0], p[1].Data)
		},
	}
}
