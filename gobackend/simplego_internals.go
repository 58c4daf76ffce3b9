package gobackend

import (
	"reflect"
	"slices"
	"sync/atomic"
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
//   - the unexported fields of simplego.Buffer (shape, valid, flat), written once to make a buffer that
//     views a graph input's values under another shape (reshape.go);
//   - two op types simplego never builds nor executes, reused as the backend's own fused nodes, and the
//     AllReduce and SelectAndScatterMax/Min op types, which simplego doesn't build, for the backend's
//     collective nodes (spmd.go) and max-pool gradient nodes (pool_grad.go);
//   - the unexported parameter structs simplego keeps in Node.data (DotGeneral's, Slice's, Gather's,
//     ArgMinMax's),
//     read at offsets looked up by field name once per struct type (structFields), and the plain values it keeps there for other ops (Transpose's permutation,
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

// Offsets of simplego.Buffer's shape, valid and flat fields, for the buffers that view another's values
// (reshape.go); bufferFieldsOK is false if any is missing or of another type, and no view is made.
var bufShapeOff, bufValidOff, bufFlatOff, bufferFieldsOK = func() (shapeOff, validOff, flatOff uintptr, ok bool) {
	t := reflect.TypeOf(simplego.Buffer{})
	shapeF, ok1 := t.FieldByName("shape")
	validF, ok2 := t.FieldByName("valid")
	flatF, ok3 := t.FieldByName("flat")
	ok = ok1 && ok2 && ok3 && shapeF.Type == reflect.TypeOf(shapes.Shape{}) && validF.Type == reflect.TypeOf(false) &&
		flatF.Type == reflect.TypeOf((*any)(nil)).Elem()
	return shapeF.Offset, validF.Offset, flatF.Offset, ok
}()

// newBufferOver returns a valid simplego buffer of the given shape over flat, which it does not own
// (callers check bufferFieldsOK first, and keep it out of simplego's buffer pools).
func newBufferOver(shape shapes.Shape, flat any) *simplego.Buffer {
	b := new(simplego.Buffer)
	*(*shapes.Shape)(unsafe.Add(unsafe.Pointer(b), bufShapeOff)) = shape
	*(*bool)(unsafe.Add(unsafe.Pointer(b), bufValidOff)) = true
	*(*any)(unsafe.Add(unsafe.Pointer(b), bufFlatOff)) = flat
	return b
}

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
	base, offs, ok := dotFields.find(node)
	if !ok {
		return p, false
	}
	p.lhsContracting, p.lhsBatch = fieldInts(base, offs[0]), fieldInts(base, offs[1])
	p.rhsContracting, p.rhsBatch = fieldInts(base, offs[2]), fieldInts(base, offs[3])
	p.batch, p.lhsCross = fieldInt(base, offs[4]), fieldInt(base, offs[5])
	p.rhsCross, p.contracting = fieldInt(base, offs[6]), fieldInt(base, offs[7])
	return p, true
}

var dotFields = newStructFields(
	[]string{"lhsContractingAxes", "lhsBatchAxes", "rhsContractingAxes", "rhsBatchAxes"},
	[]string{"batchSize", "lhsCrossSize", "rhsCrossSize", "contractingSize"})

// sliceParams are the fields of simplego's sliceNode.
type sliceParams struct{ starts, limits, strides []int }

// readSliceParams reads a Slice node's parameters; ok is false if simplego's layout changed.
func readSliceParams(node *simplego.Node) (p sliceParams, ok bool) {
	base, offs, ok := sliceFields.find(node)
	if !ok {
		return p, false
	}
	p.starts, p.limits, p.strides = fieldInts(base, offs[0]), fieldInts(base, offs[1]), fieldInts(base, offs[2])
	return p, true
}

var sliceFields = newStructFields([]string{"starts", "limits", "strides"}, nil)

// gatherParams are the fields of simplego's gatherNode.
type gatherParams struct {
	indexVectorAxis                                      int
	offsetOutputAxes, collapsedSlicesAxes, startIndexMap []int
	sliceSizes                                           []int
}

