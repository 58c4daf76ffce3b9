package trainstep

import (
	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
)

// Data parallelism (docs/distributed.md). With replicas R > 1 the step is one program over R devices
// of a 1-D mesh (backend.DataParallel), compiled once, made in one of two ways (data_parallel.mode):
//
//   - spmd (the default, every backend): GoMLX's SPMD strategy. The program is one device's step on its
//     shard of n = data.batch_size/R examples, and it all-reduces itself (crossReplicaMean): each
//     gradient (one all-reduce per tensor), the loss and the correct count, summed over the replicas
//     and divided by R where a mean is meant; BatchNorm all-reduces its batch moments under
//     data_parallel.sync_bn (graphs.Options.SyncBN). Everything after (the guard's flags, clipping,
//     accumulation, the optimizer, EMA) then sees the global batch's values, identical on every
//     replica, so the variables stay replicated bit for bit.
//   - auto (XLA backends): GoMLX's AutoSharding strategy. The program is written for the global batch,
//     whose batch axis is sharded over the mesh while every variable is replicated, and XLA's
//     partitioner adds the collectives.
//
// Either way replica r's loader yields rows [r·n, (r+1)·n) of each global batch and the host feeds
// shard r to device r (Step.Execute); data.batch_size, the learning-rate scaling and the losses keep
// their single-device meaning.

// distribute makes a freshly built step exec (not yet run) a data-parallel one over replicas devices
// in mode; with one replica it changes nothing.
func distribute(exec *context.Exec, replicas int, mode string) error {
	if replicas <= 1 {
		return nil
	}
	dp, err := backend.NewDataParallel(replicas)
	if err != nil {
		return err
	}
	if mode == config.DataParallelSPMD {
		exec.SPMD(dp.Mesh) // the variables default to replicated
		return nil
	}
	// Outputs (updated variables, metrics) replicated too: left free, the partitioner could return a
	// variable sharded, and the next step would gather it again.
	const batched = 2 // images and labels
	exec.AutoSharding(dp.Mesh).WithInputShardingSpecs(dp.InputSpecs(batched)...).WithOutputShardingSpecs(dp.Replicated)
	return exec.SetDefaultShardingSpec(dp.Replicated)
}

// crossReplicaMean turns one replica's shard loss, correct count and gradients into the global
// batch's: the mean loss and gradients over the replicas (each replica's are means over its equal
// shard, so their mean is the mean over the global batch) and the summed count. Every replica gets the
// same bits (the all-reduce sums in a fixed order), and a value non-finite on any replica is non-finite
// on all, so the guard's flags agree.
func crossReplicaMean(loss, correct *Node, grads []*Node, replicas int) (*Node, *Node, []*Node) {
	g := loss.Graph()
	mean := func(x *Node) *Node {
		return DivScalar(g.Distributed().AllReduceOne(x, backends.ReduceOpSum), float64(replicas))
	}
	out := make([]*Node, len(grads))
	for i, grad := range grads {
		out[i] = mean(grad)
	}
	return mean(loss), g.Distributed().AllReduceOne(correct, backends.ReduceOpSum), out
}
