package graphs

import (
	"slices"

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
// dims[0] is the batch axis (replicaUniform).
func KeepMask(ctx *context.Context, g *Graph, dims []int, rate float64, dtype dtypes.DType) *Node {
	u := replicaUniform(ctx, g, dims)
	kept := GreaterOrEqual(u, Scalar(g, dtypes.Float32, rate))
	scale := Scalar(g, dtype, 1/(1-rate))
	return Where(kept, BroadcastToDims(scale, dims...), ZerosLike(BroadcastToDims(scale, dims...)))
}

// ReplicaIndexParam is the graph parameter (context.Context.SetGraphParam) under which a data-parallel
// SPMD step gives the layers its replica's index, an int32 scalar node that differs by device.
const ReplicaIndexParam = "graphs_replica_index"

// replicaUniform draws U[0, 1) values of dims, whose first axis is the batch. In a data-parallel SPMD
// program of R replicas that names its replica index (ReplicaIndexParam), every replica draws the
// global batch's R·dims[0] rows, from the same replicated RNG state, and keeps its own shard's rows
// [r·n, (r+1)·n): the masks are those one device draws for the global batch, rather than the same
// mask on every shard, and the RNG state stays the same on every replica.
func replicaUniform(ctx *context.Context, g *Graph, dims []int) *Node {
	replicas := spmdReplicas(g)
	index := context.GetGraphParamOr[*Node](ctx, g, ReplicaIndexParam, nil)
	if replicas <= 1 || index == nil {
		return ctx.RandomUniform(g, shapes.Make(dtypes.Float32, dims...))
	}
	global := slices.Clone(dims)
	global[0] *= replicas
	u := ctx.RandomUniform(g, shapes.Make(dtypes.Float32, global...))
	n := dims[0]
	rows := Add(Iota(g, shapes.Make(dtypes.Int32, n, 1), 0), MulScalar(ConvertDType(index, dtypes.Int32), float64(n)))
	return Gather(u, rows)
}
