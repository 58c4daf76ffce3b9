package graphs

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Dropout zeroes each element with probability rate in training and scales the survivors by
// 1/(1−rate) (inverted dropout, nn.Dropout); it is the identity in eval or at rate 0. The mask comes
// from the context's RNG, whose state is a variable saved in checkpoints.
func Dropout(ctx *context.Context, x *Node, rate float64, train bool) *Node {
	if !train || rate <= 0 {
		return x
	}
	keep := KeepMask(ctx, x.Graph(), x.Shape().Dimensions, rate, x.DType())
	return Mul(x, keep)
}

// DropPath (stochastic depth) zeroes a residual branch for a whole example with probability rate in
// training and scales kept examples by 1/(1−rate), as timm's drop_path and torchvision's
// StochasticDepth(mode="row"); identity in eval or at rate 0. x is the branch, [batch, ...].
func DropPath(ctx *context.Context, x *Node, rate float64, train bool) *Node {
	if !train || rate <= 0 {
		return x
	}
	dims := make([]int, x.Rank())
	for i := range dims {
		dims[i] = 1
	}
	dims[0] = x.Shape().Dimensions[0]
	return Mul(x, KeepMask(ctx, x.Graph(), dims, rate, x.DType()))
}

// KeepMask draws a {0, 1/(1−rate)} mask of the given dims: each cell is kept with probability 1−rate.
func KeepMask(ctx *context.Context, g *Graph, dims []int, rate float64, dtype dtypes.DType) *Node {
	u := ctx.RandomUniform(g, shapes.Make(dtypes.Float32, dims...))
	kept := GreaterOrEqual(u, Scalar(g, dtypes.Float32, rate))
	scale := Scalar(g, dtype, 1/(1-rate))
	return Where(kept, BroadcastToDims(scale, dims...), ZerosLike(BroadcastToDims(scale, dims...)))
}
