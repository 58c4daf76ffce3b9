package trainstep

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// sgdClosedForm is ARCHITECTURE.md's law for one variable: g = ∇ + wd·θ (decayed variables only);
// v' = μv + g; heavy ball θ' = θ − lr·v'; Nesterov θ' = θ − lr·(g + μv'); plain θ' = θ − lr·g.
func sgdClosedForm(o SGD, theta, v, grad []float64, decay bool, lr float64) ([]float64, []float64) {
	t2, v2 := make([]float64, len(theta)), make([]float64, len(theta))
	for i := range theta {
		g := grad[i]
		if decay {
			g += o.WeightDecay * theta[i]
		}
		switch {
		case o.Momentum == 0:
			t2[i] = theta[i] - lr*g
		case o.Nesterov:
			v2[i] = o.Momentum*v[i] + g
			t2[i] = theta[i] - lr*(g+o.Momentum*v2[i])
		default:
			v2[i] = o.Momentum*v[i] + g
			t2[i] = theta[i] - lr*v2[i]
		}
	}
	return t2, v2
}

// TestSGDFollowsTheLaw feeds given gradients to SGD.Update for three steps (so the velocity matters)
// and compares every parameter with the closed form, for a decayed and a no-decay variable.
func TestSGDFollowsTheLaw(t *testing.T) {
	for _, o := range []SGD{
		{WeightDecay: 0.01},
		{Momentum: 0.9, WeightDecay: 0.01},
		{Momentum: 0.9, Nesterov: true, WeightDecay: 0.01},
	} {
		rng := rand.New(rand.NewPCG(11, 12))
		normal := func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = rng.NormFloat64()
			}
			return v
		}
		ctx := context.New()
		w := ctx.InAbsPath("/model/fc").VariableWithValue("weight", tensors.FromFlatDataAndDimensions(normal(6), 2, 3))
		b := ctx.InAbsPath("/model/fc").VariableWithValue("bias", tensors.FromFlatDataAndDimensions(normal(3), 3))
		vars := []*context.Variable{w, b}
		decay := []bool{true, false}
		exec := context.MustNewExec(lossBackend(), ctx, func(ctx *context.Context, gw, gb, lr *Node) {
			o.Update(ctx, vars, []*Node{gw, gb}, decay, lr)
		})
		velocity := [][]float64{make([]float64, 6), make([]float64, 3)}
		const lr = 0.0625 // exact in float32, the dtype the loop feeds
		for step := range 3 {
			theta := [][]float64{tensors.MustCopyFlatData[float64](w.MustValue()), tensors.MustCopyFlatData[float64](b.MustValue())}
			grads := [][]float64{normal(6), normal(3)}
			exec.MustExec(tensors.FromFlatDataAndDimensions(grads[0], 2, 3), tensors.FromFlatDataAndDimensions(grads[1], 3), float32(lr))
			for i, v := range vars {
				want, vel := sgdClosedForm(o, theta[i], velocity[i], grads[i], decay[i], lr)
				velocity[i] = vel
				got := tensors.MustCopyFlatData[float64](v.MustValue())
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-15*max(1, math.Abs(want[j])) {
						t.Fatalf("%+v step %d %s[%d]: %v, closed form %v", o, step, v.ScopeAndName(), j, got[j], want[j])
					}
				}
			}
		}
		// Plain SGD keeps no state; momentum keeps one velocity per variable.
		slots := 0
		for v := range ctx.IterVariables() {
			if strings.HasPrefix(v.Scope(), "/optimizer") {
				slots++
			}
		}
		if want := map[bool]int{false: 0, true: 2}[o.Momentum > 0]; slots != want {
			t.Errorf("%+v: %d optimizer slots, want %d", o, slots, want)
		}
		exec.Finalize()
	}
}
