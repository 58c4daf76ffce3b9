package bestiary

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

func randomTensor64(rng *rand.Rand, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return tensors.FromFlatDataAndDimensions(v, dims...)
}

// run64 runs build in float64 on inputs and returns its outputs' values.
func run64(t *testing.T, ctx *context.Context, build func(ctx *context.Context, in []*Node) []*Node, inputs ...any) [][]float64 {
	t.Helper()
	exec, err := context.NewExec(testBackend(), ctx, build)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(inputs...)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([][]float64, len(outs))
	for i, o := range outs {
		vals[i] = tensors.MustCopyFlatData[float64](o)
	}
	return vals
}

func maxDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// TestInvariantPointAttentionIsInvariant: moving every residue's frame by one global rotation and
// translation leaves IPA's output unchanged (the point distances and the local value points are
// invariant), while the output does depend on the frames; the backbone updates are rotations.
func TestInvariantPointAttentionIsInvariant(t *testing.T) {
	const b, r, cs, cz = 2, 5, 6, 3
	c := StructureConfig{Heads: 2, HeadDim: 3, QueryPoints: 2, ValuePoints: 3}
	rng := rand.New(rand.NewPCG(1, 2))
	opts := graphs.Options{Precision: "float64", Seed: 5}
	ctx := context.New()
	width := c.Heads*c.HeadDim + c.Heads*c.ValuePoints*4 + c.Heads*cz
	// linear_out and the backbone update start at zero (AlphaFold's init): give them values.
	ctx.InAbsPath("/ipa/linear_out").VariableWithValue("weight", randomTensor64(rng, width, cs))
	ctx.InAbsPath("/bb/linear").VariableWithValue("weight", randomTensor64(rng, cs, 6))
	s, z := randomTensor64(rng, b, r, cs), randomTensor64(rng, b, r, r, cz)
	moves := []float64{0, 1.3, -0.4, 2.0} // angle (about a fixed axis) and translation of the global move
	out := run64(t, ctx.Checked(false), func(ctx *context.Context, in []*Node) []*Node {
		rot, trans := BackboneUpdate(ctx.In("bb"), in[0], opts)
		var res []*Node
		for _, m := range moves {
			ca, sa := math.Cos(m), math.Sin(m)
			axis := []float64{ca, -sa, 0, sa * 0.6, ca * 0.6, -0.8, sa * 0.8, ca * 0.8, 0.6} // a rotation
			g := Const(in[0].Graph(), tensors.FromFlatDataAndDimensions(axis, 3, 3))
			rotM := Einsum("xy,bryj->brxj", g, rot) // g·R
			transM := AddScalar(Einsum("xy,bry->brx", g, trans), m)
			res = append(res, InvariantPointAttention(ctx.In("ipa"), in[0], in[1], rotM, transM, c, opts))
		}
		ortho := Sub(Einsum("brxy,brzy->brxz", rot, rot), Reshape(Const(in[0].Graph(), tensors.FromFlatDataAndDimensions([]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}, 3, 3)), 1, 1, 3, 3))
		// Identity frames for every residue: not a rigid move of the frames above, so the output changes.
		eye := BroadcastToDims(Reshape(Const(in[0].Graph(), tensors.FromFlatDataAndDimensions([]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}, 3, 3)), 1, 1, 3, 3), b, r, 3, 3)
		res = append(res, InvariantPointAttention(ctx.In("ipa"), in[0], in[1], eye, ZerosLike(trans), c, opts))
		return append(res, ReduceAllMax(Abs(ortho)))
	}, s, z)
	for i := 1; i < len(moves); i++ {
		if d := maxDiff(out[i], out[0]); d > 1e-10 {
			t.Errorf("global move %v changed IPA's output by %g", moves[i], d)
		}
	}
	if d := maxDiff(out[len(moves)], out[0]); d < 1e-3 {
		t.Errorf("other frames changed IPA's output by only %g: the invariance check would not see frames ignored", d)
	}
	if e := out[len(moves)+1][0]; e > 1e-12 {
		t.Errorf("backbone update's rotations are not orthonormal: |R·Rᵀ − I| up to %g", e)
	}
	if math.Abs(out[0][0]) < 1e-6 {
		t.Error("IPA's output is ~0: the check would not see a difference")
	}
}

// TestFreshEvoformerAndStructureBlocks: with AlphaFold 2's initialisation (zero final projections) a
// fresh Evoformer block is the identity on m and z, and a fresh structure module keeps identity frames.
func TestFreshEvoformerAndStructureBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, z := randomTensor64(rng, 1, 3, 4, 8), randomTensor64(rng, 1, 4, 4, 6)
	opts := graphs.Options{Precision: "float64", Seed: 2}
	cfg := EvoformerConfig{MSAHeads: 2, MSAHeadDim: 4, PairHeads: 2, PairHeadDim: 3, OuterDim: 3, TriMulDim: 5, Transition: 2}
	out := run64(t, context.New(), func(ctx *context.Context, in []*Node) []*Node {
		m2, z2 := EvoformerStack(ctx.In("evo"), in[0], in[1], 2, cfg, opts)
		_, rot, trans := StructureModule(ctx.In("sm"), Squeeze(Slice(in[0], AxisRange(), AxisElem(0)), 1), in[1], 3, DefaultStructure, opts)
		return []*Node{m2, z2, rot, trans}
	}, m, z)
	if d := maxDiff(out[0], tensors.MustCopyFlatData[float64](m)); d != 0 {
		t.Errorf("a fresh Evoformer changed m by %g", d)
	}
	if d := maxDiff(out[1], tensors.MustCopyFlatData[float64](z)); d != 0 {
		t.Errorf("a fresh Evoformer changed z by %g", d)
	}
	for i, v := range out[2] {
		if want := float64(btoi(i%9 == 0 || i%9 == 4 || i%9 == 8)); v != want {
			t.Fatalf("a fresh structure module's rotation element %d is %v, want %v", i, v, want)
		}
	}
	if d := maxDiff(out[3], make([]float64, len(out[3]))); d != 0 {
		t.Errorf("a fresh structure module moved the frames by %g", d)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