// readGatherParams reads a Gather node's parameters; ok is false if simplego's layout changed.
func readGatherParams(node *simplego.Node) (p gatherParams, ok bool) {
	base, offs, ok := gatherFields.find(node)
	if !ok {
		return p, false
	}
	p.offsetOutputAxes, p.collapsedSlicesAxes = fieldInts(base, offs[0]), fieldInts(base, offs[1])
	p.startIndexMap, p.sliceSizes = fieldInts(base, offs[2]), fieldInts(base, offs[3])
	p.indexVectorAxis = fieldInt(base, offs[4])
	return p, true
}

var gatherFields = newStructFields([]string{"offsetOutputAxes", "collapsedSlicesAxes", "startIndexMap", "sliceSizes"},
	[]string{"indexVectorAxis"})

// structFields finds named []int and int fields of the struct a node's data points to. Their offsets
// are looked up by reflection once per struct type and checked there; a fast executor reads its
// node's parameters on every execution, and reflection by name allocated and took about a microsecond
// a field.
type structFields struct {
	ints, scalars, bools []string // The []int, int and bool fields, in the order of the offsets.
	layout               atomic.Pointer[fieldLayout]
}

// fieldLayout is the offsets of a structFields' fields in one struct type (ok false: not all there).
type fieldLayout struct {
	typ  reflect.Type // The pointer-to-struct type of the node's data.
	offs []uintptr
	ok   bool
}

func newStructFields(ints, scalars []string, bools ...string) *structFields {
	return &structFields{ints: ints, scalars: scalars, bools: bools}
}

// find returns the address of the struct node.data points to and the offsets of the fields; ok is
// false if the data isn't a pointer to a struct holding them with those types.
func (sf *structFields) find(node *simplego.Node) (base unsafe.Pointer, offs []uintptr, ok bool) {
	if !nodeFieldsOK {
		return nil, nil, false
	}
	data := nodeDataOf(node)
	t := reflect.TypeOf(data)
	if t == nil {
		return nil, nil, false
	}
	l := sf.layout.Load()
	if l == nil || l.typ != t {
		l = sf.lookup(t)
		sf.layout.Store(l)
	}
	if !l.ok {
		return nil, nil, false
	}
	v := reflect.ValueOf(data)
	if v.IsNil() {
		return nil, nil, false
	}
	return v.UnsafePointer(), l.offs, true
}

// lookup finds the fields' offsets in the struct t points to.
func (sf *structFields) lookup(t reflect.Type) *fieldLayout {
	l := &fieldLayout{typ: t}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return l
	}
	for i, name := range slices.Concat(sf.ints, sf.scalars, sf.bools) {
		f, found := t.Elem().FieldByName(name)
		want := reflect.TypeOf([]int(nil))
		switch {
		case i >= len(sf.ints)+len(sf.scalars):
			want = reflect.TypeOf(false)
		case i >= len(sf.ints):
			want = reflect.TypeOf(0)
		}
		if !found || f.Type != want || len(f.Index) != 1 {
			return l
		}
		l.offs = append(l.offs, f.Offset)
	}
	l.ok = true
	return l
}

// argMinMaxParams are the fields of simplego's argMinMaxNode.
type argMinMaxParams struct {
	axis  int
	isMin bool
}

// readArgMinMaxParams reads an ArgMinMax node's parameters; ok is false if simplego's layout changed.
func readArgMinMaxParams(node *simplego.Node) (p argMinMaxParams, ok bool) {
	base, offs, ok := argMinMaxFields.find(node)
	if !ok {
		return p, false
	}
	p.axis, p.isMin = fieldInt(base, offs[0]), *(*bool)(unsafe.Add(base, offs[1]))
	return p, true
}

var argMinMaxFields = newStructFields(nil, []string{"axis"}, "isMin")

// fieldInts is the []int at offset off of the struct at base.
func fieldInts(base unsafe.Pointer, off uintptr) []int { return *(*[]int)(unsafe.Add(base, off)) }

// fieldInt is the int at offset off of the struct at base.
func fieldInt(base unsafe.Pointer, off uintptr) int { return *(*int)(unsafe.Add(base, off)) }

// unexportedField returns struct field name of v, readable; the zero Value if there is none.
func unexportedField(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}
