package gobackend

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// simplego executes each node with a function from its executor table (simplego_internals.go). The
// fast executors (the float32 and float64 DotGeneral kernels of kernels/gemm.go, the copies, the element-wise
// row loops) replace table entries; each only acts for the simplego instances inside a Backend that
// asked for it (any other simplego backend in the process, and every dtype an executor doesn't handle,
// still runs simplego's own), and falls back to simplego's executor if it can't read the node's
// parameters. Two empty slots of the table receive the backend's own node types: fused convolutions
// (conv_exec.go) and fused element-wise chains (fuse.go).

var (
	sgDotGeneral   sgNodeExecutor // simplego's own executors, saved before the table entries are replaced.
	sgSlice        sgNodeExecutor
	sgTranspose    sgNodeExecutor
	sgExecutors    [backends.OpTypeLast]sgNodeExecutor // Every replaced entry's original, by op type.
	fastOpsMu      sync.Mutex                          // Serialises changes to fastOpsOwners.
	fastOpsOwners  atomic.Pointer[[]*simplego.Backend] // The backends whose executors are ours, replaced whole on change.
	installFastOps sync.Once

	fusionInstalled    bool // execFused is in simplego's table (set once by enableFastOps).
	fusedConvInstalled bool // execFusedConv is in simplego's table (set once by enableFastOps).
	poolGradInstalled  bool // execSelectAndScatter is in simplego's table (set once by enableFastOps).
	poolInstalled      bool // execReduceWindow is in simplego's table, simplego's own saved (set once by enableFastOps).
)

// fastExecutors lists the executors the fast ops put in simplego's table (each falls back to the
// saved original for other backends and dtypes).
func fastExecutors() map[backends.OpType]sgNodeExecutor {
	m := map[backends.OpType]sgNodeExecutor{
		backends.OpTypeDotGeneral: execFastDotGeneral,
		backends.OpTypeSlice:      execFastSlice,
		backends.OpTypeTranspose:  execFastTranspose,
		backends.OpTypeGather:     execFastGather,
		// A flattened graph input read only by products is viewed, not copied (reshape.go).
		backends.OpTypeReshape: execFastReshape,
		// DenseNet's feature concatenations (and the composed Pad), output row by output row (concat.go).
		backends.OpTypeConcatenate: execFastConcatenate,
		// Runs only the nodes goBuilder.ReduceWindow gave a *poolSpec (pool.go), whatever the backend.
		backends.OpTypeReduceWindow: execReduceWindow,
	}
	addElementwiseExecutors(m)
	return m
}

// enableFastOps routes sg's float32 and float64 DotGenerals to the packed GEMM, its Slices, Transposes
// and row Gathers to run and tile copies, and its hot element-wise ops to the row loops of
// elementwise.go; it installs the fused nodes' executors once.
func enableFastOps(sg *simplego.Backend) {
	installExecutors()
	fastOpsMu.Lock()
	defer fastOpsMu.Unlock()
	var owners []*simplego.Backend
	if p := fastOpsOwners.Load(); p != nil {
		owners = slices.Clone(*p)
	}
	owners = append(owners, sg)
	fastOpsOwners.Store(&owners)
}

// installExecutors puts the fast executors in simplego's table, once. Every backend of this package
// goes through them (the others fall back to the saved originals), and the originals that split their
// work over simplego's workers pool are wrapped to run their parts outside the op workers (parallel.go).
func installExecutors() {
	installFastOps.Do(func() {
		for op, exec := range fastExecutors() {
			if orig := sgNodeExecutors[op]; orig != nil {
				sgExecutors[op] = orig
				sgNodeExecutors[op] = exec
			}
		}
		for _, op := range poolSplittingOps {
			if orig := sgExecutors[op]; orig != nil {
				sgExecutors[op] = partsOutsideOpWorkers(orig)
			} else if orig := sgNodeExecutors[op]; orig != nil {
				sgNodeExecutors[op] = partsOutsideOpWorkers(orig)
			}
		}
		if fuseFieldsOK && sgNodeExecutors[fusedOpType] == nil {
			sgNodeExecutors[fusedOpType] = execFused
			fusionInstalled = true
		}
		if nodeFieldsOK && sgNodeExecutors[fusedConvOpType] == nil {
			sgNodeExecutors[fusedConvOpType] = execFusedConv
			fusedConvInstalled = true
		}
		if fuseFieldsOK && sgNodeExecutors[selectAndScatterMaxOpType] == nil && sgNodeExecutors[selectAndScatterMinOpType] == nil {
			sgNodeExecutors[selectAndScatterMaxOpType] = execSelectAndScatter
			sgNodeExecutors[selectAndScatterMinOpType] = execSelectAndScatter
			poolGradInstalled = true
		}
		poolInstalled = nodeFieldsOK && sgExecutors[backends.OpTypeReduceWindow] != nil
		sgDotGeneral = sgExecutors[backends.OpTypeDotGeneral]
		sgSlice = sgExecutors[backends.OpTypeSlice]
		sgTranspose = sgExecutors[backends.OpTypeTranspose]
	})
}

// disableFastOps forgets sg (called when its Backend is finalized).
func disableFastOps(sg *simplego.Backend) {
	fastOpsMu.Lock()
	defer fastOpsMu.Unlock()
	if p := fastOpsOwners.Load(); p != nil {
		owners := slices.DeleteFunc(slices.Clone(*p), func(b *simplego.Backend) bool { return b == sg })
		fastOpsOwners.Store(&owners)
	}
}

// ownsFastOps reports whether sg belongs to a Backend of this package. Every fast executor asks on
// every call, so it reads a list (a process has a few backends: one per in-process device) instead
// of hashing sg into a map.
func ownsFastOps(sg *simplego.Backend) bool {
	if p := fastOpsOwners.Load(); p != nil {
		for _, b := range *p {
			if b == sg {
				return true
			}
		}
	}
	return false
}

// newOutput returns a fresh simplego buffer of shape for an executor's result, with its flat data.
func newOutput(backend *simplego.Backend, shape shapes.Shape) (*simplego.Buffer, any, error) {
	output := backend.NewBuffer(shape)
	data, err := backend.BufferData(output)
	return output, data, err
}
