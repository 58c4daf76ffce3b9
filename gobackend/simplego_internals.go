package gobackend

import (
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// This file is the package's only bridge into simplego's internals (GoMLX v0.26.0). It touches:
//
//   - simplego's executor table, the unexported nodeExecutors array, through a go:linkname: the fast
//     executors replace entries (executors.go), the fused nodes take two empty slots, and op statistics
//     wrap every entry (opstats.go);
//   - the unexported fields of simplego.Node (inputs, opType, shape, data) and simplego.Builder (nodes),
//     read and written through offsets looked up once by reflection, their types checked (reflection
//     by name costs about a microsecond per call, and a ResNet step runs ~17,000 ops);
//   - two op types simplego never builds nor executes, reused as the backend's own fused nodes, and the
//     AllReduce and SelectAndScatterMax/Min op types, which simplego doesn't build, for the backend's
//     collective nodes (spmd.go) and max-pool gradient nodes (pool_grad.go);
//   - the unexported parameter structs simplego keeps in Node.data (DotGeneral's, Slice's, Gather's),
//     read by field name, and the plain values it keeps there for other ops (Transpose's permutation,
//     the reduced or broadcast axes, Concatenate's axis).
//
// Why no public API serves: simplego exports no way to register or replace an executor (its
// setNodeExecutor is unexported), nor to read a node's op type, shape, inputs or parameters, nor to
// rewrite a graph before it is compiled; backends.Builder only builds.
//
// When GoMLX changes: every accessor checks what it finds, so a moved field or a changed struct turns
// the fast paths off (simplego's own executors run: slow, still correct) instead of corrupting memory.
// TestSimplegoInternals fails then, naming the assumption that broke.

// sgNodeExecutor is the signature of simplego's executors.
type sgNodeExecutor = func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error)

//go:linkname sgNodeExecutors github.com/gomlx/gomlx/backends/simplego.nodeExecutors
var sgNodeExecutors [backends.OpTypeLast]sgNodeExecutor

// fusedOpType carries fused element-wise nodes (fuse.go): SelectAndScatterSum is neither built by
// simplego nor by this backend, and its executor slot is empty.
const fusedOpType = backends.OpTypeSelectAndScatterSum

// fusedConvOpType carries fused convolutions (conv_exec.go): simplego never builds Reverse (this
// backend composes it), and its executor slot is empty.
const fusedConvOpType = backends.OpTypeReverse

// allReduceOpType carries AllReduce nodes (spmd.go): simplego refuses to build AllReduce, and its
// executor slot is empty.
const allReduceOpType = backends.OpTypeAllReduce

// selectAndScatterMaxOpType and selectAndScatterMinOpType carry the backend's SelectAndScatter nodes
// (pool_grad.go): simplego doesn't build these ops (the backend composes them where the slots are taken),
// and their executor slots are empty.
const (
	selectAndScatterMaxOpType = backends.OpTypeSelectAndScatterMax
	selectAndScatterMinOpType = backends.OpTypeSelectAndScatterMin
)

// Offsets of simplego.Node's shape, data and opType fields; nodeFieldsOK is false if any is missing
// or of another type, and every fast executor that needs them defers to simplego's own.
var nodeShapeOff, nodeDataOff, nodeOpTypeOff, nodeFieldsOK = func() (shapeOff, dataOff, opOff uintptr, ok bool) {
	t := reflect.TypeOf(simplego.Node{})
	shapeF, ok1 := t.FieldByName("shape")
	dataF, ok2 := t.FieldByName("data")
	opF, ok3 := t.FieldByName("opType")
	ok = ok1 && ok2 && ok3 && shapeF.Type == reflect.TypeOf(shapes.Shape{}) &&
		dataF.Type == reflect.TypeOf((*any)(nil)).Elem() && opF.Type == reflect.TypeOf(backends.OpType(0))
	return shapeF.Offset, dataF.Offset, opF.Offset, ok
}()

// Offsets of simplego.Node's inputs and simplego.Builder's nodes, which graph rewrites (fusion, kernel
// flip folding) need besides the fields above; fuseFieldsOK covers all five.
var nodeInputsOff, builderNodesOff, fuseFieldsOK = func() (inOff, nodesOff uintptr, ok bool) {
	nodeSlice := reflect.TypeOf([]*simplego.Node(nil))
	in, ok1 := reflect.TypeOf(simplego.Node{}).FieldByName("inputs")
	nodes, ok2 := reflect.TypeOf(simplego.Builder{}).FieldByName("nodes")
	return in.Offset, nodes.Offset, nodeFieldsOK && ok1 && ok2 && in.Type == nodeSlice && nodes.Type == nodeSlice
}()

// nodeShape is the node's output shape (callers check nodeFieldsOK first).
func nodeShape(n *simplego.Node) shapes.Shape {
	return *(*shapes.Shape)(unsafe.Add(unsafe.Pointer(n), nodeShapeOff))
}

