package trainstep

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"

	"github.com/trainer/trainer/config"
)

// Optimizer builds, inside the compiled train step, the update of every trained variable.
// Hyperparameters that change during a run (the learning rate, Adam's bias corrections) arrive as
// runtime scalars, so a schedule never forces a recompilation.
type Optimizer interface {
	// HostScalars returns the per-step values, besides the learning rate, that the host feeds to the
	// update of optimizer step t (1-based: t = 1 is the first update); nil when there are none.
	HostScalars(t int) []float64
	// Update sets the new value of each variable from its gradient. decay[i] says whether weight
	// decay applies to vars[i] (false for the net's no-decay group). host holds the graph inputs
	// carrying HostScalars(t), in order.
	Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node, host ...*Node)
}

// NewOptimizer returns the optimizer the config names, with the optimizer's defaults filled in for
// hyperparameters left at −1.
func NewOptimizer(c config.OptimizerConfig) (Optimizer, error) {
	r := c.Resolved()
	switch c.Name {
	case "sgd":
		return SGD{Momentum: r.Momentum, Nesterov: r.Nesterov, WeightDecay: r.WeightDecay}, nil
	case "adamw":
		return AdamW{Beta1: r.Beta1, Beta2: r.Beta2, Epsilon: r.Epsilon, WeightDecay: r.WeightDecay}, nil
	case "lamb":
		return LAMB{Beta1: r.Beta1, Beta2: r.Beta2, Epsilon: r.Epsilon, WeightDecay: r.WeightDecay}, nil
	case "rmsprop_tf":
		return RMSPropTF{Rho: r.Rho, Momentum: r.Momentum, Epsilon: r.Epsilon, WeightDecay: r.WeightDecay,
			LROutside: r.LROutside}, nil
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

// HostScalars implements Optimizer: SGD needs none.
func (o SGD) HostScalars(int) []float64 { return nil }

// Update implements Optimizer.
func (o SGD) Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node, _ ...*Node) {
	for i, v := range vars {
		theta := v.ValueGraph(lr.Graph())
		g := ConvertDType(grads[i], theta.DType())
		if o.WeightDecay > 0 && decay[i] {
			g = Add(g, MulScalar(theta, o.WeightDecay))
		}
		step := g
		if o.Momentum > 0 {
			velocity := stateVariable(ctx, v, "velocity", 0)
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

// adamBiasCorrections are (1 − β1^t, 1 − β2^t) for update t (1-based), computed on the host in float64.
func adamBiasCorrections(beta1, beta2 float64, t int) []float64 {
	return []float64{1 - math.Pow(beta1, float64(t)), 1 - math.Pow(beta2, float64(t))}
}

// adamDirection updates the moments of v and returns Adam's direction (m'/b1)/(sqrt(v'/b2)+ε).
func adamDirection(ctx *context.Context, v *context.Variable, g, b1, b2 *Node, beta1, beta2, eps float64) *Node {
	graph := g.Graph()
	m := stateVariable(ctx, v, "exp_avg", 0)
	s := stateVariable(ctx, v, "exp_avg_sq", 0)
	mNew := Add(MulScalar(m.ValueGraph(graph), beta1), MulScalar(g, 1-beta1))
	sNew := Add(MulScalar(s.ValueGraph(graph), beta2), MulScalar(Square(g), 1-beta2))
	m.SetValueGraph(mNew)
	s.SetValueGraph(sNew)
	b1, b2 = ConvertDType(b1, g.DType()), ConvertDType(b2, g.DType())
	return Div(Div(mNew, b1), AddScalar(Sqrt(Div(sNew, b2)), eps))
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter), in the form of PyTorch's AdamW:
//
//	m' = β1m + (1−β1)g;  v' = β2v + (1−β2)g²;  θ' = θ − lr·(m'/b1)/(sqrt(v'/b2)+ε) − lr·wd·θ,
//
// with the bias corrections b1 = 1−β1^t and b2 = 1−β2^t fed by the host. The no-decay group gets no
// decay term.
type AdamW struct {
	Beta1, Beta2, Epsilon, WeightDecay float64
}

// HostScalars implements Optimizer: the two bias corrections.
func (o AdamW) HostScalars(t int) []float64 { return adamBiasCorrections(o.Beta1, o.Beta2, t) }

// Update implements Optimizer; host must be (b1, b2).
func (o AdamW) Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node, host ...*Node) {
	mustHost("adamw", host, 2)
	for i, v := range vars {
		theta := v.ValueGraph(lr.Graph())
		g := ConvertDType(grads[i], theta.DType())
		dir := adamDirection(ctx, v, g, host[0], host[1], o.Beta1, o.Beta2, o.Epsilon)
		rate := ConvertDType(lr, theta.DType())
		next := Sub(theta, Mul(rate, dir))
		if o.WeightDecay > 0 && decay[i] {
			next = Sub(next, Mul(rate, MulScalar(theta, o.WeightDecay)))
		}
		v.SetValueGraph(next)
	}
}

// LAMB is layer-wise adaptive Adam (You et al.), per variable:
//
//	r = (m'/b1)/(sqrt(v'/b2)+ε) + wd·θ;  τ = ‖θ‖/‖r‖ (1 when either norm is 0);  θ' = θ − lr·τ·r,
//
// and the no-decay group steps as Adam (no decay term, τ = 1).
type LAMB struct {
	Beta1, Beta2, Epsilon, WeightDecay float64
}

// HostScalars implements Optimizer: the two bias corrections.
func (o LAMB) HostScalars(t int) []float64 { return adamBiasCorrections(o.Beta1, o.Beta2, t) }

// Update implements Optimizer; host must be (b1, b2).
func (o LAMB) Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node, host ...*Node) {
	mustHost("lamb", host, 2)
	for i, v := range vars {
		theta := v.ValueGraph(lr.Graph())
		g := ConvertDType(grads[i], theta.DType())
		r := adamDirection(ctx, v, g, host[0], host[1], o.Beta1, o.Beta2, o.Epsilon)
		rate := ConvertDType(lr, theta.DType())
		if !decay[i] {
			v.SetValueGraph(Sub(theta, Mul(rate, r)))
			continue
		}
		if o.WeightDecay > 0 {
			r = Add(r, MulScalar(theta, o.WeightDecay))
		}
		thetaNorm := Sqrt(ReduceAllSum(Square(theta)))
		rNorm := Sqrt(ReduceAllSum(Square(r)))
		zero := ZerosLike(thetaNorm)
		both := LogicalAnd(GreaterThan(thetaNorm, zero), GreaterThan(rNorm, zero))
		// A safe divisor keeps 0/0 out of the branch Where discards.
		safe := Where(both, rNorm, OnesLike(rNorm))
		trust := Where(both, Div(thetaNorm, safe), OnesLike(rNorm))
		v.SetValueGraph(Sub(theta, Mul(Mul(rate, trust), r)))
	}
}

// RMSPropTF is RMSProp as TensorFlow (and timm's RMSpropTF) computes it, with coupled weight decay
// g = ∇ + wd·θ on the decayed group:
//
//	s' = ρs + (1−ρ)g² (s starts at 1);  b' = μb + lr·g/sqrt(s'+ε);  θ' = θ − b'.
//
// With LROutside the learning rate leaves the momentum buffer: b' = μb + g/sqrt(s'+ε); θ' = θ − lr·b'.
// The two forms agree while the rate is constant and part whenever it changes.
type RMSPropTF struct {
	Rho, Momentum, Epsilon, WeightDecay float64
	LROutside                           bool
}

// HostScalars implements Optimizer: RMSProp needs none.
func (o RMSPropTF) HostScalars(int) []float64 { return nil }

// Update implements Optimizer.
func (o RMSPropTF) Update(ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool, lr *Node, _ ...*Node) {
	for i, v := range vars {
		graph := lr.Graph()
		theta := v.ValueGraph(graph)
		g := ConvertDType(grads[i], theta.DType())
		if o.WeightDecay > 0 && decay[i] {
			g = Add(g, MulScalar(theta, o.WeightDecay))
		}
		rate := ConvertDType(lr, theta.DType())
		s := stateVariable(ctx, v, "square_avg", 1)
		sNew := Add(MulScalar(s.ValueGraph(graph), o.Rho), MulScalar(Square(g), 1-o.Rho))
		s.SetValueGraph(sNew)
		step := Div(g, Sqrt(AddScalar(sNew, o.Epsilon)))
		if !o.LROutside {
			step = Mul(rate, step)
		}
		if o.Momentum > 0 {
			buf := stateVariable(ctx, v, "momentum_buffer", 0)
			step = Add(MulScalar(buf.ValueGraph(graph), o.Momentum), step)
			buf.SetValueGraph(step)
		}
		if o.LROutside {
			step = Mul(rate, step)
		}
		v.SetValueGraph(Sub(theta, step))
	}
}

func mustHost(name string, host []*Node, n int) {
	if len(host) != n {
		panic(fmt.Sprintf("%s: the update needs %d host scalars (HostScalars), got %d", name, n, len(host)))
	}
}

// stateVariable is an optimizer slot for v (not trained, every element starting at init, 0 or 1),
// stored under /optimizer/<v's scope>/<v's name>/<slot> so checkpoints name it unambiguously.
func stateVariable(ctx *context.Context, v *context.Variable, slot string, init float64) *context.Variable {
	scope := context.JoinScope("/optimizer"+v.Scope(), v.Name())
	initializer := initializers.Zero
	switch init {
	case 0:
	case 1:
		initializer = initializers.One
	default:
		panic(fmt.Sprintf("stateVariable %s/%s: initial value %g, only 0 and 1 are supported", scope, slot, init))
	}
	s := ctx.InAbsPath(scope).Checked(false).WithInitializer(initializer).VariableWithShape(slot, v.Shape())
	s.SetTrainable(false)
	return s
}
