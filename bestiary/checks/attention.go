package verify

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's attention and structure blocks (docs/bestiary.md) against verify/reference.

func init() {
	extraCases = append(extraCases, transformerDecoderCase, detrHeadsCase, mambaBlockCase,
		func() opCase { return pairTileCase("bestiary_pair_tile", 3) },
		func() opCase { return pairTileCase("bestiary_pair_tile_no_pair", 0) })
}

// mhaOperands are one nn.MultiheadAttention's weights in scope (see reference.TorchMHA).
func mhaOperands(scope string, d int) []operand {
	return []operand{
		param(scope, "in_proj_weight", normal(0.5), d, 3*d), param(scope, "in_proj_bias", normal(0.3), 3*d),
		param(scope+"/out_proj", "weight", normal(0.5), d, d), param(scope+"/out_proj", "bias", normal(0.3), d),
	}
}

func mhaParams(p []reference.Tensor) reference.MHAParams {
	return reference.MHAParams{InW: p[0], InB: p[1].Data, OutW: p[2], OutB: p[3].Data}
}

// transformerDecoderCase: 2 post-norm blocks, 3 queries over 5 memory tokens of width 4, 2 heads.
func transformerDecoderCase() opCase {
	const b, t, d, heads, mlp, blocks, queries = 2, 5, 4, 2, 6, 2, 3
	params := []operand{param("dec/query_embed", "weight", normal(1), queries, d)}
	for i := range blocks {
		s := fmt.Sprintf("dec/layers/%d/", i)
		params = append(params, mhaOperands(s+"self_attn", d)...)
		params = append(params, mhaOperands(s+"multihead_attn", d)...)
		params = append(params,
			param(s+"linear1", "weight", normal(0.5), d, mlp), param(s+"linear1", "bias", normal(0.3), mlp),
			param(s+"linear2", "weight", normal(0.5), mlp, d), param(s+"linear2", "bias", normal(0.3), d))
		for _, n := range []string{"norm1", "norm2", "norm3"} {
			params = append(params, param(s+n, "weight", uniform(0.5, 1.5), d), param(s+n, "bias", normal(0.3), d))
		}
	}
	return opCase{
		name:   "bestiary_transformer_decoder",
		inputs: []operand{input("memory", normal(1), b, t, d)},
		params: params,
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.TransformerDecoder(ctx.In("dec"), in[0], heads, mlp, blocks, queries, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			var layers []reference.DecoderLayerParams
			for i := range blocks {
				q := p[1+i*18 : 1+(i+1)*18]
				layers = append(layers, reference.DecoderLayerParams{
					SelfAttn: mhaParams(q[0:4]), CrossAttn: mhaParams(q[4:8]),
					W1: q[8], B1: q[9].Data, W2: q[10], B2: q[11].Data,
					Norm1W: q[12].Data, Norm1B: q[13].Data, Norm2W: q[14].Data, Norm2B: q[15].Data,
					Norm3W: q[16].Data, Norm3B: q[17].Data,
				})
			}
			return reference.TransformerDecoder(in[0], p[0], layers, heads)
		},
	}
}

// detrHeadsCase checks both heads at once: the output is the class logits (nClasses+1) and the four
// box coordinates concatenated on the last axis.
func detrHeadsCase() opCase {
	const b, q, d, classes = 2, 3, 4, 3
	params := []operand{param("heads/class_embed", "weight", normal(0.5), d, classes+1), param("heads/class_embed", "bias", normal(0.3), classes+1)}
	for i, out := range []int{d, d, 4} {
		s := fmt.Sprintf("heads/bbox_embed/layers/%d", i)
		params = append(params, param(s, "weight", normal(0.7), d, out), param(s, "bias", normal(0.3), out))
	}
	return opCase{
		name:   "bestiary_detr_heads",
		inputs: []operand{input("x", normal(1), b, q, d)},
		params: params,
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			logits, boxes := graphs.DETRHeads(ctx.In("heads"), in[0], classes, opts)
			return Concatenate([]*Node{logits, boxes}, -1)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			logits, boxes := reference.DETRHeads(in[0], p[0], p[1].Data,
				[3]reference.Tensor{p[2], p[4], p[6]}, [3][]float64{p[3].Data, p[5].Data, p[7].Data})
			return reference.ConcatChannels(logits, boxes)
		},
	}
}

// mambaBlockCase: 2 blocks over 5 time steps of width 4, expand 2 (8 channels), state 3, dt_rank 1.
func mambaBlockCase() opCase {
	const b, l, d, state, expand, blocks, k = 2, 5, 4, 3, 2, 2, 4
	e, r := expand*d, graphs.MambaDTRank(d)
	var params []operand
	for i := range blocks {
		s := fmt.Sprintf("mamba/layers/%d/", i)
		m := s + "mixer"
		params = append(params,
			param(s+"norm", "weight", uniform(0.5, 1.5), d),
			param(m+"/in_proj", "weight", normal(0.5), d, 2*e),
			param(m+"/conv1d", "weight", normal(0.5), k, e), param(m+"/conv1d", "bias", normal(0.3), e),
			param(m+"/x_proj", "weight", normal(0.5), e, r+2*state),
			param(m+"/dt_proj", "weight", normal(0.5), r, e), param(m+"/dt_proj", "bias", normal(0.5), e),
			param(m, "A_log", normal(0.5), e, state), param(m, "D", normal(0.5), e),
			param(m+"/out_proj", "weight", normal(0.5), e, d))
	}
	return opCase{
		name:   "bestiary_mamba_block",
		inputs: []operand{input("x", normal(1), b, l, d)},
		params: params,
		smooth: true,
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			return graphs.MambaBlocks(ctx.In("mamba"), in[0], state, expand, blocks, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			var ps []reference.MambaParams
			for i := range blocks {
				q := p[i*10 : (i+1)*10]
				ps = append(ps, reference.MambaParams{
					Norm: q[0].Data, InProj: q[1], ConvW: q[2], ConvB: q[3].Data, XProj: q[4],
					DTW: q[5], DTB: q[6].Data, ALog: q[7], D: q[8].Data, OutProj: q[9],
				})
			}
			return reference.MambaBlocks(in[0], ps)
		},
	}
}

// pairTileCase: 4 residues of 3 features, pairIn pair channels, projected to 5.
func pairTileCase(name string, pairIn int) opCase {
	const b, l, c, out = 2, 4, 3, 5
	inputs := []operand{input("s", normal(1), b, l, c)}
	if pairIn > 0 {
		inputs = append(inputs, input("pair", normal(1), b, l, l, pairIn))
	}
	return opCase{
		name:   name,
		inputs: inputs,
		params: []operand{param("tile/proj", "weight", normal(0.5), 2*c+pairIn, out), param("tile/proj", "bias", normal(0.3), out)},
		build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			var pair *Node
			if pairIn > 0 {
				pair = in[1]
			}
			return graphs.PairTile(ctx.In("tile"), in[0], pair, out, opts)
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			pair := reference.New(b, l, l, 0)
			if pairIn > 0 {
				pair = in[1]
			}
			return reference.PairTile(in[0], pair, p[0], p[1].Data)
		},
	}
}
