package trainer

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
)

// Optimizer builds, inside the compiled train step, the update of every trained variable.
// Hyperparameters that change during a run (the learning rate) arrive as runtime scalars, so a
// schedule never forces a recompilation.
type Optimizer interface {
	// Update sets the new value of each variable from its gradient. decay[i] says whether weight
	// decay applies to vars[i] (false for the net's no-decay group).
	Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node)
}

// NewOptimizer returns the optimizer the config names.
func NewOptimizer(c OptimizerConfig) (Optimizer, error) {
	switch c.Name {
	case "sgd":
		return SGD{Momentum: c.Momentum, Nesterov: c.Nesterov, WeightDecay: c.WeightDecay}, nil
	}
	return nil, fmt.Errorf("optimizer.name: unknown optimizer %q", c.Name)
}

// SGD is stochastic gradient descent with optional heavy-ball or Nesterov momentum and coupled
// (L2) weight decay:
//
//	g = ∇ + wd·θ;  v' = μv + g;  heavy ball: θ' = θ − lr·v';  Nesterov: θ' = θ − lr·(g + μv').
//
// With μ = 0 it is plain SGD, θ' = θ − lr·g, and keeps no state.
type SGD struct {
	Momentum    float64
	Nesterov    bool
	WeightDecay float64
}

// Update implements Optimizer.
func (o SGD) Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node) {
	for i, v := range vars {
		theta := v.ValueGraph(lr.Graph())
		g := ConvertDType(grads[i], theta.DType())
		if o.WeightDecay > 0 && decay[i] {
			g = Add(g, MulScalar(theta, o.WeightDecay))
		}
		step := g
		if o.Momentum > 0 {
			velocity := stateVariable(ctx, v, "velocity")
			vNew := Add(MulScalar(velocity.ValueGraph(lr.Graph()), o.Momentum), g)
			velocity.SetValueGraph(vNew)
			step = vNew
			if o.Nesterov {
				step = Add(g, MulScalar(vNew, o.Momentum))
			}
		}
		v.SetValueGraph(Sub(theta, Mul(ConvertDType(lr, theta.DType()), step)))
	}
}

// stateVariable is an optimizer slot for v (zero-initialised, not trained), stored under
// /optimizer/<v's scope>/<v's name>/<slot> so checkpoints name it unambiguously.
func stateVariable(ctx *context.Context, v *context.Variable, slot string) *context.Variable {
	scope := context.JoinScope("/optimizer"+v.Scope(), v.Name())
	s := ctx.InAbsPath(scope).Checked(false).WithInitializer(initializers.Zero).VariableWithShape(slot, v.Shape())
	s.SetTrainable(false)
	return s
}
