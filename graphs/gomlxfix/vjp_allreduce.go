package gomlxfix

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26 registers no gradient for AllReduce. In an SPMD program every device d of a replica
// group gets y_d = Σ_r x_r, so the derivative of the devices' summed objective Σ_d L_d with respect to
// device r's operand is Σ_d ∂L_d/∂y_d: the cotangent of x_r is the sum all-reduce of the output
// cotangents over the same groups. (Sync BatchNorm differentiates through its all-reduced moments;
// the step's gradient all-reduce sits after the backward pass and needs none.) Product, max and min
// all-reduces have no gradient here.

// allReduceVJP is AllReduce's gradient (registered by Install, gomlx_internals.go).
func allReduceVJP(node *Node, v []*Node, _ shapes.Shape) []*Node {
	reduction, groups, ok := allReduceParams(node)
	if !ok {
		panic(fmt.Errorf("gradient of %s: GoMLX's AllReduce parameters moved (TestGoMLXInternals says where)", node))
	}
	if reduction != backends.ReduceOpSum {
		panic(fmt.Errorf("gradient of an AllReduce(%s): only sum all-reduces are differentiable here", reduction))
	}
	return allReduceSumOver(v, groups)
}

// allReduceSumOver sums each of xs over the devices of its replica group, the groups being those of
// the mesh axes that produce them (GoMLX's Distributed().Along takes axes, not groups). With no
// groups it sums over every device of the program.
func allReduceSumOver(xs []*Node, groups [][]int) []*Node {
	g := xs[0].Graph()
	if len(groups) == 0 {
		return g.Distributed().AllReduce(xs, backends.ReduceOpSum)
	}
	mesh := g.DeviceMeshes()[0]
	names := mesh.AxesNames()
	// Every subset of the mesh's axes, until one gives these groups (a mesh has a few axes).
	for subset := 1; subset < 1<<len(names); subset++ {
		var axes []string
		for i, name := range names {
			if subset&(1<<i) != 0 {
				axes = append(axes, name)
			}
		}
		if mine, err := mesh.ComputeReplicaGroups(axes); err == nil && sameGroups(mine, groups) {
			return g.Distributed().Along(axes...).AllReduce(xs, backends.ReduceOpSum)
		}
	}
	panic(fmt.Errorf("AllReduce over replica groups %v: no axes of mesh %s give them", groups, mesh))
}

func sameGroups(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}
