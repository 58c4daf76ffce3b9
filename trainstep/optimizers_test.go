package trainstep

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
)

// lawCase is one variable of a law check: its initial value, whether it decays, and its gradient at
// each step (nil: a zero gradient).
type lawCase struct {
	name  string
	init  []float64
	decay bool
	grads [][]float64
}

// closedForm advances one variable by one step in float64, keeping its own slots in state.
type closedForm func(theta, g []float64, decay bool, lr float64, host []float64, state map[string][]float64) []float64

// runLaw feeds the cases' gradients to opt.Update for len(lrs) steps (float64 variables, float32 lr and
// host scalars as the loop feeds them) and compares every parameter after every step with law.
func runLaw(t *testing.T, opt Optimizer, cases []lawCase, lrs []float64, law closedForm) [][]float64 {
	t.Helper()
	ctx := context.New()
	vars := make([]*context.Variable, len(cases))
	decay := make([]bool, len(cases))
	for i, c := range cases {
		vars[i] = ctx.InAbsPath("/model/"+c.name).VariableWithValue("weight", tensors.FromFlatDataAndDimensions(append([]float64(nil), c.init...), len(c.init)))
		decay[i] = c.decay
	}
	nHost := len(opt.HostScalars(1))
	exec := context.MustNewExec(lossBackend(), ctx, func(ctx *context.Context, in []*Node) []*Node {
		grads := in[:len(cases)]
		lr := in[len(cases)]
		opt.Update(ctx, vars, grads, decay, lr, in[len(cases)+1:]...)
		return nil
	})
	defer exec.Finalize()
	want := make([][]float64, len(cases))
	states := make([]map[string][]float64, len(cases))
	for i, c := range cases {
		want[i] = append([]float64(nil), c.init...)
		states[i] = map[string][]float64{}
	}
	var trajectory [][]float64
	for step, lr := range lrs {
		var args []any
		for _, c := range cases {
			g := c.grads[step]
			if g == nil {
				g = make([]float64, len(c.init))
			}
			args = append(args, tensors.FromFlatDataAndDimensions(append([]float64(nil), g...), len(g)))
		}
		args = append(args, float32(lr))
		host := opt.HostScalars(step + 1)
		if len(host) != nHost {
			t.Fatalf("HostScalars(%d) has %d values, HostScalars(1) %d", step+1, len(host), nHost)
		}
		rounded := make([]float64, len(host))
		for i, h := range host {
			args = append(args, float32(h))
			rounded[i] = float64(float32(h)) // the closed form sees what the graph sees
		}
		if _, err := exec.Exec(args...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			g := c.grads[step]
			if g == nil {
				g = make([]float64, len(c.init))
			}
			want[i] = law(want[i], g, c.decay, float64(float32(lr)), rounded, states[i])
			got := tensors.MustCopyFlatData[float64](vars[i].MustValue())
			for j := range got {
				if math.Abs(got[j]-want[i][j]) > 1e-14*max(1, math.Abs(want[i][j])) {
					t.Fatalf("step %d %s[%d]: %.17g, closed form %.17g", step, c.name, j, got[j], want[i][j])
				}
			}
			if i == 0 {
				trajectory = append(trajectory, got)
			}
		}
	}
	return trajectory
}

func slot(state map[string][]float64, name string, n int, init float64) []float64 {
	if s, ok := state[name]; ok {
		return s
	}
	s := make([]float64, n)
	for i := range s {
		s[i] = init
	}
	state[name] = s
	return s
}