// nodeDataOf is the node's op-specific parameters (callers check nodeFieldsOK first).
func nodeDataOf(n *simplego.Node) any {
	return *(*any)(unsafe.Add(unsafe.Pointer(n), nodeDataOff))
}

// nodeOpType is the node's op type (callers check nodeFieldsOK first).
func nodeOpType(n *simplego.Node) backends.OpType {
	return *(*backends.OpType)(unsafe.Add(unsafe.Pointer(n), nodeOpTypeOff))
}

// nodeInputsOf is the node's inputs (callers check fuseFieldsOK first).
func nodeInputsOf(n *simplego.Node) []*simplego.Node {
	return *(*[]*simplego.Node)(unsafe.Add(unsafe.Pointer(n), nodeInputsOff))
}

// builderNodesOf is every node of the graph, in building order (callers check fuseFieldsOK first).
func builderNodesOf(b *simplego.Builder) []*simplego.Node {
	return *(*[]*simplego.Node)(unsafe.Add(unsafe.Pointer(b), builderNodesOff))
}

// setNodeOpData sets a node's op type and data (callers check nodeFieldsOK first).
func setNodeOpData(n *simplego.Node, op backends.OpType, data any) {
	*(*backends.OpType)(unsafe.Add(unsafe.Pointer(n), nodeOpTypeOff)) = op
	*(*any)(unsafe.Add(unsafe.Pointer(n), nodeDataOff)) = data
}

// setNodeInputs sets a node's inputs (callers check fuseFieldsOK first).
func setNodeInputs(n *simplego.Node, inputs []*simplego.Node) {
	*(*[]*simplego.Node)(unsafe.Add(unsafe.Pointer(n), nodeInputsOff)) = inputs
}

// nodeInts is the []int simplego keeps as the data of Transpose (the permutation), BroadcastInDim (the
// axes the operand maps to) and the reductions (the reduced axes); ok is false if it isn't one.
func nodeInts(n *simplego.Node) ([]int, bool) {
	if !nodeFieldsOK {
		return nil, false
	}
	ints, ok := nodeDataOf(n).([]int)
	return ints, ok
}

// concatenateAxis is the axis simplego keeps as a Concatenate node's data.
func concatenateAxis(n *simplego.Node) (int, bool) {
	if !nodeFieldsOK {
		return 0, false
	}
	axis, ok := nodeDataOf(n).(int)
	return axis, ok
}

// dotParams are the fields of simplego's dotGeneralNodeData the GEMM needs.
type dotParams struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
	batch, lhsCross, rhsCross, contracting             int
}

// readDotParams reads a DotGeneral node's parameters; ok is false if simplego's layout changed.
func readDotParams(node *simplego.Node) (p dotParams, ok bool) {
	v, ok := nodeData(node)
	if !ok {
		return p, false
	}
	ok = intsField(v, "lhsContractingAxes", &p.lhsContracting) && intsField(v, "lhsBatchAxes", &p.lhsBatch) &&
		intsField(v, "rhsContractingAxes", &p.rhsContracting) && intsField(v, "rhsBatchAxes", &p.rhsBatch) &&
		intField(v, "batchSize", &p.batch) && intField(v, "lhsCrossSize", &p.lhsCross) &&
		intField(v, "rhsCrossSize", &p.rhsCross) && intField(v, "contractingSize", &p.contracting)
	return p, ok
}

// sliceParams are the fields of simplego's sliceNode.
type sliceParams struct{ starts, limits, strides []int }

// readSliceParams reads a Slice node's parameters; ok is false if simplego's layout changed.
func readSliceParams(node *simplego.Node) (p sliceParams, ok bool) {
	v, ok := nodeData(node)
	ok = ok && intsField(v, "starts", &p.starts) && intsField(v, "limits", &p.limits) && intsField(v, "strides", &p.strides)
	return p, ok
}

// gatherParams are the fields of simplego's gatherNode.
type gatherParams struct {
	indexVectorAxis                                      int
	offsetOutputAxes, collapsedSlicesAxes, startIndexMap []int
	sliceSizes                                           []int
}

// readGatherParams reads a Gather node's parameters; ok is false if simplego's layout changed.
func readGatherParams(node *simplego.Node) (p gatherParams, ok bool) {
	v, ok := nodeData(node)
	ok = ok && intsField(v, "offsetOutputAxes", &p.offsetOutputAxes) && intsField(v, "collapsedSlicesAxes", &p.collapsedSlicesAxes) &&
		intsField(v, "startIndexMap", &p.startIndexMap) && intsField(v, "sliceSizes", &p.sliceSizes) &&
		intField(v, "indexVectorAxis", &p.indexVectorAxis)
	return p, ok
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

// intField reads the int field name of struct v.
func intField(v reflect.Value, name string, dst *int) bool {
	f := unexportedField(v, name)
	if !f.IsValid() || f.Kind() != reflect.Int {
		return false
	}
	*dst = int(f.Int())
	return true
}

// unexportedField returns struct field name of v, readable; the zero Value if there is none.
func unexportedField(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}
