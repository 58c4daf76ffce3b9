package graphs

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// uniformInit returns an initializer drawing U(-bound, bound) on the host from a generator seeded by
// (seed, scope/name): the same seed gives the same weights on every backend and in any build order.
func uniformInit(seed uint64, scope, name string, bound float64) context.VariableInitializer {
	return func(g *Graph, shape shapes.Shape) *Node {
		h := fnv.New64a()
		_, _ = h.Write([]byte(scope + "/" + name))
		rng := rand.New(rand.NewPCG(seed, h.Sum64()))
		values := make([]float32, shape.Size())
		for i := range values {
			values[i] = float32((2*rng.Float64() - 1) * bound)
		}
		return ConvertDType(Const(g, tensors.FromFlatDataAndDimensions(values, shape.Dimensions...)), shape.DType)
	}
}

// torchDefaultVariable creates a weight or bias with PyTorch's default Linear/Conv initialisation,
// U(-1/sqrt(fanIn), 1/sqrt(fanIn)), which is what the seed's small nets were trained with.
func torchDefaultVariable(ctx *context.Context, g *Graph, opts Options, name string, fanIn int, dims ...int) *Node {
	bound := 1 / math.Sqrt(float64(fanIn))
	init := uniformInit(opts.Seed, ctx.Scope(), name, bound)
	v := ctx.WithInitializer(init).VariableWithShape(name, shapes.Make(dtypes.Float32, dims...))
	return v.ValueGraph(g)
}

// Dense is a fully connected layer x[batch, in] -> [batch, units] with bias, in scope "dense".
func Dense(ctx *context.Context, x *Node, units int, opts Options) *Node {
	ctx = ctx.In("dense")
	in := x.Shape().Dimensions[x.Rank()-1]
	w := torchDefaultVariable(ctx, x.Graph(), opts, "weights", in, in, units)
	b := torchDefaultVariable(ctx, x.Graph(), opts, "biases", in, units)
	opts.Stats.add(int64(in) * int64(units))
	return Add(Dot(x, w), InsertAxes(b, 0))
}

// Conv2D is a 2-D convolution over NHWC images with a square kernel [k, k, in, filters] and bias,
// symmetric zero padding pad on each side, in scope "conv".
func Conv2D(ctx *context.Context, x *Node, filters, kernel, stride, pad int, opts Options) *Node {
	ctx = ctx.In("conv")
	in := x.Shape().Dimensions[3]
	fanIn := kernel * kernel * in
	w := torchDefaultVariable(ctx, x.Graph(), opts, "weights", fanIn, kernel, kernel, in, filters)
	b := torchDefaultVariable(ctx, x.Graph(), opts, "biases", fanIn, filters)
	// Strides and dilations are always explicit: GoMLX v0.26 misreads nil ones on some paths.
	y := Convolve(x, w).StridePerAxis(stride, stride).DilationPerAxis(1, 1).
		PaddingPerDim([][2]int{{pad, pad}, {pad, pad}}).Done()
	dims := y.Shape().Dimensions
	opts.Stats.add(int64(dims[1]) * int64(dims[2]) * int64(filters) * int64(fanIn))
	return Add(y, Reshape(b, 1, 1, 1, filters))
}

// MaxPool2D takes the maximum over non-overlapping size x size windows of NHWC images.
func MaxPool2D(x *Node, size int) *Node {
	return MaxPool(x).Window(size).Strides(size).NoPadding().Done()
}

// ReLU is max(x, 0), written as a select so that its gradient at exactly 0 is 0, as in PyTorch and
// XLA (GoMLX's Max would pass the gradient through at the tie).
func ReLU(x *Node) *Node {
	zeros := ZerosLike(x)
	return Where(GreaterThan(x, zeros), x, zeros)
}

// Flatten reshapes [batch, ...] to [batch, rest].
func Flatten(x *Node) *Node {
	return Reshape(x, x.Shape().Dimensions[0], -1)
}

// scaled applies a width multiplier, never going below one unit.
func scaled(units int, width float64) int {
	if width == 0 {
		width = 1
	}
	return max(1, int(math.Round(float64(units)*width)))
}

// classes resolves the number of classes of a build.
func classes(opts Options, def int) int {
	if opts.NumClasses > 0 {
		return opts.NumClasses
	}
	return def
}
