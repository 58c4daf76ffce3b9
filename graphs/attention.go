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
	q, k, v := splitQKV(qkv)
	opts.Stats.Add(2 * int64(heads) * int64(t) * int64(t) * int64(headDim))
	out := ScaledDotProductAttention(q, k, v)                   // [b, heads, t, headDim]
	out = Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, t, dim) // [b, t, dim]
	return Linear(ctx.In("proj"), out, LinearConfig{Units: dim, Init: init}, opts)
}

// splitQKV returns the three parts of qkv [3, ...] along its first axis, whose gradient is their
// gradients concatenated. Autodiff's own gradient of each Slice pads it with zeros to qkv's whole shape
// (a broadcast of zeros and a concatenation each) and adds the three: 1.3% of ViT-Tiny's step on one
// core. The parts still hand their gradients on to the Slices, so that qkv's gradient is asked for at all;
// those padded sums are built but unused, and the executor skips nodes no output needs.
func splitQKV(qkv *Node) (q, k, v *Node) {
	var grads [3]*Node
	whole := IdentityWithCustomGradient(qkv, func(_, _ *Node) *Node {
		parts := make([]*Node, 3)
		for i, g := range grads {
			if g == nil { // a part the loss does not depend on
				part := qkv.Shape().Clone()
				part.Dimensions = part.Dimensions[1:]
				g = Zeros(qkv.Graph(), part)
			}
			parts[i] = InsertAxes(g, 0)
		}
		return Concatenate(parts, 0)
	})
	var out [3]*Node
	for i := range out {
		out[i] = IdentityWithCustomGradient(Squeeze(Slice(whole, AxisElem(i)), 0), func(_, g *Node) *Node {
			grads[i] = g
			return g
		})
	}
	return out[0], out[1], out[2]
}
