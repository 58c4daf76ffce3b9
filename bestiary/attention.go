package bestiary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The bestiary's attention and structure blocks (docs/bestiary.md): a DETR-style transformer decoder
// and DETR's heads, and Mamba's selective-scan block. Tokens are [batch, tokens, dim].

// TorchMultiheadAttention is nn.MultiheadAttention (batch_first, no mask) of queries [b, tq, d] over
// keys/values kv [b, tk, d]: one packed in-projection in_proj_weight [d, 3d] (PyTorch's [3d, d]
// transposed; xavier-uniform, zero bias in_proj_bias), heads-way scaled dot-product attention and
// out_proj (PyTorch's default weight, zero bias).
func TorchMultiheadAttention(ctx *context.Context, query, kv *Node, heads int, opts graphs.Options) *Node {
	g := query.Graph()
	qd, kd := query.Shape().Dimensions, kv.Shape().Dimensions
	b, tq, tk, d := qd[0], qd[1], kd[1], qd[2]
	if d%heads != 0 {
		panic(fmt.Sprintf("graphs.TorchMultiheadAttention in %s: %d heads do not divide dim %d", ctx.Scope(), heads, d))
	}
	hd := d / heads
	w := graphs.AsDType(graphs.Param(ctx, g, opts, "in_proj_weight", graphs.InitXavierUniform, d, 3*d, d, 3*d), query)
	bias := graphs.AsDType(graphs.Param(ctx, g, opts, "in_proj_bias", graphs.InitConst(0), 0, 0, 3*d), query)
	project := func(x *Node, part, t int) *Node {
		wp := Slice(w, AxisRange(), AxisRange(part*d, (part+1)*d))
		bp := Slice(bias, AxisRange(part*d, (part+1)*d))
		y := Add(Dot(Reshape(x, -1, d), wp), InsertAxes(bp, 0))
		return TransposeAllAxes(Reshape(y, b, t, heads, hd), 0, 2, 1, 3) // [b, heads, t, hd]
	}
	opts.Stats.Add(int64(tq)*int64(d)*int64(d) + 2*int64(tk)*int64(d)*int64(d))
	opts.Stats.Add(2 * int64(tq) * int64(tk) * int64(d))
	out := graphs.ScaledDotProductAttention(project(query, 0, tq), project(kv, 1, tk), project(kv, 2, tk))
	out = Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, tq, d)
	return graphs.Linear(ctx.In("out_proj"), out, graphs.LinearConfig{Units: d, BiasInit: graphs.InitConst(0)}, opts)
}

// TransformerDecoderLayer is nn.TransformerDecoderLayer (batch_first, post-norm: norm_first=False,
// ReLU, eval mode so no dropout): x = norm1(x + self_attn(x)); x = norm2(x + multihead_attn(x,
// memory)); x = norm3(x + linear2(relu(linear1(x)))). LayerNorm eps 1e-5.
func TransformerDecoderLayer(ctx *context.Context, x, memory *Node, heads, mlpDim int, opts graphs.Options) *Node {
	d := x.Shape().Dimensions[2]
	const eps = 1e-5
	x = graphs.LayerNorm(ctx.In("norm1"), Add(x, TorchMultiheadAttention(ctx.In("self_attn"), x, x, heads, opts)), eps, opts)
	x = graphs.LayerNorm(ctx.In("norm2"), Add(x, TorchMultiheadAttention(ctx.In("multihead_attn"), x, memory, heads, opts)), eps, opts)
	h := graphs.ReLU(graphs.Linear(ctx.In("linear1"), x, graphs.LinearConfig{Units: mlpDim}, opts))
	h = graphs.Linear(ctx.In("linear2"), h, graphs.LinearConfig{Units: d}, opts)
	return graphs.LayerNorm(ctx.In("norm3"), Add(x, h), eps, opts)
}

