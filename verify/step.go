package verify

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainstep"
	"github.com/trainer/trainer/verify/reference"
)

// stepTol bounds the optimizer checks: the closed form and the graph do the same float64 arithmetic,
// up to the order of a few sums (LAMB's norms, the clip norm).
const stepTol = 1e-12

// stepLRs are the learning rates of the three steps of every step check: they change at every step
// (which separates RMSProp's two forms) and are exact in float32, the dtype the loop feeds.
var stepLRs = []float64{0.0625, 0.03125, 0.09375}

// stepChecks check the train step every command compiles (trainstep.New, from a config naming the
// optimizer) on a softmax regression: the parameters after each of three steps equal the update law
// of ARCHITECTURE.md applied to the step's gradient, which is itself compared with central
// differences of the reference.
func stepChecks() []Check {
	const mu, wd = 0.9, 0.01
	plain, heavy, nesterov := optimizer("sgd"), optimizer("sgd"), optimizer("sgd")
	plain.Momentum, plain.WeightDecay = 0, wd
	heavy.Momentum, heavy.WeightDecay = mu, wd
	nesterov.Momentum, nesterov.Nesterov, nesterov.WeightDecay = mu, true, wd
	checks := []Check{
		sgdStepCase("sgd_step", plain).check(),
		sgdStepCase("sgd_heavy_ball_step", heavy).check(),
		sgdStepCase("sgd_nesterov_step", nesterov).check(),
	}
	return append(checks, optimizerStepChecks()...)
}

// optimizer is the config of the named optimizer with every hyperparameter at its default (−1).
func optimizer(name string) config.OptimizerConfig {
	return config.OptimizerConfig{Name: name, LR: stepLRs[0], Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
		AccumulateSteps: 1}
}

// stepVar is one trained variable of the step checks' softmax regression: logits = x·W + Σ vectors,
// W [in, classes] first, then any number of [classes] vectors (a bias, LAMB's zero tensor).
type stepVar struct {
	scope, name string
	init        gen
	decay       bool
}

// stepLaw is the closed form of one optimizer step on the host: the parameters after update t
// (1-based) at rate lr, from the parameters before and the step's gradient, one slice per variable.
// It keeps its own slots between calls, so each run needs a fresh one.
type stepLaw interface {
	step(theta, grads [][]float64, decay []bool, lr float64, t int) [][]float64
}

// stepCase is one step check: the train step of a config (trainstep's code) against a host law
// (written here).
type stepCase struct {
	name string
	vars []stepVar
	// opt is the step's optimizer.* config (its clip_grad_norm included).
	opt config.OptimizerConfig
	// newLaw makes a fresh closed form. exercised, when set, reads the law after the run: a note on what
	// the steps went through, and false when they missed what the check is about (the update row then
	// fails). A law of another type (a test's wrong law) is not inspected.
	newLaw    func() stepLaw
	exercised func(law stepLaw) (note string, ok bool)
}

// regressionVars are fc/weight (decayed) and fc/bias (the no-decay group), then extra [classes] vectors.
func regressionVars(extra ...stepVar) []stepVar {
	return append([]stepVar{
		{scope: "/model/fc", name: "weight", init: normal(0.5), decay: true},
		{scope: "/model/fc", name: "bias", init: normal(0.5), decay: false},
	}, extra...)
}

func (c stepCase) check() Check {
	return Check{Name: c.name, Run: c.run}
}

