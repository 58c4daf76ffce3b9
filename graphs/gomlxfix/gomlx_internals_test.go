package gomlxfix

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestInstall: Install registers every gradient, calling it again changes nothing, and the stock
// gradients the replacements fall back to are GoMLX's own (not the replacements, which would recurse).
func TestInstall(t *testing.T) {
	Install()
	if !Installed() {
		t.Fatal("Installed() is false after Install")
	}
	kinds := []NodeType{NodeTypeRsqrt, NodeTypeAllReduce, NodeTypeDot, NodeTypeDotGeneral, NodeTypeConvGeneral}
	before := map[NodeType]uintptr{}
	for _, kind := range kinds {
		before[kind] = reflect.ValueOf(VJPRegistration[kind]).Pointer()
	}
	Install()
	for _, kind := range kinds {
		if after := reflect.ValueOf(VJPRegistration[kind]).Pointer(); after != before[kind] {
			t.Errorf("%s: a second Install changed the registered gradient", kind)
		}
	}
	if !Installed() {
		t.Error("Installed() is false after a second Install")
	}
	same := func(a, b VJP) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	for _, c := range []struct {
		kind         NodeType
		stock, fixed VJP
	}{{NodeTypeDot, stockDotVJP, fixedDotVJP}, {NodeTypeDotGeneral, stockDotGeneralVJP, fixedDotGeneralVJP},
		{NodeTypeConvGeneral, stockConvVJP, fixedConvVJP}} {
		if c.stock == nil || same(c.stock, c.fixed) {
			t.Errorf("%s: the stock gradient is missing or is the replacement (stock found: %v)", c.kind, c.stock != nil)
		}
	}
}

// TestGoMLXInternals is the guard on gomlx_internals.go: the gradients are registered in GoMLX's
// VJPRegistration, and the op parameters the readers take out of *graph.Node by reflection are where
// they expect. (The replacements fall back to GoMLX's stock gradients when the readers fail, so the
// gradient tests alone would not notice.)
func TestGoMLXInternals(t *testing.T) {
	Install()
	same := func(a, b VJP) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	if VJPRegistration[NodeTypeRsqrt] == nil {
		t.Error("no gradient registered for Rsqrt")
	}
	if !same(VJPRegistration[NodeTypeAllReduce], allReduceVJP) {
		t.Error("AllReduce's gradient (allReduceVJP) is not registered")
	}
	for _, c := range []struct {
		kind  NodeType
		stock VJP
	}{{NodeTypeDot, stockDotVJP}, {NodeTypeDotGeneral, stockDotGeneralVJP}, {NodeTypeConvGeneral, stockConvVJP}} {
		if c.stock == nil || same(VJPRegistration[c.kind], c.stock) {
			t.Errorf("%s: the replacement gradient is not registered in VJPRegistration (stock found: %v)", c.kind, c.stock != nil)
		}
	}
	if f, ok := reflect.TypeOf(Node{}).FieldByName("inputs"); !ok || f.Type.Kind() != reflect.Interface {
		t.Fatalf("GoMLX changed graph.Node: no interface field inputs holding the op's parameters (found %v)", f.Type)
	}

	g := NewGraph(testBackend(), "internals")
	defer g.Finalize()
	l := Parameter(g, "l", shapes.Make(dtypes.Float32, 2, 3, 4))
	r := Parameter(g, "r", shapes.Make(dtypes.Float32, 4, 2, 5))
	axes, ok := dotGeneralAxes(DotGeneral(l, []int{2}, []int{0}, r, []int{0}, []int{1}))
	if want := (dotAxes{[]int{2}, []int{0}, []int{0}, []int{1}}); !ok || fmt.Sprint(axes) != fmt.Sprint(want) {
		t.Errorf("GoMLX changed nodeInputsDotGeneral (lhsContractingAxes, lhsBatchAxes, rhsContractingAxes, rhsBatchAxes): read %+v, ok %v; want %+v", axes, ok, want)
	}

	spmd := NewGraph(devicesBackend(t, 2), "internals_spmd")
	defer spmd.Finalize()
	mesh, err := distributed.NewDeviceMesh([]int{2}, []string{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	if err := spmd.SetSPMD(mesh); err != nil {
		t.Fatal(err)
	}
	a := Parameter(spmd, "a", shapes.Make(dtypes.Float32, 3))
	reduction, groups, ok := allReduceParams(spmd.Distributed().AllReduceOne(a, backends.ReduceOpMin))
	if !ok || reduction != backends.ReduceOpMin || fmt.Sprint(groups) != "[[0 1]]" {
		t.Errorf("GoMLX changed nodeInputsAllReduce (reductionType, replicaGroups): read %s %v, ok %v; want %s [[0 1]]",
			reduction, groups, ok, backends.ReduceOpMin)
	}

	x := Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 9, 9, 4))
	k := Parameter(g, "k", shapes.Make(dtypes.Float32, 3, 3, 2, 6))
	conv := ConvGeneral(x, k, nhwc, []int{2, 1}, [][2]int{{1, 0}, {2, 1}}, []int{1, 1}, []int{1, 2}, 2, 1)
	p, ok := readConvParams(conv)
	want := convParams{axes: nhwc, strides: []int{2, 1}, inputDilations: []int{1, 1}, dilations: []int{1, 2},
		paddings: [][2]int{{1, 0}, {2, 1}}, groups: 2, batchGroups: 1}
	if !ok || !reflect.DeepEqual(p, want) {
		t.Errorf("GoMLX changed nodeInputsConvGeneral (axes, strides, paddings, inputDilations, kernelDilations, channelGroupCount, batchGroupCount): read %+v, ok %v; want %+v", p, ok, want)
	}
}
