package gomlxfix

import (
	"reflect"
	"sync"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
)

// This file is the package's only bridge into GoMLX's internals (v0.26.0). It touches:
//
//   - graph.VJPRegistration, GoMLX's process-wide map from node type to gradient, rewritten by Install:
//     gradients for Rsqrt and AllReduce (GoMLX has none; vjp.go, vjp_allreduce.go), and Dot's, DotGeneral's and ConvGeneral's replaced by the
//     ones in vjp.go and vjp_conv.go (the stock ones are slow, and ConvGeneral's is wrong for even
//     kernels). The map is public and documented as changeable; what makes this a bridge is that it is
//     global: Install changes every graph.Gradient in the process. The per-node alternative
//     (graph.IdentityWithCustomGradient) cannot reach the Dots and convolutions GoMLX's own layers build.
//   - the unexported parameter structs behind *graph.Node (nodeInputsDotGeneral, nodeInputsConvGeneral,
//     nodeInputsAllReduce), read by reflection: a Node exposes its type, inputs and shape, but not its
//     op's parameters (axes, strides, paddings, dilations, groups; an all-reduce's reduction and replica
//     groups), which the gradients need.
//
// When GoMLX changes: the readers return ok = false and the stock gradient is used (correct where
// GoMLX is, but slow, and wrong for even-kernel convolutions; AllReduce, which has no stock gradient,
// then panics naming the test); TestGoMLXInternals fails naming the field that moved, and
// TestBridgesMatchGoMLXVersion fails naming every bridge file as soon as the version moves.

// The stock gradients, read before Install replaces them, kept for the fallbacks (and for the tests,
// which compare against them).
var (
	stockDotVJP        = VJPRegistration[NodeTypeDot]
	stockDotGeneralVJP = VJPRegistration[NodeTypeDotGeneral]
	stockConvVJP       = VJPRegistration[NodeTypeConvGeneral]
)

// The replacements Install registers.
var (
	fixedDotVJP        = dotVJP(stockDotVJP)
	fixedDotGeneralVJP = dotGeneralVJP(stockDotGeneralVJP)
	fixedConvVJP       = convGeneralVJP(stockConvVJP)
)

var installOnce sync.Once

// Install registers the gradients in GoMLX's process-wide graph.VJPRegistration: Rsqrt's and
// AllReduce's (GoMLX has none) and the replacements of Dot's, DotGeneral's and ConvGeneral's. Call it
// before building any graph whose gradient is taken; it is safe to call any number of times, from any
// goroutine (only the first call changes anything), but not while another goroutine takes a gradient
// for the first time.
func Install() {
	installOnce.Do(func() {
		if VJPRegistration[NodeTypeRsqrt] == nil {
			VJPRegistration[NodeTypeRsqrt] = rsqrtVJP
		}
		if VJPRegistration[NodeTypeAllReduce] == nil {
			VJPRegistration[NodeTypeAllReduce] = allReduceVJP
		}
		VJPRegistration[NodeTypeDot] = fixedDotVJP
		VJPRegistration[NodeTypeDotGeneral] = fixedDotGeneralVJP
		VJPRegistration[NodeTypeConvGeneral] = fixedConvVJP
	})
}

// Installed reports whether GoMLX's gradient table holds this package's gradients (Install ran and
// nothing replaced them since).
func Installed() bool {
	same := func(a, b VJP) bool {
		return a != nil && b != nil && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	return VJPRegistration[NodeTypeRsqrt] != nil &&
		same(VJPRegistration[NodeTypeAllReduce], allReduceVJP) &&
		same(VJPRegistration[NodeTypeDot], fixedDotVJP) &&
		same(VJPRegistration[NodeTypeDotGeneral], fixedDotGeneralVJP) &&
		same(VJPRegistration[NodeTypeConvGeneral], fixedConvVJP)
}

// dotGeneralAxes reads the contracting and batch axes of a DotGeneral node. GoMLX keeps them in an
// unexported struct, so they are read by reflection; ok is false if that layout ever changes, and the
// stock gradient is used instead (tests compare both).
func dotGeneralAxes(node *Node) (axes dotAxes, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	inputs := reflect.ValueOf(node).Elem().FieldByName("inputs")
	if !inputs.IsValid() || inputs.IsNil() {
		return axes, false
	}
	params := inputs.Elem().Elem()
	read := func(field string) ([]int, bool) {
		f := params.FieldByName(field)
		if !f.IsValid() || f.Kind() != reflect.Slice {
			return nil, false
		}
		ints := make([]int, f.Len())
		for i := range ints {
			ints[i] = int(f.Index(i).Int())
		}
		return ints, true
	}
	var ok1, ok2, ok3, ok4 bool
	axes.lhsContracting, ok1 = read("lhsContractingAxes")
	axes.lhsBatch, ok2 = read("lhsBatchAxes")
	axes.rhsContracting, ok3 = read("rhsContractingAxes")
	axes.rhsBatch, ok4 = read("rhsBatchAxes")
	return axes, ok1 && ok2 && ok3 && ok4
}

// allReduceParams reads an AllReduce node's reduction and replica groups, which GoMLX keeps in an
// unexported struct; ok is false if that layout ever changes.
func allReduceParams(node *Node) (reduction backends.ReduceOpType, groups [][]int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	params := reflect.ValueOf(node).Elem().FieldByName("inputs").Elem().Elem()
	r, gs := params.FieldByName("reductionType"), params.FieldByName("replicaGroups")
	if !r.IsValid() || !gs.IsValid() || r.Kind() != reflect.Int || gs.Kind() != reflect.Slice {
		return 0, nil, false
	}
	groups = make([][]int, gs.Len())
	for i := range groups {
		group := gs.Index(i)
		groups[i] = make([]int, group.Len())
		for j := range groups[i] {
			groups[i][j] = int(group.Index(j).Int())
		}
	}
	return backends.ReduceOpType(r.Int()), groups, true
}

// readConvParams reads the unexported attributes of a ConvGeneral node by reflection; ok is false if
// GoMLX's layout ever changes (then the stock gradient is used; the tests compare against both).
func readConvParams(node *Node) (p convParams, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	params := reflect.ValueOf(node).Elem().FieldByName("inputs").Elem().Elem()
	ints := func(field string) []int {
		f := params.FieldByName(field)
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out
	}
	p.axes = reflectCopy[backends.ConvolveAxesConfig](params.FieldByName("axes"))
	p.strides = fill(ints("strides"), 2)
	p.inputDilations = fill(ints("inputDilations"), 2)
	p.dilations = fill(ints("kernelDilations"), 2)
	pads := params.FieldByName("paddings")
	p.paddings = make([][2]int, 2)
	for i := 0; i < pads.Len() && i < 2; i++ {
		p.paddings[i] = [2]int{int(pads.Index(i).Index(0).Int()), int(pads.Index(i).Index(1).Int())}
	}
	p.groups = max(int(params.FieldByName("channelGroupCount").Int()), 1)
	p.batchGroups = max(int(params.FieldByName("batchGroupCount").Int()), 1)
	return p, true
}

// reflectCopy copies an unexported struct field of exported type T.
func reflectCopy[T any](v reflect.Value) T {
	var out T
	dst := reflect.ValueOf(&out).Elem()
	for i := range dst.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int:
			dst.Field(i).SetInt(f.Int())
		case reflect.Slice:
			s := make([]int, f.Len())
			for j := range s {
				s[j] = int(f.Index(j).Int())
			}
			dst.Field(i).Set(reflect.ValueOf(s))
		}
	}
	return out
}
