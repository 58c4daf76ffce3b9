package trainstep

import (
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/pjrt"
)

// Data parallelism (docs/distributed.md). With replicas R > 1 the train step is compiled once with
// GoMLX's AutoSharding strategy over a 1-D mesh of R devices (pjrt.DataParallel): it is written for the
// global batch data.batch_size, whose batch axis is sharded over the mesh while every variable is
// replicated, and XLA's partitioner adds the collectives (gradient all-reduce, and the cross-replica
// sums that make BatchNorm's batch statistics those of the global batch). Replica r's loader yields
// rows [r·n, (r+1)·n) of each global batch, n = data.batch_size/R, and the host feeds shard r to
// device r (Step.Execute). So data.batch_size, the learning-rate scaling (optimizer.lr_base_batch) and
// the losses keep their single-device meaning: the run is one device's run at that batch.

// distribute makes a freshly built step exec (not yet run) a data-parallel one over replicas
// devices: images and labels sharded over the mesh, the scalars and every variable replicated. With
// one replica it changes nothing.
func distribute(exec *context.Exec, replicas int) error {
	if replicas <= 1 {
		return nil
	}
	dp, err := pjrt.NewDataParallel(replicas)
	if err != nil {
		return err
	}
	// Outputs (updated variables, metrics) replicated too: left free, the partitioner could return a
	// variable sharded, and the next step would gather it again.
	const batched = 2 // images and labels
	exec.AutoSharding(dp.Mesh).WithInputShardingSpecs(dp.InputSpecs(batched)...).WithOutputShardingSpecs(dp.Replicated)
	return exec.SetDefaultShardingSpec(dp.Replicated)
}