// TransformerDecoder is the bestiary's transformerDecoder (dim heads mlpDim nBlocks nQueries): nQueries
// learned queries (query_embed/weight [nQueries, dim], nn.Embedding's N(0, 1)) are the target of
// nBlocks post-norm nn.TransformerDecoderLayer blocks (scopes layers/0, layers/1, ...) that attend to
// themselves and to memory, the input tokens [batch, tokens, dim]. Output: [batch, nQueries, dim].
// This is nn.TransformerDecoder(tgt=queries, memory) without a final norm; DETR itself starts from
// tgt = 0 and adds the queries as positional embeddings to every attention's q and k instead.
func TransformerDecoder(ctx *context.Context, memory *Node, heads, mlpDim, nBlocks, nQueries int, opts graphs.Options) *Node {
	dims := memory.Shape().Dimensions
	b, d := dims[0], dims[2]
	q := graphs.AsDType(graphs.Param(ctx.In("query_embed"), memory.Graph(), opts, "weight", graphs.InitNormal(1), 0, 0, nQueries, d), memory)
	x := BroadcastToDims(InsertAxes(q, 0), b, nQueries, d)
	for i := range nBlocks {
		x = TransformerDecoderLayer(ctx.In("layers").In(strconv.Itoa(i)), x, memory, heads, mlpDim, opts)
	}
	return x
}

// DETRHeads is the bestiary's detrHeads (dim nClasses) over decoder outputs x [batch, queries, dim]:
// class_embed, a Linear to nClasses+1 logits (the last is DETR's no-object class), and bbox_embed, a
// 3-layer MLP (dim, dim, 4; ReLU between; scopes bbox_embed/layers/0..2) with a sigmoid, boxes as
// normalised (cx, cy, w, h). PyTorch's default Linear init, as DETR.
func DETRHeads(ctx *context.Context, x *Node, nClasses int, opts graphs.Options) (logits, boxes *Node) {
	d := x.Shape().Dimensions[2]
	logits = graphs.Linear(ctx.In("class_embed"), x, graphs.LinearConfig{Units: nClasses + 1}, opts)
	h := x
	for i, units := range []int{d, d, 4} {
		h = graphs.Linear(ctx.In("bbox_embed").In("layers").In(strconv.Itoa(i)), h, graphs.LinearConfig{Units: units}, opts)
		if i < 2 {
			h = graphs.ReLU(h)
		}
	}
	return logits, Logistic(h)
}

// RMSNorm is x / √(mean(x²) + eps) · weight over the last axis (Mamba's RMSNorm; weight starts at 1).
func RMSNorm(ctx *context.Context, x *Node, eps float64, opts graphs.Options) *Node {
	ch := x.Shape().Dimensions[x.Rank()-1]
	w := graphs.Param(ctx, x.Graph(), opts, "weight", graphs.InitConst(1), 0, 0, ch)
	xf := x
	if graphs.HalfPrecision(x) { // the statistic in float32, as LayerNorm
		xf = ConvertDType(x, w.DType())
	}
	ms := ReduceAndKeep(Square(xf), ReduceMean, -1)
	y := Mul(Mul(xf, Rsqrt(AddScalar(ms, eps))), graphs.AsChannels(w, x.Rank()))
	if y.DType() != x.DType() {
		y = ConvertDType(y, x.DType())
	}
	return y
}

// MambaConfig holds the sizes of Mamba's mixer (mamba_simple.Mamba's defaults: d_conv 4, dt_rank
// ⌈dim/16⌉, dt in [0.001, 0.1]).
type MambaConfig struct {
	StateSize, Expand, ConvKernel, DTRank int
}

// MambaDTRank is Mamba's default dt_rank, ⌈dim/16⌉.
func MambaDTRank(dim int) int { return (dim + 15) / 16 }

