package checks

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	bref "github.com/trainer/trainer/bestiary/reference"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
	"github.com/trainer/trainer/verify/reference"
)

// AlphaFold 2's structure module (docs/bestiary.md, attention group) against their plain-loop references (bestiary/reference).

// structureCases are the rows of the structure module.
var structureCases = []func() verify.OpCase{
	structureModuleCase,
}

// structureModuleCase: 2 iterations with shared weights over 4 residues, 4 single and 3 pair channels,
// IPA with 2 heads of width 2, 2 query and 2 value points. The output is s, the rotations and the
// translations flattened and concatenated per example.
func structureModuleCase() verify.OpCase {
	const b, r, cs, cz, blocks = 1, 4, 4, 3, 2
	cfg := bestiary.StructureConfig{Heads: 2, HeadDim: 2, QueryPoints: 2, ValuePoints: 2}
	h, hc, nq, nv := cfg.Heads, cfg.HeadDim, cfg.QueryPoints, cfg.ValuePoints
	var params []verify.Operand
	norm := func(s string, ch int) {
		params = append(params, verify.Param("sm/"+s, "weight", verify.Uniform(0.5, 1.5), ch), verify.Param("sm/"+s, "bias", verify.Normal(0.3), ch))
	}
	lin := func(s string, in, out int, bias bool) {
		params = append(params, verify.Param("sm/"+s, "weight", verify.Normal(0.5), in, out))
		if bias {
			params = append(params, verify.Param("sm/"+s, "bias", verify.Normal(0.3), out))
		}
	}
	norm("layer_norm_s", cs)
	lin("linear_in", cs, cs, true)
	norm("layer_norm_z", cz)
	lin("ipa/linear_q", cs, h*hc, false)
	lin("ipa/linear_k", cs, h*hc, false)
	lin("ipa/linear_v", cs, h*hc, false)
	lin("ipa/linear_q_points", cs, h*nq*3, false)
	lin("ipa/linear_k_points", cs, h*nq*3, false)
	lin("ipa/linear_v_points", cs, h*nv*3, false)
	lin("ipa/linear_b", cz, h, false)
	params = append(params, verify.Param("sm/ipa", "head_weights", verify.Normal(0.5), h))
	lin("ipa/linear_out", h*hc+h*nv*4+h*cz, cs, true)
	norm("layer_norm_ipa", cs)
	for _, s := range []string{"transition/linear_1", "transition/linear_2", "transition/linear_3"} {
		lin(s, cs, cs, true)
	}
	norm("transition/layer_norm", cs)
	lin("bb_update/linear", cs, 6, true)
	return verify.OpCase{
		Name:   "bestiary_structure_module",
		Inputs: []verify.Operand{verify.Input("s", verify.Normal(1), b, r, cs), verify.Input("z", verify.Normal(1), b, r, r, cz)},
		Params: params,
		Smooth: true,
		Build: func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
			s, rot, trans := bestiary.StructureModule(ctx.In("sm"), in[0], in[1], blocks, cfg, opts)
			return Concatenate([]*Node{Reshape(s, b, -1), Reshape(rot, b, -1), Reshape(trans, b, -1)}, 1)
		},
		Ref: func(in, p []reference.Tensor) reference.Tensor {
			byName := map[string]reference.Tensor{}
			for i, o := range params {
				byName[o.Scope()[len("sm/"):]+"/"+o.Name()] = p[i]
			}
			lookup := func(name string) reference.Tensor {
				t, ok := byName[name]
				if !ok {
					panic("structure module reference: no parameter " + name)
				}
				return t
			}
			s, rot, trans := bref.StructureModule(in[0], in[1], lookup, bref.StructureSizes(cfg), blocks)
			return flatConcat(s, rot, trans)
		},
	}
}
