package bestiary

import (
	"math"
	"math/rand/v2"
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// AlphaFold 2's Evoformer (Jumper et al. 2021, supplement §1.6, Algorithms 6–15) over the MSA
// representation m [batch, sequences, residues, msaChannels] and the pair representation z [batch,
// residues, residues, pairChannels]. Names follow OpenFold's modules; LayerNorm eps 1e-5; eval mode (no
// dropout). Initialisation as AlphaFold 2: LeCun normal for projections, gates with weight 0 and bias 1,
// and the last projection of every residual branch at zero (each block starts as the identity).

// EvoformerConfig holds the Evoformer's inner sizes; DefaultEvoformer are AlphaFold 2's.
type EvoformerConfig struct {
	MSAHeads, MSAHeadDim   int // MSA row and column attention (8, 32)
	PairHeads, PairHeadDim int // triangle attention (4, 32)
	OuterDim               int // outer-product mean (32)
	TriMulDim              int // triangle multiplication (128)
	Transition             int // MSA and pair transition widening (4)
}

// DefaultEvoformer is AlphaFold 2's Evoformer configuration.
var DefaultEvoformer = EvoformerConfig{MSAHeads: 8, MSAHeadDim: 32, PairHeads: 4, PairHeadDim: 32, OuterDim: 32, TriMulDim: 128, Transition: 4}

// initLeCunNormal is AlphaFold's default: a normal of variance 1/fanIn truncated at two standard
// deviations (rescaled so the truncated variance is 1/fanIn).
func initLeCunNormal(rng *rand.Rand, fanIn, _ int) float64 {
	std := math.Sqrt(1/float64(fanIn)) / 0.87962566103423978
	for {
		if v := rng.NormFloat64(); v >= -2 && v <= 2 {
			return v * std
		}
	}
}

func afLinear(ctx *context.Context, name string, x *Node, units int, bias bool, init graphs.Init, opts graphs.Options) *Node {
	return graphs.Linear(ctx.In(name), x, graphs.LinearConfig{Units: units, NoBias: !bias, Init: init, BiasInit: graphs.InitConst(0)}, opts)
}

// afGate is sigmoid(Linear(x)) with AlphaFold's gating init (weight 0, bias 1).
func afGate(ctx *context.Context, name string, x *Node, units int, opts graphs.Options) *Node {
	return Logistic(graphs.Linear(ctx.In(name), x, graphs.LinearConfig{Units: units, Init: graphs.InitConst(0), BiasInit: graphs.InitConst(1)}, opts))
}

func afNorm(ctx *context.Context, name string, x *Node, opts graphs.Options) *Node {
	return graphs.LayerNorm(ctx.In(name), x, 1e-5, opts)
}

// afGatedAttention is AlphaFold's gated multi-head attention over x [b, n, t, cIn] along t, for each
// of the n rows: q, k, v without bias (heads × c each), logits q·k/√c plus bias [b, heads, t, t] (nil:
// none, shared by the rows), the heads' outputs gated by sigmoid(linear_g(x)), then linear_o to cIn.
func afGatedAttention(ctx *context.Context, x, bias *Node, heads, c int, opts graphs.Options) *Node {
	dims := x.Shape().Dimensions
	b, n, t, cIn := dims[0], dims[1], dims[2], dims[3]
	proj := func(name string) *Node {
		return Reshape(afLinear(ctx, name, x, heads*c, false, initLeCunNormal, opts), b, n, t, heads, c)
	}
	q, k, v := proj("linear_q"), proj("linear_k"), proj("linear_v")
	logits := MulScalar(Einsum("bnqhc,bnkhc->bnhqk", q, k), 1/math.Sqrt(float64(c)))
	if bias != nil {
		logits = Add(logits, InsertAxes(bias, 1))
	}
	o := Einsum("bnhqk,bnkhc->bnqhc", Softmax(logits, -1), v)
	opts.Stats.Add(2 * int64(n) * int64(t) * int64(t) * int64(heads*c))
	o = Mul(Reshape(o, b, n, t, heads*c), afGate(ctx, "linear_g", x, heads*c, opts))
	return afLinear(ctx, "linear_o", o, cIn, true, graphs.InitConst(0), opts)
}

// afPairBias is the per-head attention bias LinearNoBias(zn) [b, t, t, heads] as [b, heads, t, t].
func afPairBias(ctx *context.Context, name string, zn *Node, heads int, opts graphs.Options) *Node {
	return TransposeAllAxes(afLinear(ctx, name, zn, heads, false, initLeCunNormal, opts), 0, 3, 1, 2)
}

// MSARowAttentionWithPairBias is Algorithm 7: each sequence attends along residues, with the bias
// from the pair representation.
func MSARowAttentionWithPairBias(ctx *context.Context, m, z *Node, c EvoformerConfig, opts graphs.Options) *Node {
	bias := afPairBias(ctx, "linear_z", afNorm(ctx, "layer_norm_z", z, opts), c.MSAHeads, opts)
	return afGatedAttention(ctx, afNorm(ctx, "layer_norm_m", m, opts), bias, c.MSAHeads, c.MSAHeadDim, opts)
}

// MSAColumnAttention is Algorithm 8: each residue attends along the sequences.
func MSAColumnAttention(ctx *context.Context, m *Node, c EvoformerConfig, opts graphs.Options) *Node {
	mt := TransposeAllAxes(m, 0, 2, 1, 3)
	out := afGatedAttention(ctx, afNorm(ctx, "layer_norm_m", mt, opts), nil, c.MSAHeads, c.MSAHeadDim, opts)
	return TransposeAllAxes(out, 0, 2, 1, 3)
}

// afTransition is Algorithms 9 and 15: LayerNorm, Linear to n·C, ReLU, Linear back to C.
func afTransition(ctx *context.Context, x *Node, n int, opts graphs.Options) *Node {
	ch := x.Shape().Dimensions[x.Rank()-1]
	h := graphs.ReLU(afLinear(ctx, "linear_1", afNorm(ctx, "layer_norm", x, opts), n*ch, true, initLeCunNormal, opts))
	return afLinear(ctx, "linear_2", h, ch, true, graphs.InitConst(0), opts)
}

// OuterProductMean is Algorithm 10: the mean over sequences of the outer product of two projections
// of residues i and j, flattened and projected to the pair channels.
func OuterProductMean(ctx *context.Context, m *Node, pairChannels int, c EvoformerConfig, opts graphs.Options) *Node {
	dims := m.Shape().Dimensions
	b, s, r := dims[0], dims[1], dims[2]
	mn := afNorm(ctx, "layer_norm", m, opts)
	a := afLinear(ctx, "linear_1", mn, c.OuterDim, true, initLeCunNormal, opts)
	bb := afLinear(ctx, "linear_2", mn, c.OuterDim, true, initLeCunNormal, opts)
	o := DivScalar(Einsum("bsic,bsjd->bijcd", a, bb), float64(s))
	opts.Stats.Add(int64(s) * int64(r) * int64(r) * int64(c.OuterDim*c.OuterDim))
	return afLinear(ctx, "linear_out", Reshape(o, b, r, r, c.OuterDim*c.OuterDim), pairChannels, true, graphs.InitConst(0), opts)
}

// TriangleMultiplication is Algorithm 11 (outgoing: Σ_k a_ik⊙b_jk) or 12 (incoming: Σ_k a_ki⊙b_kj).
func TriangleMultiplication(ctx *context.Context, z *Node, outgoing bool, c EvoformerConfig, opts graphs.Options) *Node {
	cz, r := z.Shape().Dimensions[3], z.Shape().Dimensions[1]
	zn := afNorm(ctx, "layer_norm_in", z, opts)
	a := Mul(afGate(ctx, "linear_a_g", zn, c.TriMulDim, opts), afLinear(ctx, "linear_a_p", zn, c.TriMulDim, true, initLeCunNormal, opts))
	b := Mul(afGate(ctx, "linear_b_g", zn, c.TriMulDim, opts), afLinear(ctx, "linear_b_p", zn, c.TriMulDim, true, initLeCunNormal, opts))
	var x *Node
	if outgoing {
		x = Einsum("bikc,bjkc->bijc", a, b)
	} else {
		x = Einsum("bkic,bkjc->bijc", a, b)
	}
	opts.Stats.Add(int64(r) * int64(r) * int64(r) * int64(c.TriMulDim))
	g := afGate(ctx, "linear_g", zn, cz, opts)
	return Mul(g, afLinear(ctx, "linear_z", afNorm(ctx, "layer_norm_out", x, opts), cz, true, graphs.InitConst(0), opts))
}

// TriangleAttention is Algorithm 13 (starting node: row i's edges ij attend to ik with bias from
// jk) or 14 (ending node: column j's edges ij attend to kj with bias from ki), the latter as the former
// on the transposed pair representation.
func TriangleAttention(ctx *context.Context, z *Node, starting bool, c EvoformerConfig, opts graphs.Options) *Node {
	if !starting {
		z = TransposeAllAxes(z, 0, 2, 1, 3)
	}
	zn := afNorm(ctx, "layer_norm", z, opts)
	out := afGatedAttention(ctx, zn, afPairBias(ctx, "linear", zn, c.PairHeads, opts), c.PairHeads, c.PairHeadDim, opts)
	if !starting {
		out = TransposeAllAxes(out, 0, 2, 1, 3)
	}
	return out
}

// EvoformerBlock is Algorithm 6: the MSA stack (row attention with pair bias, column attention,
// transition), the outer-product mean into the pair representation, and the pair stack (triangle
// multiplication outgoing and incoming, triangle attention starting and ending node, transition),
// each a residual update.
func EvoformerBlock(ctx *context.Context, m, z *Node, c EvoformerConfig, opts graphs.Options) (*Node, *Node) {
	m = Add(m, MSARowAttentionWithPairBias(ctx.In("msa_att_row"), m, z, c, opts))
	m = Add(m, MSAColumnAttention(ctx.In("msa_att_col"), m, c, opts))
	m = Add(m, afTransition(ctx.In("msa_transition"), m, c.Transition, opts))
	z = Add(z, OuterProductMean(ctx.In("outer_product_mean"), m, z.Shape().Dimensions[3], c, opts))
	z = Add(z, TriangleMultiplication(ctx.In("tri_mul_out"), z, true, c, opts))
	z = Add(z, TriangleMultiplication(ctx.In("tri_mul_in"), z, false, c, opts))
	z = Add(z, TriangleAttention(ctx.In("tri_att_start"), z, true, c, opts))
	z = Add(z, TriangleAttention(ctx.In("tri_att_end"), z, false, c, opts))
	z = Add(z, afTransition(ctx.In("pair_transition"), z, c.Transition, opts))
	return m, z
}

// EvoformerStack is the bestiary's evoformerBlock (msaChannels pairChannels nBlocks): nBlocks
// Evoformer blocks (scopes blocks/0, blocks/1, ...) with their own weights; the channels are those of
// m and z.
func EvoformerStack(ctx *context.Context, m, z *Node, nBlocks int, c EvoformerConfig, opts graphs.Options) (*Node, *Node) {
	for i := range nBlocks {
		m, z = EvoformerBlock(ctx.In("blocks").In(strconv.Itoa(i)), m, z, c, opts)
	}
	return m, z
}
