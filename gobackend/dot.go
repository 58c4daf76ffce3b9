package gobackend

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// simplego executes each node with a function from its nodeExecutors table, which has no exported
// setter. The fast executors (the float32 and float64 DotGeneral kernels of gemm.go, the copies, the
// element-wise row loops) replace table entries through a linkname; each only acts for the simplego instances
// inside a Backend that asked for it (any other simplego backend in the process, and every dtype an
// executor doesn't handle, still runs simplego's own), and reads the node's parameters by field name,
// falling back to simplego's executor if GoMLX changes them. Two empty slots of the table receive the
// wrapper's own node types: fused convolutions (conv_exec.go) and fused element-wise chains
// (fuse.go). TestFastDotHookInstalled, TestFastElementwiseHooksInstalled,
// TestFusedConvHookInstalled and TestFusionHookInstalled fail if any of this can no longer be reached.

type sgNodeExecutor = func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error)

//go:linkname sgNodeExecutors github.com/gomlx/gomlx/backends/simplego.nodeExecutors
var sgNodeExecutors [backends.OpTypeLast]sgNodeExecutor

var (
	sgDotGeneral   sgNodeExecutor // simplego's own executors, saved before the table entries are replaced.
	sgSlice        sgNodeExecutor
	sgTranspose    sgNodeExecutor
	sgExecutors    [backends.OpTypeLast]sgNodeExecutor // Every replaced entry's original, by op type.
	fastOpsOwners  sync.Map                            // *simplego.Backend -> struct{}: the backends whose executors are ours.
	installFastOps sync.Once
)

// fastExecutors lists the executors the fast ops put in simplego's table (each falls back to the
// saved original for other backends and dtypes).
func fastExecutors() map[backends.OpType]sgNodeExecutor {
	m := map[backends.OpType]sgNodeExecutor{
		backends.OpTypeDotGeneral: execFastDotGeneral,
		backends.OpTypeSlice:      execFastSlice,
		backends.OpTypeTranspose:  execFastTranspose,
		backends.OpTypeGather:     execFastGather,
	}
	addElementwiseExecutors(m)
	return m
}

// enableFastOps routes sg's float32 and float64 DotGenerals to the packed GEMM, its Slices, Transposes
// and row Gathers to run and tile copies, and its hot element-wise ops to the row loops of
// elementwise.go; it installs the fused nodes' executors once.
func enableFastOps(sg *simplego.Backend) {
	installFastOps.Do(func() {
		for op, exec := range fastExecutors() {
			if orig := sgNodeExecutors[op]; orig != nil {
				sgExecutors[op] = orig
				sgNodeExecutors[op] = exec
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
		sgDotGeneral = sgExecutors[backends.OpTypeDotGeneral]
		sgSlice = sgExecutors[backends.OpTypeSlice]
		sgTranspose = sgExecutors[backends.OpTypeTranspose]
	})
	fastOpsOwners.Store(sg, struct{}{})
}

// disableFastOps forgets sg (called when its Backend is finalized).
func disableFastOps(sg *simplego.Backend) { fastOpsOwners.Delete(sg) }

func ownsFastOps(sg *simplego.Backend) bool {
	_, ok := fastOpsOwners.Load(sg)
	return ok
}

// dotParams are the fields of simplego's dotGeneralNodeData the GEMM needs.
type dotParams struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
	batch, lhsCross, rhsCross, contracting             int
}

// nodeData returns the struct node.data points to; ok is false if simplego's layout changed.
func nodeData(node *simplego.Node) (v reflect.Value, ok bool) {
	data := unexportedField(reflect.ValueOf(node).Elem(), "data")
	if !data.IsValid() || data.Kind() != reflect.Interface || data.IsNil() {
		return v, false
	}
	v = data.Elem()
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return v, false
	}
	return v.Elem(), true
}