// MambaMixer is mamba_simple.Mamba over x [batch, L, dim]: in_proj (no bias) to x and gate z of width
// dInner = expand·dim; a depthwise causal conv1d (kernel ConvKernel, bias) and SiLU on x; x_proj (no
// bias) to dt (DTRank), B and C (StateSize each); Δ = softplus(dt_proj(dt)); the selective scan
// h_t = exp(Δ_t·A)⊙h_{t−1} + Δ_t·x_t·B_t, y_t = C_t·h_t + D⊙x_t with A = −exp(A_log); y⊙SiLU(z);
// out_proj (no bias). outScale scales out_proj's initial weight (Mamba's 1/√nBlocks).
//
// The scan is unrolled over time in the graph, L steps of [batch, dInner, StateSize] element-wise ops:
// exact, and fine at the bestiary's sizes, but its graph grows with L (Mamba's fused scan kernel has no
// counterpart on the pure-Go backend).
func MambaMixer(ctx *context.Context, x *Node, c MambaConfig, outScale float64, opts graphs.Options) *Node {
	g := x.Graph()
	dims := x.Shape().Dimensions
	b, l, d := dims[0], dims[1], dims[2]
	dI, n, k, r := c.Expand*d, c.StateSize, c.ConvKernel, c.DTRank
	xz := graphs.Linear(ctx.In("in_proj"), x, graphs.LinearConfig{Units: 2 * dI, NoBias: true}, opts)
	xs := Slice(xz, AxisRange(), AxisRange(), AxisRange(0, dI))
	z := Slice(xz, AxisRange(), AxisRange(), AxisRange(dI, 2*dI))

	// Depthwise causal conv: y_t = Σ_j w[j]·x_{t−(k−1)+j} + bias, zeros before the start.
	cw := graphs.AsDType(graphs.Param(ctx.In("conv1d"), g, opts, "weight", graphs.InitTorchDefault, k, k, k, dI), x)
	cb := graphs.AsDType(graphs.Param(ctx.In("conv1d"), g, opts, "bias", graphs.InitTorchDefault, k, k, dI), x)
	// GoMLX's Pad has no gradient: the causal zeros are concatenated instead.
	padded := graphs.ZeroPad(xs, 1, k-1, 0)
	conv := Reshape(cb, 1, 1, dI)
	for j := range k {
		tap := Slice(padded, AxisRange(), AxisRange(j, j+l), AxisRange())
		conv = Add(conv, Mul(tap, Reshape(Slice(cw, AxisElem(j)), 1, 1, dI)))
	}
	opts.Stats.Add(int64(l) * int64(dI) * int64(k))
	xs = graphs.Swish(conv)

	proj := graphs.Linear(ctx.In("x_proj"), xs, graphs.LinearConfig{Units: r + 2*n, NoBias: true}, opts)
	dt := Slice(proj, AxisRange(), AxisRange(), AxisRange(0, r))
	bm := Slice(proj, AxisRange(), AxisRange(), AxisRange(r, r+n))
	cm := Slice(proj, AxisRange(), AxisRange(), AxisRange(r+n, r+2*n))
	delta := Softplus(graphs.Linear(ctx.In("dt_proj"), dt, graphs.LinearConfig{Units: dI, Init: graphs.InitUniform(1 / math.Sqrt(float64(r))), BiasInit: mambaDTBias}, opts))

	aLog := graphs.AsDType(constParam(ctx, g, opts, "A_log", mambaALog(dI, n), dI, n), x)
	dSkip := graphs.AsDType(graphs.Param(ctx, g, opts, "D", graphs.InitConst(1), 0, 0, dI), x)
	a := InsertAxes(Neg(Exp(aLog)), 0) // [1, dI, n]
	h := Zeros(g, shapes.Make(x.DType(), b, dI, n))
	ys := make([]*Node, l)
	for t := range l {
		at := func(v *Node) *Node { return Squeeze(Slice(v, AxisRange(), AxisElem(t), AxisRange()), 1) }
		dt, xt := at(delta), at(xs) // [b, dI]
		bt, ct := InsertAxes(at(bm), 1), InsertAxes(at(cm), 1)
		h = Add(Mul(Exp(Mul(InsertAxes(dt, -1), a)), h), Mul(InsertAxes(Mul(dt, xt), -1), bt))
		ys[t] = ReduceSum(Mul(h, ct), -1) // [b, dI]
	}
	opts.Stats.Add(3 * int64(l) * int64(dI) * int64(n))
	y := Add(Stack(ys, 1), Mul(xs, Reshape(dSkip, 1, 1, dI)))
	y = Mul(y, graphs.Swish(z))
	outInit := func(rng *rand.Rand, fanIn, fanOut int) float64 {
		return outScale * graphs.InitTorchDefault(rng, fanIn, fanOut)
	}
	return graphs.Linear(ctx.In("out_proj"), y, graphs.LinearConfig{Units: d, NoBias: true, Init: outInit}, opts)
}