// run trains the softmax regression for len(stepLRs) steps and returns the /grad and /update rows.
func (c stepCase) run(backend backends.Backend) []Result {
	const batch, in, classes = 5, 4, 3
	name := c.name
	rng := rand.New(rand.NewPCG(seed(name), 7))
	x := reference.FromData(normal(1)(rng, []int{batch, in}), batch, in)
	lab := labels(classes)(rng, []int{batch})
	labInts := make([]int, batch)
	for i, v := range lab {
		labInts[i] = int(v)
	}

	ctx := context.New()
	vars := make([]*context.Variable, len(c.vars))
	decay := make([]bool, len(c.vars))
	parts := []string{fmt.Sprintf("x %dx%d", batch, in)}
	for i, sv := range c.vars {
		dims := []int{classes}
		if i == 0 {
			dims = []int{in, classes}
		}
		vars[i] = ctx.InAbsPath(sv.scope).VariableWithValue(sv.name, tensors.FromFlatDataAndDimensions(sv.init(rng, dims), dims...))
		decay[i] = sv.decay
		group := "decayed"
		if !sv.decay {
			group = "not decayed"
		}
		parts = append(parts, fmt.Sprintf("%s/%s %s (%s)", strings.TrimPrefix(sv.scope, "/model/"), sv.name, dimsString(dims), group))
	}
	shapes := strings.Join(parts, ", ")
	model := regression{vars: vars, decay: map[string]bool{}}
	for i, v := range vars {
		model.decay[v.ScopeAndName()] = decay[i]
	}
	cfg := config.Defaults()
	cfg.Name, cfg.Optimizer = "verify_step", c.opt
	if err := recipe.Validate(cfg); err != nil {
		return []Result{failed(name, shapes, err)}
	}
	train, err := trainstep.New(backend, ctx, cfg, model)
	if err != nil {
		return []Result{failed(name, shapes, err)}
	}
	defer train.Finalize()
	// The step's gradient, read by a graph of the same forward pass and loss over the same variables.
	gradient, err := context.NewExec(backend, ctx, func(ctx *context.Context, xs, labels *Node) []*Node {
		loss := trainstep.Loss(cfg.Loss, model.Forward(ctx, xs, true), labels)
		nodes := make([]*Node, len(vars))
		for i, v := range vars {
			nodes[i] = v.ValueGraph(xs.Graph())
		}
		return Gradient(loss, nodes...)
	})
	if err != nil {
		return []Result{failed(name, shapes, err)}
	}
	defer gradient.Finalize()

	law := c.newLaw()
	var gradAbs, gradRel, stepAbs, stepRel float64
	for step, lr := range stepLRs {
		t := step + 1
		theta := make([][]float64, len(vars))
		var flat []float64
		for i, v := range vars {
			theta[i] = tensors.MustCopyFlatData[float64](v.MustValue())
			flat = append(flat, theta[i]...)
		}
		images := func() *tensors.Tensor { return hostTensor(x, dtypes.Float64, false) }
		targets := func() *tensors.Tensor { return hostTensor(reference.FromData(lab, batch), dtypes.Float64, true) }
		outs, err := gradient.Exec(images(), targets())
		if err != nil {
			return []Result{failed(name, shapes, err)}
		}
		// The step feeds the runtime scalars (lr, the optimizer's HostScalars(t)) as float32.
		if _, err := train.Run(images(), targets(), trainstep.Scalars{LR: lr, Update: t}); err != nil {
			return []Result{failed(name, shapes, err)}
		}
		// The step's gradient against the reference.
		loss := func(p []float64) float64 {
			w := reference.FromData(p[:in*classes], in, classes)
			bias := make([]float64, classes)
			for off := in * classes; off < len(p); off += classes {
				for j := range bias {
					bias[j] += p[off+j]
				}
			}
			return reference.SoftmaxCrossEntropy(reference.Dense(x, w, bias), labInts, 0)
		}
		fd := reference.CentralDiffRichardson(loss, flat, fdStep)
		grads := make([][]float64, len(outs))
		var graphGrad []float64
		for i, o := range outs {
			grads[i] = tensors.MustCopyFlatData[float64](o)
			graphGrad = append(graphGrad, grads[i]...)
		}
		a, r := reference.Errors(graphGrad, fd)
		gradAbs, gradRel = max(gradAbs, a), max(gradRel, r)
		// The update law applied to that gradient.
		want := law.step(theta, grads, decay, lr, t)
		for i, v := range vars {
			a, r := reference.Errors(tensors.MustCopyFlatData[float64](v.MustValue()), want[i])
			stepAbs, stepRel = max(stepAbs, a), max(stepRel, r)
		}
	}
	update := within(name+"/update", shapes, stepAbs, stepRel, stepTol)
	if c.exercised != nil {
		note, ok := c.exercised(law)
		update.Note = note
		update.Pass = update.Pass && ok
	}
	return []Result{within(name+"/grad", shapes, gradAbs, gradRel, gradTol), update}
}

// f32 rounds a host scalar as the graph receives it.
func f32(v float64) float64 { return float64(float32(v)) }

// zeros returns zero slots shaped like theta.
func zeros(theta [][]float64) [][]float64 {
	out := make([][]float64, len(theta))
	for i := range theta {
		out[i] = make([]float64, len(theta[i]))
	}
	return out
}

// sgdLaw is the closed form: g = ∇ + wd·θ (decayed variables only); v' = μv + g; heavy ball
// θ' = θ − lr·v'; Nesterov θ' = θ − lr·(g + μv'); without momentum θ' = θ − lr·g.
type sgdLaw struct {
	momentum, wd float64
	nesterov     bool
	velocity     [][]float64
}

func (l *sgdLaw) step(theta, grads [][]float64, decay []bool, lr float64, _ int) [][]float64 {
	if l.velocity == nil {
		l.velocity = zeros(theta)
	}
	out := zeros(theta)
	for i := range theta {
		for j, th := range theta[i] {
			g := grads[i][j]
			if decay[i] {
				g += l.wd * th
			}
			step := g
			if l.momentum > 0 {
				l.velocity[i][j] = l.momentum*l.velocity[i][j] + g
				step = l.velocity[i][j]
				if l.nesterov {
					step = g + l.momentum*l.velocity[i][j]
				}
			}
			out[i][j] = th - lr*step
		}
	}
	return out
}

// sgdStepCase trains the softmax regression (weight decayed, bias not) with opt, an sgd config.
func sgdStepCase(name string, opt config.OptimizerConfig) stepCase {
	o := opt.Resolved()
	return stepCase{
		name:   name,
		vars:   regressionVars(),
		opt:    opt,
		newLaw: func() stepLaw { return &sgdLaw{momentum: o.Momentum, wd: o.WeightDecay, nesterov: o.Nesterov} },
	}
}

// regression is the step checks' model: logits = x·W + Σ vectors over the check's variables, which
// exist before the step is built; decay says, by scope and name, which ones weight decay applies to.
type regression struct {
	vars  []*context.Variable
	decay map[string]bool
}

// Forward implements trainstep.Model.
func (r regression) Forward(_ *context.Context, xs *Node, _ bool) *Node {
	g := xs.Graph()
	logits := Dot(xs, r.vars[0].ValueGraph(g))
	for _, v := range r.vars[1:] {
		logits = Add(logits, InsertAxes(v.ValueGraph(g), 0))
	}
	return logits
}

// ExcludedFromWeightDecay implements trainstep.Model.
func (r regression) ExcludedFromWeightDecay(scope, name string) bool {
	return !r.decay[context.JoinScope(scope, name)]
}
