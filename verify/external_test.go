package verify

import (
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// TestRegisteredOpCases: an OpCase registered from outside is listed after the package's own op cases
// (before the special checks), carries its parts over, and its checks pass or fail as the package's do.
func TestRegisteredOpCases(t *testing.T) {
	square := func(in, p []reference.Tensor) reference.Tensor {
		return reference.Map(in[0], func(v float64) float64 { return v * v * p[0].Data[0] })
	}
	build := func(ctx *context.Context, in []*Node, opts graphs.Options) *Node {
		w := graphs.Param(ctx.In("scale"), in[0].Graph(), opts, "weight", graphs.InitConst(1), 0, 0, 1)
		return Mul(Mul(in[0], in[0]), Reshape(w, 1, 1))
	}
	RegisterOpCases(func() OpCase {
		return OpCase{Name: "external_square", Inputs: []Operand{Input("x", Normal(1), 3, 4)},
			Params: []Operand{Param("scale", "weight", Uniform(0.5, 1.5), 1)}, Build: build, Ref: square, Smooth: true}
	})
	checks := OpChecks()
	own, special := len(opCases())-1, specialChecks()
	if got := checks[own]; got.Name != "external_square" {
		t.Fatalf("check %d is %s, want the registered external_square after the %d own op cases", own, got.Name, own)
	}
	if checks[own+1].Name != special[0].Name {
		t.Errorf("after the registered case comes %s, want the first special check %s", checks[own+1].Name, special[0].Name)
	}
	res := checks[own].Run(testBackend())
	if len(res) != 3 || Failures(res) != 0 || res[0].Shapes != "x 3x4, weight 1 -> 3x4" {
		t.Errorf("external_square: %+v", res)
	}
}