// intsField reads the []int field name of struct v.
func intsField(v reflect.Value, name string, dst *[]int) bool {
	f := unexportedField(v, name)
	if !f.IsValid() || f.Type() != reflect.TypeOf([]int(nil)) {
		return false
	}
	*dst = f.Interface().([]int)
	return true
}

// readDotParams reads the node's DotGeneral parameters; ok is false if simplego's layout changed.
func readDotParams(node *simplego.Node) (p dotParams, ok bool) {
	v, ok := nodeData(node)
	if !ok {
		return p, false
	}
	ints := func(name string, dst *[]int) bool { return intsField(v, name, dst) }
	size := func(name string, dst *int) bool {
		f := unexportedField(v, name)
		if !f.IsValid() || f.Kind() != reflect.Int {
			return false
		}
		*dst = int(f.Int())
		return true
	}
	ok = ints("lhsContractingAxes", &p.lhsContracting) && ints("lhsBatchAxes", &p.lhsBatch) &&
		ints("rhsContractingAxes", &p.rhsContracting) && ints("rhsBatchAxes", &p.rhsBatch) &&
		size("batchSize", &p.batch) && size("lhsCrossSize", &p.lhsCross) &&
		size("rhsCrossSize", &p.rhsCross) && size("contractingSize", &p.contracting)
	return p, ok
}

// unexportedField returns struct field name of v, readable; the zero Value if there is none.
func unexportedField(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// execFastDotGeneral replaces simplego's DotGeneral executor: float32 and float64 products of the
// backends that enabled it go to the packed GEMM; everything else to simplego's kernel. The output is
// simplego's normalised [batch, lhsCross, rhsCross] (the builder reshapes it).
func execFastDotGeneral(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	if !ownsFastOps(backend) || len(inputs) != 2 {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	lhsShape, err1 := backend.BufferShape(inputs[0])
	rhsShape, err2 := backend.BufferShape(inputs[1])
	dt := lhsShape.DType
	if err1 != nil || err2 != nil || (dt != dtypes.Float32 && dt != dtypes.Float64) || rhsShape.DType != dt {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	p, ok := readDotParams(node)
	if !ok {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	lhsFlat, err1 := backend.BufferData(inputs[0])
	rhsFlat, err2 := backend.BufferData(inputs[1])
	if err1 != nil || err2 != nil {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	var output *simplego.Buffer
	var err error
	if dt == dtypes.Float64 {
		output, ok, err = fastDot(backend, p, lhsFlat.([]float64), rhsFlat.([]float64), lhsShape.Dimensions, rhsShape.Dimensions, dt)
	} else {
		output, ok, err = fastDot(backend, p, lhsFlat.([]float32), rhsFlat.([]float32), lhsShape.Dimensions, rhsShape.Dimensions, dt)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// fastDot runs the DotGeneral as a packed GEMM; ok is false if the offset tables disagree with
// simplego's sizes.
func fastDot[T gemmFloat](backend *simplego.Backend, p dotParams, lhsFlat, rhsFlat []T, lhsDims, rhsDims []int, dt dtypes.DType) (*simplego.Buffer, bool, error) {
	lhs := newGemmOperand(lhsFlat, lhsDims, p.lhsContracting, p.lhsBatch)
	rhs := newGemmOperand(rhsFlat, rhsDims, p.rhsContracting, p.rhsBatch)
	if len(lhs.crossOff) != p.lhsCross || len(rhs.crossOff) != p.rhsCross || len(lhs.kOff) != p.contracting ||
		len(rhs.kOff) != p.contracting || len(lhs.batchOff) != p.batch || len(rhs.batchOff) != p.batch {
		return nil, false, nil
	}
	prob := &gemmProblemOf[T]{lhs: lhs, rhs: rhs, batch: p.batch, m: p.lhsCross, n: p.rhsCross, k: p.contracting}
	output := backend.NewBuffer(shapes.Make(dt, p.batch, p.lhsCross, p.rhsCross))
	outFlat, err := backend.BufferData(output)
	if err != nil {
		return nil, false, err
	}
	prob.run(outFlat.([]T))
	return output, true, nil
}
