package bestiary

import (
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// AlphaFold 2's structure module (supplement §1.8, Algorithms 20, 22, 23), backbone only: the single
// representation s [batch, residues, singleChannels] and the pair representation z [batch, residues,
// residues, pairChannels] give refined s and one frame per residue (rotation [batch, residues, 3, 3],
// translation [batch, residues, 3]), starting from identity frames, by nBlocks iterations of invariant
// point attention, transition and backbone update that share their weights.

// StructureConfig holds the invariant point attention's sizes; DefaultStructure are AlphaFold 2's.
type StructureConfig struct {
	Heads, HeadDim, QueryPoints, ValuePoints int // 12, 16, 4, 8
}

// DefaultStructure is AlphaFold 2's IPA configuration.
var DefaultStructure = StructureConfig{Heads: 12, HeadDim: 16, QueryPoints: 4, ValuePoints: 8}

// applyFrames maps local points p [b, r, h, n, 3] to global ones R·p + t with residue r's frame.
func applyFrames(rot, trans, p *Node) *Node {
	return Add(Einsum("brxy,brhpy->brhpx", rot, p), InsertAxes(trans, 2, 2))
}

// InvariantPointAttention is Algorithm 22 (without the pair representation's dropout): scalar
// attention q·k/√c, the pair bias, and the distance between the query and key points placed in global
// coordinates by each residue's frame, weighted per head by γ = softplus(head_weights) (initialised to
// 1); the output concatenates, per head, the attended values, the attended value points taken back to
// the residue's local frame, their norms, and the attended pair features, mapped by linear_out.
func InvariantPointAttention(ctx *context.Context, s, z, rot, trans *Node, c StructureConfig, opts graphs.Options) *Node {
	dims := s.Shape().Dimensions
	b, r, cs := dims[0], dims[1], dims[2]
	h, hc, nq, nv := c.Heads, c.HeadDim, c.QueryPoints, c.ValuePoints
	lin := func(name string, units int, shape ...int) *Node {
		return Reshape(afLinear(ctx, name, s, units, false, initLeCunNormal, opts), shape...)
	}
	q, k, v := lin("linear_q", h*hc, b, r, h, hc), lin("linear_k", h*hc, b, r, h, hc), lin("linear_v", h*hc, b, r, h, hc)
	qp := applyFrames(rot, trans, lin("linear_q_points", h*nq*3, b, r, h, nq, 3))
	kp := applyFrames(rot, trans, lin("linear_k_points", h*nq*3, b, r, h, nq, 3))
	vp := applyFrames(rot, trans, lin("linear_v_points", h*nv*3, b, r, h, nv, 3))
	bias := TransposeAllAxes(afLinear(ctx, "linear_b", z, h, false, initLeCunNormal, opts), 0, 3, 1, 2) // [b, h, i, j]

	wC, wL := math.Sqrt(2/(9*float64(nq))), math.Sqrt(1.0/3)
	gammaInit := math.Log(math.E - 1) // softplus⁻¹(1)
	gamma := Softplus(graphs.AsDType(graphs.Param(ctx, s.Graph(), opts, "head_weights", graphs.InitConst(gammaInit), 0, 0, h), s))
	diff := Sub(InsertAxes(qp, 2), InsertAxes(kp, 1))                              // [b, i, j, h, p, 3]
	dist := TransposeAllAxes(ReduceSum(Square(diff), -1, -2), 0, 3, 1, 2)          // [b, h, i, j]
	scalar := MulScalar(Einsum("bihc,bjhc->bhij", q, k), 1/math.Sqrt(float64(hc))) // [b, h, i, j]
	pointTerm := Mul(Reshape(MulScalar(gamma, wC/2), 1, h, 1, 1), dist)            // γ·w_C/2·Σ‖·‖²
	a := Softmax(MulScalar(Sub(Add(scalar, bias), pointTerm), wL), -1)             // [b, h, i, j]
	opts.Stats.Add(int64(r) * int64(r) * int64(h) * int64(hc+3*nq+hc+3*nv+z.Shape().Dimensions[3]))

	oPair := Einsum("bhij,bijc->bihc", a, z)
	o := Einsum("bhij,bjhc->bihc", a, v)
	oGlobal := Einsum("bhij,bjhpx->bihpx", a, vp)
	oLocal := Einsum("biyx,bihpy->bihpx", rot, Sub(oGlobal, InsertAxes(trans, 2, 2))) // Rᵀ(x − t)
	norms := Sqrt(AddScalar(ReduceSum(Square(oLocal), -1), 1e-8))
	cat := Concatenate([]*Node{
		Reshape(o, b, r, h*hc), Reshape(oLocal, b, r, h*nv*3), Reshape(norms, b, r, h*nv), Reshape(oPair, b, r, -1),
	}, -1)
	return afLinear(ctx, "linear_out", cat, cs, true, graphs.InitConst(0), opts)
}

// BackboneUpdate is Algorithm 23: a Linear of s to a quaternion's (b, c, d) (the real part is 1,
// then normalised) and a translation, as a frame [b, r, 3, 3], [b, r, 3].
func BackboneUpdate(ctx *context.Context, s *Node, opts graphs.Options) (rot, trans *Node) {
	u := afLinear(ctx, "linear", s, 6, true, graphs.InitConst(0), opts)
	part := func(i int) *Node { return Slice(u, AxisRange(), AxisRange(), AxisElem(i)) }
	norm := Rsqrt(OnePlus(Add(Add(Square(part(0)), Square(part(1))), Square(part(2)))))
	qa, qb, qc, qd := norm, Mul(part(0), norm), Mul(part(1), norm), Mul(part(2), norm)
	two := func(x, y *Node) *Node { return MulScalar(Mul(x, y), 2) }
	sq := func(p, m1, m2, m3 *Node) *Node { return Sub(Sub(Add(Square(p), Square(m1)), Square(m2)), Square(m3)) }
	rows := []*Node{
		sq(qa, qb, qc, qd), Sub(two(qb, qc), two(qa, qd)), Add(two(qb, qd), two(qa, qc)),
		Add(two(qb, qc), two(qa, qd)), sq(qa, qc, qb, qd), Sub(two(qc, qd), two(qa, qb)),
		Sub(two(qb, qd), two(qa, qc)), Add(two(qc, qd), two(qa, qb)), sq(qa, qd, qb, qc),
	}
	dims := s.Shape().Dimensions
	rot = Reshape(Concatenate(rows, -1), dims[0], dims[1], 3, 3)
	return rot, Slice(u, AxisRange(), AxisRange(), AxisRange(3, 6))
}

// StructureModule is the bestiary's structureModule (singleChannels pairChannels nBlocks), Algorithm 20
// without side chains: s = linear_in(LN(s)), z = LN(z), frames start at the identity; then nBlocks
// times with the same weights: s += IPA(s, z, frames); s = LN(s); s += a 3-layer ReLU transition;
// s = LN(s); frames ← frames ∘ BackboneUpdate(s). It returns s and the frames (rotation, translation).
// Left out: torsion angles and side chains (the ResNet angle head, Algorithm 24), the stop-gradient on
// rotations between iterations (a training choice that would hide the rotations' gradient from the
// check), the ×10 translation scale to Ångström, dropout, and the losses (FAPE).
func StructureModule(ctx *context.Context, s, z *Node, nBlocks int, c StructureConfig, opts graphs.Options) (sOut, rot, trans *Node) {
	dims := s.Shape().Dimensions
	b, r, cs := dims[0], dims[1], dims[2]
	s = afLinear(ctx, "linear_in", afNorm(ctx, "layer_norm_s", s, opts), cs, true, initLeCunNormal, opts)
	z = afNorm(ctx, "layer_norm_z", z, opts)
	eye := ConvertDType(Const(s.Graph(), tensors.FromFlatDataAndDimensions([]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}, 1, 1, 3, 3)), s.DType())
	rot = BroadcastToDims(eye, b, r, 3, 3)
	trans = Zeros(s.Graph(), shapes.Make(s.DType(), b, r, 3))
	shared := ctx
	for i := range nBlocks {
		if i == 1 { // the next iterations read the first one's variables
			ctx = shared.Reuse()
		}
		s = Add(s, InvariantPointAttention(ctx.In("ipa"), s, z, rot, trans, c, opts))
		s = afNorm(ctx, "layer_norm_ipa", s, opts)
		t := graphs.ReLU(afLinear(ctx.In("transition"), "linear_1", s, cs, true, initLeCunNormal, opts))
		t = graphs.ReLU(afLinear(ctx.In("transition"), "linear_2", t, cs, true, initLeCunNormal, opts))
		s = Add(s, afLinear(ctx.In("transition"), "linear_3", t, cs, true, graphs.InitConst(0), opts))
		s = afNorm(ctx.In("transition"), "layer_norm", s, opts)
		ur, ut := BackboneUpdate(ctx.In("bb_update"), s, opts)
		trans = Add(Einsum("brxy,bry->brx", rot, ut), trans)
		rot = Einsum("brxy,bryz->brxz", rot, ur)
	}
	return s, rot, trans
}
