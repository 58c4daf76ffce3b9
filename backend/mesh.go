package backend

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/pkg/errors"
)

// ReplicaAxis is the name of the device mesh axis a data-parallel step shards its batch over.
const ReplicaAxis = "replica"

// DataParallel is the layout of a data-parallel step over Replicas devices: a 1-D mesh, the batch
// axis of the inputs sharded over it and everything else (parameters, optimizer slots, BatchNorm
// statistics, EMA shadows, runtime scalars) replicated. The explicit SPMD step (data_parallel.mode
// spmd) runs over the mesh and all-reduces itself; for GoMLX's AutoSharding strategy (mode auto, XLA
// Shardy) the program is written for the global batch and XLA partitions it with these specs,
// inserting the gradient all-reduce and BatchNorm's cross-replica sums itself.
type DataParallel struct {
	Replicas int
	Mesh     *distributed.DeviceMesh
	// Batch shards axis 0 over the mesh (images, labels, soft targets).
	Batch *distributed.ShardingSpec
	// Replicated is the spec of every other input and of all variables.
	Replicated *distributed.ShardingSpec
}

// NewDataParallel builds the mesh and sharding specs for replicas devices (no device is needed).
func NewDataParallel(replicas int) (*DataParallel, error) {
	if replicas < 1 {
		return nil, errors.Errorf("data parallel: %d replicas, want >= 1", replicas)
	}
	mesh, err := distributed.NewDeviceMesh([]int{replicas}, []string{ReplicaAxis})
	if err != nil {
		return nil, errors.WithMessage(err, "data parallel: device mesh")
	}
	batch, err := distributed.NewShardingSpec(mesh, distributed.AxisSpec{ReplicaAxis})
	if err != nil {
		return nil, errors.WithMessage(err, "data parallel: batch sharding")
	}
	return &DataParallel{Replicas: replicas, Mesh: mesh, Batch: batch,
		Replicated: distributed.NewReplicatedShardingSpec(mesh)}, nil
}

// InputSpecs returns the specs of a step's inputs when the first batched of them carry the batch
// axis and the rest are replicated; GoMLX repeats the last spec for any further input, so the list
// ends with Replicated.
func (dp *DataParallel) InputSpecs(batched int) []*distributed.ShardingSpec {
	specs := make([]*distributed.ShardingSpec, 0, batched+1)
	for range batched {
		specs = append(specs, dp.Batch)
	}
	return append(specs, dp.Replicated)
}

// String describes the layout, e.g. for `trainer devices`.
func (dp *DataParallel) String() string {
	return fmt.Sprintf("%d replicas: mesh %s, batch %s, parameters %s", dp.Replicas, dp.Mesh, dp.Batch, dp.Replicated)
}

// CheckDevices refuses a data-parallel run that asks for more replicas than the backend has devices.
func CheckDevices(b backends.Backend, replicas int) error {
	if replicas <= 1 {
		return nil
	}
	if n := b.NumDevices(); n < replicas {
		hint := "use a PJRT backend with that many devices (e.g. --backend xla:cuda on a machine with " +
			fmt.Sprint(replicas) + " GPUs), or lower replicas"
		if b.String() == "go" {
			hint = fmt.Sprintf("the pure-Go backend has the devices its config asks for: use --backend go:devices=%d "+
				"(in-process devices sharing the cores), or lower replicas", replicas)
		}
		return errors.Errorf("replicas %d: backend %s has %d device(s); %s", replicas, b.String(), n, hint)
	}
	return nil
}
