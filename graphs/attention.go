package graphs

import (
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ScaledDotProductAttention is softmax(q·kᵀ/√d)·v over q, k, v shaped [batch, heads, tokens, d].
func ScaledDotProductAttention(q, k, v *Node) *Node {
	d := q.Shape().Dimensions[3]
	scores := DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [b, h, tq, tk]
	scores = MulScalar(scores, 1/math.Sqrt(float64(d)))
	weights := Softmax(scores, -1)
	return DotGeneral(weights, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [b, h, tq, d]
}

// MultiHeadAttention is timm's Attention block over tokens x [batch, tokens, dim]: one "qkv" Linear
// to 3·dim, heads-way split, scaled dot-product attention, and a "proj" Linear back to dim.
func MultiHeadAttention(ctx *context.Context, x *Node, heads int, init Init, opts Options) *Node {
	dims := x.Shape().Dimensions
	b, t, dim := dims[0], dims[1], dims[2]
	headDim := dim / heads
	qkv := Linear(ctx.In("qkv"), x, LinearConfig{Units: 3 * dim, Init: init}, opts)
	// [b, t, 3, heads, headDim] -> [3, b, heads, t, headDim]
	qkv = TransposeAllAxes(Reshape(qkv, b, t, 3, heads, headDim), 2, 0, 3, 1, 4)
	q := Squeeze(Slice(qkv, AxisElem(0)), 0)
	k := Squeeze(Slice(qkv, AxisElem(1)), 0)
	v := Squeeze(Slice(qkv, AxisElem(2)), 0)
	opts.Stats.Add(2 * int64(heads) * int64(t) * int64(t) * int64(headDim))
	out := ScaledDotProductAttention(q, k, v)                   // [b, heads, t, headDim]
	out = Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, t, dim) // [b, t, dim]
	return Linear(ctx.In("proj"), out, LinearConfig{Units: dim, Init: init}, opts)
}
