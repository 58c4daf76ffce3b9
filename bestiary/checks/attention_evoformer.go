package checks

import (
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	bref "github.com/trainer/trainer/bestiary/reference"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
	"github.com/trainer/trainer/verify/reference"
)

// The Evoformer block (docs/bestiary.md, attention group) against their plain-loop references (bestiary/reference).

// evoformerCases are the rows of the Evoformer.
var evoformerCases = []func() verify.OpCase{
	evoformerCase,
}

// evoformerOperands lists one Evoformer block's parameters under scope, as bestiary.EvoformerBlock
// creates them.
func evoformerOperands(scope string, cm, cz int, c bestiary.EvoformerConfig) []verify.Operand {
	var ops []verify.Operand
	norm := func(s string, ch int) {
		ops = append(ops, verify.Param(scope+"/"+s, "weight", verify.Uniform(0.5, 1.5), ch), verify.Param(scope+"/"+s, "bias", verify.Normal(0.3), ch))
	}
	lin := func(s string, in, out int, bias bool) {
		ops = append(ops, verify.Param(scope+"/"+s, "weight", verify.Normal(0.5), in, out))
		if bias {
			ops = append(ops, verify.Param(scope+"/"+s, "bias", verify.Normal(0.3), out))
		}
	}
	attention := func(s string, ch, heads, dim int) {
		for _, n := range []string{"linear_q", "linear_k", "linear_v"} {
			lin(s+"/"+n, ch, heads*dim, false)
		}
		lin(s+"/linear_g", ch, heads*dim, true)
		lin(s+"/linear_o", heads*dim, ch, true)
	}
	transition := func(s string, ch int) {
		norm(s+"/layer_norm", ch)
		lin(s+"/linear_1", ch, c.Transition*ch, true)
		lin(s+"/linear_2", c.Transition*ch, ch, true)
	}
	norm("msa_att_row/layer_norm_m", cm)
	// layer_norm_z's bias moves every pair-bias logit by the same w·β, which the softmax ignores: the
	// output does not depend on it, so its gradient is zero and it is held fixed (not differentiated).
	ops = append(ops, verify.Param(scope+"/msa_att_row/layer_norm_z", "weight", verify.Uniform(0.5, 1.5), cz),
		verify.State(scope+"/msa_att_row/layer_norm_z", "bias", verify.Normal(0.3), cz))
	lin("msa_att_row/linear_z", cz, c.MSAHeads, false)
	attention("msa_att_row", cm, c.MSAHeads, c.MSAHeadDim)
	norm("msa_att_col/layer_norm_m", cm)
	attention("msa_att_col", cm, c.MSAHeads, c.MSAHeadDim)
	transition("msa_transition", cm)
	norm("outer_product_mean/layer_norm", cm)
	lin("outer_product_mean/linear_1", cm, c.OuterDim, true)
	lin("outer_product_mean/linear_2", cm, c.OuterDim, true)
	lin("outer_product_mean/linear_out", c.OuterDim*c.OuterDim, cz, true)
	for _, s := range []string{"tri_mul_out", "tri_mul_in"} {
		norm(s+"/layer_norm_in", cz)
		for _, n := range []string{"linear_a_p", "linear_a_g", "linear_b_p", "linear_b_g"} {
			lin(s+"/"+n, cz, c.TriMulDim, true)
		}
		lin(s+"/linear_g", cz, cz, true)
		norm(s+"/layer_norm_out", c.TriMulDim)
		lin(s+"/linear_z", c.TriMulDim, cz, true)
	}
	for _, s := range []string{"tri_att_start", "tri_att_end"} {
		norm(s+"/layer_norm", cz)
		lin(s+"/linear", cz, c.PairHeads, false)
		attention(s, cz, c.PairHeads, c.PairHeadDim)
	}
	transition("pair_transition", cz)
	return ops
}

// flatConcat flattens each tensor past the batch axis and concatenates them: [batch, Σ sizes].
func flatConcat(ts ...reference.Tensor) reference.Tensor {
	b := ts[0].Dims[0]
	per := 0
	for _, t := range ts {
		per += t.Size() / b
	}
	out := reference.New(b, per)
	off := 0
	for _, t := range ts {
		n := t.Size() / b
		for i := range b {
			copy(out.Data[i*per+off:], t.Data[i*n:(i+1)*n])
		}
		off += n
	}
	return out
}

// evoformerCase: one block over 3 sequences × 4 residues, 4 MSA and 4 pair channels, 2 heads of 2
// everywhere, outer-product width 2, triangle-multiplication width 3, transitions ×2. The output is m
// and z flattened and concatenated per example.
func evoformerCase() verify.OpCase {
	const b, s, r, cm, cz = 1, 3, 4, 4, 4
	cfg := bestiary.EvoformerConfig{MSAHeads: 2, MSAHeadDim: 2, PairHeads: 2, PairHeadDim: 2, OuterDim: 2, TriMulDim: 3, Transition: 2}
	const scope = "evo/blocks/0"
	params := evoformerOperands(scope, cm, cz, cfg)
	return verify.OpCase{
		Name:   "bestiary_evoformer_block",
		Inputs: []verify.Operand{verify.Input("m", verify.Normal(1), b, s, r, cm), verify.Input("z", verify.Normal(1), b, r, r, cz)},
		Params: params,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			m, z := bestiary.EvoformerStack(ctx.In("evo"), in[0], in[1], 1, cfg, opts)
			return Concatenate([]*Node{Reshape(m, b, -1), Reshape(z, b, -1)}, 1)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			byName := map[string]reference.Tensor{}
			for i, o := range params {
				byName[strings.TrimPrefix(o.Scope(), scope+"/")+"/"+o.Name()] = p[i]
			}
			lookup := func(name string) reference.Tensor {
				t, ok := byName[name]
				if !ok {
					panic("evoformer reference: no parameter " + name)
				}
				return t
			}
			m, z := bref.EvoformerBlock(in[0], in[1], lookup, bref.EvoformerSizes(cfg))
			return flatConcat(m, z)
		},
	}
}
