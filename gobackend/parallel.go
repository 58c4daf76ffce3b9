package gobackend

import (
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/pkg/errors"
)

// Parallel op execution (ops_parallel) without deadlocks.
//
// simplego's parallel executor runs every ready node as a task of the backend's workers pool, which
// admits 2×parallelism tasks at a time; the executor's own loop waits for a free slot before it starts
// the next node. Two of simplego's executors split their work into more tasks of that same pool from
// inside the node's task and wait for them: DotGeneral (both its small- and large-problem paths) and
// Erf (WaitToStart, then a WaitGroup). When as many of those nodes run at once as the pool has slots,
// each holds a slot while it waits for a slot for its parts: no task can start and none ends.
//
// The backend's own kernels never use simplego's pool (they split over goroutines of their own and
// only wait for those), so nodes they run always end. What remains are simplego's two splitting
// executors, reached for the dtypes and configurations the fast kernels don't take (simplego_dot,
// integer products, any backend that isn't ours): under ops_parallel they receive a second simplego
// instance, the parts backend, whose pool only ever holds their parts. Parts never wait for the pool,
// so a node waiting for its parts always sees them end, and the op workers' pool only holds nodes that
// end. Buffers don't belong to a backend instance (simplego's buffer pools only recycle memory), so the
// outputs the parts backend allocates are ordinary buffers of the main one.
//
// Each op computes the same values whatever else runs beside it (every kernel's split depends on the
// sizes and GOMAXPROCS, never on what is free), so parallel and sequential op execution give the same
// bits (TestParallelOpsNoDeadlock here, and trainstep's TestParallelOpsBitIdentical over whole training steps).
//
// devices=R keeps sequential op execution per device: an AllReduce node waits for the other devices
// inside its task, so under ops_parallel R devices' collectives could hold every slot of the shared pool
// while a device still needs one to reach its own collective.

// poolSplittingOps are the op types whose simplego executors start tasks on simplego's workers pool
// from inside the node and wait for them.
var poolSplittingOps = []backends.OpType{backends.OpTypeDotGeneral, backends.OpTypeErf}

// partsBackends maps a backend in ops_parallel mode to the simplego instance whose workers pool runs
// the parts of its pool-splitting ops.
var partsBackends sync.Map // *simplego.Backend -> *simplego.Backend

// partsOutsideOpWorkers wraps one of simplego's pool-splitting executors: under ops_parallel it runs
// with the backend's parts backend, so its parts don't compete with the nodes for the op workers.
func partsOutsideOpWorkers(exec sgNodeExecutor) sgNodeExecutor {
	return func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
		if parts, ok := partsBackends.Load(backend); ok {
			backend = parts.(*simplego.Backend)
		}
		return exec(backend, node, inputs, inputsOwned)
	}
}

// parallelOps reports whether a normalized simplego config executes ops in parallel.
func parallelOps(config string) bool {
	for _, p := range strings.Split(config, ",") {
		if p == "ops_parallel" {
			return true
		}
	}
	return false
}

// startParallelOps gives sg, a backend in ops_parallel mode created from config, its parts backend (a
// simplego instance with the same options) and puts the wrapped executors in simplego's table.
func startParallelOps(sg *simplego.Backend, config string) error {
	partsConfig := strings.ReplaceAll(config, "ops_parallel", "ops_sequential")
	inner, err := simplego.New(partsConfig)
	if err != nil {
		return err
	}
	parts, ok := inner.(*simplego.Backend)
	if !ok {
		return errors.Errorf("simplego.New returned %T, expected *simplego.Backend", inner)
	}
	installExecutors()
	partsBackends.Store(sg, parts)
	return nil
}

// stopParallelOps finalizes sg's parts backend, if it has one.
func stopParallelOps(sg *simplego.Backend) {
	if parts, ok := partsBackends.LoadAndDelete(sg); ok {
		parts.(*simplego.Backend).Finalize()
	}
}
