package gobackend

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// TestSimplegoInternals is the guard on simplego_internals.go: each assumption it makes about GoMLX
// v0.26's simplego is checked here, and a failure names the one that broke. (The fast paths would
// otherwise fall back to simplego's executors silently: correct, and many times slower.)
func TestSimplegoInternals(t *testing.T) {
	b := testBackend(t)
	broke := func(format string, args ...any) {
		t.Helper()
		t.Errorf("GoMLX changed simplego's internals: "+format, args...)
	}
	node := reflect.TypeOf(simplego.Node{})
	for _, f := range []struct {
		name string
		typ  reflect.Type
	}{
		{"shape", reflect.TypeOf(shapes.Shape{})}, {"data", reflect.TypeOf((*any)(nil)).Elem()},
		{"opType", reflect.TypeOf(backends.OpType(0))}, {"inputs", reflect.TypeOf([]*simplego.Node(nil))},
	} {
		if got, ok := node.FieldByName(f.name); !ok || got.Type != f.typ {
			broke("simplego.Node has no field %s of type %s (found %v)", f.name, f.typ, got.Type)
		}
	}
	if got, ok := reflect.TypeOf(simplego.Builder{}).FieldByName("nodes"); !ok || got.Type != reflect.TypeOf([]*simplego.Node(nil)) {
		broke("simplego.Builder has no field nodes []*simplego.Node (found %v)", got.Type)
	}
	if !nodeFieldsOK || !fuseFieldsOK {
		broke("node field offsets not found (nodeFieldsOK %v, fuseFieldsOK %v)", nodeFieldsOK, fuseFieldsOK)
	}
	if !bufferFieldsOK {
		broke("simplego.Buffer has no fields shape shapes.Shape, valid bool and flat any: Reshape views are off")
	}
	for op := range fastExecutors() {
		if sgExecutors[op] == nil {
			broke("simplego's executor table (nodeExecutors, reached by go:linkname) has no executor for %s", op)
		}
	}
	if !fusionInstalled {
		broke("simplego's executor slot for %s is taken: pick another op type for fused element-wise nodes", fusedOpType)
	}
	if !fusedConvInstalled {
		broke("simplego's executor slot for %s is taken: pick another op type for fused convolutions", fusedConvOpType)
	}
	if !poolGradInstalled {
		broke("simplego's executor slots for %s and %s are taken: simplego may run them itself now (drop pool_grad.go's "+
			"node, keeping its bit-for-bit test against the composition), or pick other op types", selectAndScatterMaxOpType, selectAndScatterMinOpType)
	}
	if !collectivesInstalled {
		broke("simplego's executor slot for %s is taken: simplego may run collectives itself now (drop spmd.go's), "+
			"or pick another op type", allReduceOpType)
	}
	if !nodeFieldsOK {
		t.FailNow()
	}

	// What simplego keeps in Node.data, op by op.
	builder := b.Builder("internals").(*goBuilder).Builder
	must := func(op backends.Op, err error) *simplego.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return op.(*simplego.Node)
	}
	x := must(builder.Parameter("x", mustShapeF32(2, 3, 4), nil))
	if p, ok := readSliceParams(must(builder.Slice(x, []int{0, 1, 0}, []int{2, 3, 4}, []int{1, 1, 2}))); !ok ||
		fmt.Sprint(p.starts, p.limits, p.strides) != "[0 1 0] [2 3 4] [1 1 2]" {
		broke("Slice's data (sliceNode: starts, limits, strides []int) reads as %+v, ok %v", p, ok)
	}
	if perm, ok := nodeInts(must(builder.Transpose(x, 2, 0, 1))); !ok || fmt.Sprint(perm) != "[2 0 1]" {
		broke("Transpose's data (the permutation, []int) reads as %v, ok %v", perm, ok)
	}
	if axes, ok := nodeInts(must(builder.BroadcastInDim(x, mustShapeF32(2, 5, 3, 4), []int{0, 2, 3}))); !ok || fmt.Sprint(axes) != "[0 2 3]" {
		broke("BroadcastInDim's data (the broadcast axes, []int) reads as %v, ok %v", axes, ok)
	}
	if axes, ok := nodeInts(must(builder.ReduceSum(x, 0, 2))); !ok || fmt.Sprint(axes) != "[0 2]" {
		broke("ReduceSum's data (the reduced axes, []int) reads as %v, ok %v", axes, ok)
	}
	if axis, ok := concatenateAxis(must(builder.Concatenate(1, x, x))); !ok || axis != 1 {
		broke("Concatenate's data (the axis, int) reads as %v, ok %v", axis, ok)
	}
	idx := must(builder.Parameter("idx", shapes.Make(dtypes.Int32, 5, 1), nil))
	gather := must(builder.Gather(x, idx, 1, []int{1, 2}, []int{0}, []int{0}, []int{1, 3, 4}, false))
	if p, ok := readGatherParams(gather); !ok || fmt.Sprint(p.indexVectorAxis, p.offsetOutputAxes, p.collapsedSlicesAxes, p.startIndexMap, p.sliceSizes) != "1 [1 2] [0] [0] [1 3 4]" {
		broke("Gather's data (gatherNode) reads as %+v, ok %v", p, ok)
	}
}