func normals(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// adamLaw is ARCHITECTURE.md's AdamW (decoupled) and, with lamb set, LAMB.
func adamLaw(beta1, beta2, eps, wd float64, lamb bool) closedForm {
	return func(theta, g []float64, decay bool, lr float64, host []float64, state map[string][]float64) []float64 {
		m, v := slot(state, "m", len(g), 0), slot(state, "v", len(g), 0)
		r := make([]float64, len(g))
		for i := range g {
			m[i] = beta1*m[i] + (1-beta1)*g[i]
			v[i] = beta2*v[i] + (1-beta2)*g[i]*g[i]
			r[i] = (m[i] / host[0]) / (math.Sqrt(v[i]/host[1]) + eps)
		}
		out := make([]float64, len(g))
		if !lamb {
			for i := range g {
				out[i] = theta[i] - lr*r[i]
				if decay {
					out[i] -= lr * (theta[i] * wd)
				}
			}
			return out
		}
		if !decay {
			for i := range g {
				out[i] = theta[i] - lr*r[i]
			}
			return out
		}
		var tn, rn float64
		for i := range g {
			r[i] += theta[i] * wd
			tn += theta[i] * theta[i]
			rn += r[i] * r[i]
		}
		tau := 1.0
		if tn > 0 && rn > 0 {
			tau = math.Sqrt(tn) / math.Sqrt(rn)
		}
		for i := range g {
			out[i] = theta[i] - (lr*tau)*r[i]
		}
		return out
	}
}

// rmspropLaw is ARCHITECTURE.md's RMSProp-TF and its lr-outside form (coupled weight decay).
func rmspropLaw(o RMSPropTF) closedForm {
	return func(theta, grad []float64, decay bool, lr float64, _ []float64, state map[string][]float64) []float64 {
		s, b := slot(state, "s", len(grad), 1), slot(state, "b", len(grad), 0)
		out := make([]float64, len(grad))
		for i := range grad {
			g := grad[i]
			if decay {
				g += theta[i] * o.WeightDecay
			}
			s[i] = o.Rho*s[i] + (1-o.Rho)*g*g
			if o.LROutside {
				b[i] = o.Momentum*b[i] + g/math.Sqrt(s[i]+o.Epsilon)
				out[i] = theta[i] - lr*b[i]
			} else {
				b[i] = o.Momentum*b[i] + lr*(g/math.Sqrt(s[i]+o.Epsilon))
				out[i] = theta[i] - b[i]
			}
		}
		return out
	}
}

// lawCases: a decayed weight, a no-decay bias and an all-zero weight, over five steps whose third
// gradient is zero (the zero weight's first too).
func lawCases() []lawCase {
	rng := rand.New(rand.NewPCG(5, 6))
	steps := 5
	mk := func(name string, init []float64, decay bool) lawCase {
		c := lawCase{name: name, init: init, decay: decay}
		for s := range steps {
			if s == 2 {
				c.grads = append(c.grads, nil)
				continue
			}
			c.grads = append(c.grads, normals(rng, len(init)))
		}
		return c
	}
	zero := mk("zero", make([]float64, 4), true)
	zero.grads[0] = nil // θ = 0 and g = 0: LAMB's ‖θ‖ and ‖r‖ are both 0 at the first step
	return []lawCase{mk("fc", normals(rng, 6), true), mk("bias", normals(rng, 3), false), zero}
}

var lawLRs = []float64{0.0625, 0.125, 0.125, 0.03125, 0.5}

func TestAdamWFollowsTheLaw(t *testing.T) {
	o := AdamW{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.05}
	if h := o.HostScalars(1); math.Abs(h[0]-0.1) > 1e-15 || math.Abs(h[1]-0.001) > 1e-15 {
		t.Errorf("bias corrections at t=1: %v, want [0.1 0.001]", h)
	}
	runLaw(t, o, lawCases(), lawLRs, adamLaw(o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay, false))
}

func TestLAMBFollowsTheLaw(t *testing.T) {
	o := LAMB{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-6, WeightDecay: 0.02}
	cases := lawCases()
	traj := runLaw(t, o, cases, lawLRs, adamLaw(o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay, true))
	// The trust ratio must matter: the first step of the decayed weight is not Adam's step.
	adam := adamLaw(o.Beta1, o.Beta2, o.Epsilon, 0, false)(cases[0].init, cases[0].grads[0], false, lawLRs[0], []float64{float64(float32(0.1)), float64(float32(0.001))}, map[string][]float64{})
	if math.Abs(adam[0]-traj[0][0]) < 1e-6 {
		t.Errorf("LAMB's first step equals Adam's (%g): the trust ratio had no effect", adam[0])
	}
}

func TestRMSPropTFFollowsTheLaw(t *testing.T) {
	for _, outside := range []bool{false, true} {
		o := RMSPropTF{Rho: 0.9, Momentum: 0.9, Epsilon: 1e-3, WeightDecay: 1e-2, LROutside: outside}
		runLaw(t, o, lawCases(), lawLRs, rmspropLaw(o))
	}
	// The two forms agree while lr is constant and part when it changes.
	traj := func(outside bool, lrs []float64) []float64 {
		o := RMSPropTF{Rho: 0.9, Momentum: 0.9, Epsilon: 1e-3, LROutside: outside}
		tr := runLaw(t, o, lawCases()[:1], lrs, rmspropLaw(o))
		return tr[len(tr)-1]
	}
	constant := []float64{0.0625, 0.0625, 0.0625, 0.0625, 0.0625}
	if a, b := traj(false, constant), traj(true, constant); math.Abs(a[0]-b[0]) > 1e-12 {
		t.Errorf("constant lr: TF form %v, lr-outside form %v; want equal", a[0], b[0])
	}
	if a, b := traj(false, lawLRs), traj(true, lawLRs); math.Abs(a[0]-b[0]) < 1e-6 {
		t.Errorf("changing lr: both forms give %v; want them to differ", a[0])
	}
}

func TestNewOptimizerResolvesDefaults(t *testing.T) {
	cfg := config.Defaults()
	cfg.Optimizer.Name = "rmsprop_tf"
	opt, err := NewOptimizer(cfg.Optimizer)
	if err != nil {
		t.Fatal(err)
	}
	if want := (RMSPropTF{Rho: 0.9, Momentum: 0.9, Epsilon: 1e-3}); opt != want {
		t.Errorf("rmsprop_tf defaults: %+v, want %+v", opt, want)
	}
	cfg.Optimizer = config.OptimizerConfig{Name: "adamw", LR: 1e-3, Momentum: -1, Beta1: -1, Beta2: 0.99, Epsilon: -1, Rho: -1, WeightDecay: 0.05}
	opt, err = NewOptimizer(cfg.Optimizer)
	if err != nil {
		t.Fatal(err)
	}
	if want := (AdamW{Beta1: 0.9, Beta2: 0.99, Epsilon: 1e-8, WeightDecay: 0.05}); opt != want {
		t.Errorf("adamw: %+v, want %+v", opt, want)
	}
	if sgd, _ := NewOptimizer(config.Defaults().Optimizer); sgd != (SGD{Momentum: 0.9}) {
		t.Errorf("default optimizer %+v, want SGD momentum 0.9", sgd)
	}
}

// TestOptimizersMatchPyTorch replays PyTorch's SGD (momentum, Nesterov) and AdamW trajectories from
// trainstep/testdata/torch_optimizers.json (scripts/torch_optimizer_fixtures.py): five float64 steps with
// a changing lr, a zero gradient, and the bias in the no-decay group.
func TestOptimizersMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_optimizers.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		LRs   []float64                         `json:"lrs"`
		Init  map[string][]float64              `json:"init"`
		Grads []map[string][]float64            `json:"grads"`
		Cases map[string][]map[string][]float64 `json:"cases"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	optimizers := map[string]Optimizer{
		"sgd_momentum": SGD{Momentum: 0.9, WeightDecay: 0.01},
		"sgd_nesterov": SGD{Momentum: 0.9, Nesterov: true, WeightDecay: 0.01},
		"adamw":        AdamW{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.05},
	}
	if len(fx.Cases) != len(optimizers) {
		t.Fatalf("fixture has %d cases", len(fx.Cases))
	}
	for name, opt := range optimizers {
		ctx := context.New()
		names := []string{"weight", "bias"}
		vars := make([]*context.Variable, 2)
		for i, n := range names {
			vars[i] = ctx.InAbsPath("/model/fc").VariableWithValue(n, tensors.FromFlatDataAndDimensions(append([]float64(nil), fx.Init[n]...), len(fx.Init[n])))
		}
		exec := context.MustNewExec(lossBackend(), ctx, func(ctx *context.Context, in []*Node) []*Node {
			opt.Update(ctx, vars, in[:2], []bool{true, false}, in[2], in[3:]...)
			return nil
		})
		var worst float64
		for step, lr := range fx.LRs {
			args := []any{fx.Grads[step]["weight"], fx.Grads[step]["bias"], lr} // float64 lr: the law at full precision
			for _, h := range opt.HostScalars(step + 1) {
				args = append(args, h)
			}
			if _, err := exec.Exec(args...); err != nil {
				t.Fatal(err)
			}
			for i, n := range names {
				got := tensors.MustCopyFlatData[float64](vars[i].MustValue())
				for j, want := range fx.Cases[name][step][n] {
					worst = max(worst, math.Abs(got[j]-want)/max(1, math.Abs(want)))
				}
			}
		}
		exec.Finalize()
		if worst > 1e-13 {
			t.Errorf("%s: largest difference from PyTorch %.2e", name, worst)
		}
		t.Logf("%s: largest difference from PyTorch over 5 steps %.2e", name, worst)
	}
}