// MambaBlocks is the bestiary's mambaBlock (dim stateSize expand nBlocks): nBlocks residual blocks
// x + mixer(norm(x)) (Mamba's Block with RMSNorm, eps 1e-5; scopes layers/i/norm and
// layers/i/mixer) over tokens [batch, L, dim]. No final norm (MixerModel's norm_f is the net's).
func MambaBlocks(ctx *context.Context, x *Node, stateSize, expand, nBlocks int, opts graphs.Options) *Node {
	d := x.Shape().Dimensions[2]
	c := MambaConfig{StateSize: stateSize, Expand: expand, ConvKernel: 4, DTRank: MambaDTRank(d)}
	for i := range nBlocks {
		lc := ctx.In("layers").In(strconv.Itoa(i))
		x = Add(x, MambaMixer(lc.In("mixer"), RMSNorm(lc.In("norm"), x, 1e-5, opts), c, 1/math.Sqrt(float64(nBlocks)), opts))
	}
	return x
}

// mambaDTBias is dt_proj's bias: softplus⁻¹(dt) for dt log-uniform in [0.001, 0.1], floored at 1e-4.
func mambaDTBias(rng *rand.Rand, _, _ int) float64 {
	dt := math.Exp(rng.Float64()*(math.Log(0.1)-math.Log(0.001)) + math.Log(0.001))
	dt = max(dt, 1e-4)
	return dt + math.Log(-math.Expm1(-dt))
}

// mambaALog is S4D-real's initialisation: A_log[c, s] = log(s+1).
func mambaALog(dI, n int) []float64 {
	v := make([]float64, dI*n)
	for i := range v {
		v[i] = math.Log(float64(i%n + 1))
	}
	return v
}

// constParam creates (or reuses) the variable ctx.Scope()/name initialised to the given values.
func constParam(ctx *context.Context, g *Graph, opts graphs.Options, name string, values []float64, dims ...int) *Node {
	init := func(g *Graph, shape shapes.Shape) *Node {
		return ConvertDType(Const(g, tensors.FromFlatDataAndDimensions(values, dims...)), shape.DType)
	}
	return ctx.WithInitializer(init).VariableWithShape(name, shapes.Make(opts.ParamDType(), dims...)).ValueGraph(g)
}

// PairTile is the bestiary's pairTile (seqLen inDim outDim pairIn), AlphaFold 1's tiling of
// per-residue features into pair features: s [batch, seqLen, inDim] gives, at pair (i, j), the
// concatenation [s_i, s_j, pair_ij] (the row tile, the column tile, and pairIn channels of pair
// [batch, seqLen, seqLen, pairIn]; pair is nil when pairIn is 0), then a 1×1 projection "proj" (Linear
// with bias, PyTorch's default init) to outDim: [batch, seqLen, seqLen, outDim].
func PairTile(ctx *context.Context, s, pair *Node, outDim int, opts graphs.Options) *Node {
	dims := s.Shape().Dimensions
	b, l, c := dims[0], dims[1], dims[2]
	rows := BroadcastToDims(InsertAxes(s, 2), b, l, l, c) // [b, i, j, c] = s_i
	cols := BroadcastToDims(InsertAxes(s, 1), b, l, l, c) // [b, i, j, c] = s_j
	parts := []*Node{rows, cols}
	if pair != nil {
		parts = append(parts, pair)
	}
	return graphs.Linear(ctx.In("proj"), Concatenate(parts, -1), graphs.LinearConfig{Units: outDim}, opts)
}