// The hook must reach simplego's executor table and the DotGeneral node's parameters; if a GoMLX
// upgrade moves them, the override silently falls back to simplego's kernel, and this test says so.
func TestFastDotHookInstalled(t *testing.T) {
	testBackend(t)
	if sgDotGeneral == nil {
		t.Fatal("simplego's DotGeneral executor was not found through the linkname")
	}
	if fmt.Sprintf("%p", sgNodeExecutors[backends.OpTypeDotGeneral]) != fmt.Sprintf("%p", execFastDotGeneral) {
		t.Fatal("simplego's executor table does not point at execFastDotGeneral")
	}
	b := testBackend(t)
	builder := b.Builder("hook").(*goBuilder).Builder
	l, err := builder.Parameter("l", mustShapeF32(2, 3, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := builder.Parameter("r", mustShapeF32(4, 2, 5), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := builder.DotGeneral(l, []int{2}, []int{0}, r, []int{0}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	node := findDotNode(t, out)
	p, ok := readDotParams(node)
	if !ok {
		t.Fatal("readDotParams: simplego's dotGeneralNodeData changed")
	}
	want := dotParams{lhsContracting: []int{2}, lhsBatch: []int{0}, rhsContracting: []int{0}, rhsBatch: []int{1},
		batch: 2, lhsCross: 3, rhsCross: 5, contracting: 4}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Fatalf("readDotParams = %+v, want %+v", p, want)
	}
}

// The element-wise executors are in simplego's table, and the node fields they read (shape, op
// type, parameters) are where they expect.
func TestFastElementwiseHooksInstalled(t *testing.T) {
	testBackend(t)
	if !nodeFieldsOK {
		t.Fatal("simplego.Node no longer has the shape/data/opType fields the fast executors read")
	}
	for op := range fastExecutors() {
		if sgExecutors[op] == nil {
			t.Errorf("%s: simplego's executor was not saved", op)
			continue
		}
		if reflect.ValueOf(sgNodeExecutors[op]).Pointer() == reflect.ValueOf(sgExecutors[op]).Pointer() {
			t.Errorf("%s: simplego's table still holds its own executor", op)
		}
	}
	builder := testBackend(t).Builder("fields").(*goBuilder).Builder
	x, err := builder.Parameter("x", mustShapeF32(2, 3, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := builder.ReduceSum(x, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	node := sum.(*simplego.Node)
	if got := nodeShape(node); !got.Equal(mustShapeF32(3)) {
		t.Errorf("nodeShape = %s, want (Float32)[3]", got)
	}
	if got := nodeOpType(node); got != backends.OpTypeReduceSum {
		t.Errorf("nodeOpType = %s, want ReduceSum", got)
	}
	if got, ok := nodeDataOf(node).([]int); !ok || fmt.Sprint(got) != "[0 2]" {
		t.Errorf("nodeDataOf = %v, want the reduced axes [0 2]", nodeDataOf(node))
	}
}

// A float32 convolution the fused GEMM handles becomes a node of its own, with its parameters, run by
// execFusedConv from simplego's table.
func TestFusedConvHookInstalled(t *testing.T) {
	if !fusedConvInstalled {
		t.Fatal("execFusedConv is not installed (simplego's executor slot for the fused op type is taken, or Node's fields moved)")
	}
	if reflect.ValueOf(sgNodeExecutors[fusedConvOpType]).Pointer() != reflect.ValueOf(execFusedConv).Pointer() {
		t.Fatal("simplego's table does not point at execFusedConv")
	}
	builder := testBackend(t).Builder("conv-node")
	x, err := builder.Parameter("x", mustShapeF32(2, 5, 5, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := builder.Parameter("k", mustShapeF32(3, 3, 3, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := builder.ConvGeneral(x, k, channelsLast(2), []int{2, 1}, [][2]int{{1, 0}, {0, 1}}, nil, []int{1, 2}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := conv.(*simplego.Node)
	spec, ok := nodeDataOf(n).(*kernels.ConvGemmSpec)
	if nodeOpType(n) != fusedConvOpType || !ok {
		t.Fatalf("ConvGeneral built a %s node with %T, want a fused convolution", nodeOpType(n), nodeDataOf(n))
	}
	if got := fmt.Sprint(spec.Strides, spec.Paddings, spec.KernelDilations, spec.InputDilations, spec.Flip); got != "[2 1] [[1 0] [0 1]] [1 2] [1 1] [false false]" {
		t.Fatalf("spec = %s", got)
	}
}

// The fused op type's executor slot is ours, and the node fields fusion rewrites are where it expects.
func TestFusionHookInstalled(t *testing.T) {
	testBackend(t)
	if !fuseFieldsOK || !fusionInstalled {
		t.Fatalf("fusion is off: node fields found %v, executor installed %v", fuseFieldsOK, fusionInstalled)
	}
	if reflect.ValueOf(sgNodeExecutors[fusedOpType]).Pointer() != reflect.ValueOf(execFused).Pointer() {
		t.Fatal("simplego's table does not point at execFused")
	}
}
