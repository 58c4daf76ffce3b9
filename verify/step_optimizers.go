package verify

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/config"
)

// optimizerStepChecks are the step checks of the adaptive optimizers and of global-norm clipping, with
// the hyperparameters of the book's recipes where they have them (weight decays raised so the decay
// term shows).
func optimizerStepChecks() []Check {
	return []Check{
		adamWStepCase("adamw_step", adamWConfig()).check(),
		lambStepCase("lamb_step", lambConfig()).check(),
		rmspropStepCase("rmsprop_tf_step", rmspropConfig(false)).check(),
		rmspropStepCase("rmsprop_tf_lr_outside_step", rmspropConfig(true)).check(),
		{Name: "clip_global_norm_step", Run: func(b backends.Backend) []Result {
			sgd := heavyBallConfig()
			// The gradient norm of this regression is about 0.8: 0.05 clips every step, 100 none.
			return append(clipStepCase("clip_global_norm_step/above", sgd, 0.05, true).run(b),
				clipStepCase("clip_global_norm_step/below", sgd, 100, false).run(b)...)
		}},
	}
}

// The optimizers of the checks, with the seeds' hyperparameters.

func adamWConfig() config.OptimizerConfig {
	o := optimizer("adamw")
	o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay = 0.9, 0.999, 1e-8, 0.05
	return o
}

func lambConfig() config.OptimizerConfig {
	o := optimizer("lamb")
	o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay = 0.9, 0.999, 1e-6, 0.02
	return o
}

func rmspropConfig(lrOutside bool) config.OptimizerConfig {
	o := optimizer("rmsprop_tf")
	o.Rho, o.Momentum, o.Epsilon, o.WeightDecay, o.LROutside = 0.9, 0.9, 1e-3, 1e-2, lrOutside
	return o
}

func heavyBallConfig() config.OptimizerConfig {
	o := optimizer("sgd")
	o.Momentum, o.WeightDecay = 0.9, 0.01
	return o
}

// adamLaw is AdamW's and LAMB's closed form: m' = β1m + (1−β1)g; v' = β2v + (1−β2)g²;
// d = (m'/b1)/(sqrt(v'/b2)+ε) with b1 = 1−β1^t, b2 = 1−β2^t. AdamW: θ' = θ − lr·d − lr·wd·θ.
// LAMB: r = d + wd·θ; τ = ‖θ‖/‖r‖ (1 when either is 0); θ' = θ − lr·τ·r; the no-decay group steps as
// Adam (r = d, τ = 1).
type adamLaw struct {
	beta1, beta2, eps, wd float64
	lamb                  bool
	// corrections gives (b1, b2) of update t as the graph receives them; trust is LAMB's τ. Tests
	// replace them with wrong laws.
	corrections func(t int) (b1, b2 float64)
	trust       func(thetaNorm, rNorm float64) float64
	m, v        [][]float64
	// taus records LAMB's τ per update and variable (NaN for the no-decay group).
	taus [][]float64
}

func newAdamLaw(beta1, beta2, eps, wd float64, lamb bool) *adamLaw {
	return &adamLaw{
		beta1: beta1, beta2: beta2, eps: eps, wd: wd, lamb: lamb,
		corrections: func(t int) (float64, float64) {
			return f32(1 - math.Pow(beta1, float64(t))), f32(1 - math.Pow(beta2, float64(t)))
		},
		trust: func(thetaNorm, rNorm float64) float64 {
			if thetaNorm == 0 || rNorm == 0 {
				return 1
			}
			return thetaNorm / rNorm
		},
	}
}

func (l *adamLaw) step(theta, grads [][]float64, decay []bool, lr float64, t int) [][]float64 {
	if l.m == nil {
		l.m, l.v = zeros(theta), zeros(theta)
	}
	b1, b2 := l.corrections(t)
	out := zeros(theta)
	taus := make([]float64, len(theta))
	for i := range theta {
		r := make([]float64, len(theta[i]))
		for j, g := range grads[i] {
			l.m[i][j] = l.beta1*l.m[i][j] + (1-l.beta1)*g
			l.v[i][j] = l.beta2*l.v[i][j] + (1-l.beta2)*g*g
			r[j] = (l.m[i][j] / b1) / (math.Sqrt(l.v[i][j]/b2) + l.eps)
		}
		taus[i] = math.NaN()
		switch {
		case !l.lamb:
			for j, th := range theta[i] {
				out[i][j] = th - lr*r[j]
				if decay[i] {
					out[i][j] -= lr * l.wd * th
				}
			}
		case !decay[i]:
			for j, th := range theta[i] {
				out[i][j] = th - lr*r[j]
			}
		default:
			var thetaSq, rSq float64
			for j, th := range theta[i] {
				r[j] += l.wd * th
				thetaSq += th * th
				rSq += r[j] * r[j]
			}
			taus[i] = l.trust(math.Sqrt(thetaSq), math.Sqrt(rSq))
			for j, th := range theta[i] {
				out[i][j] = th - lr*taus[i]*r[j]
			}
		}
	}
	l.taus = append(l.taus, taus)
	return out
}

func adamWStepCase(name string, opt config.OptimizerConfig) stepCase {
	o := opt.Resolved()
	return stepCase{
		name:   name,
		vars:   regressionVars(),
		opt:    opt,
		newLaw: func() stepLaw { return newAdamLaw(o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay, false) },
	}
}

// lambStepCase adds to the regression a decayed [classes] vector that starts at zero: its first update
// has ‖θ‖ = 0, so τ = 1; the bias is the no-decay group, stepped as Adam.
func lambStepCase(name string, opt config.OptimizerConfig) stepCase {
	zero := func(_ *rand.Rand, dims []int) []float64 { return make([]float64, prod(dims)) }
	o := opt.Resolved()
	return stepCase{
		name:   name,
		vars:   regressionVars(stepVar{scope: "/model/fc", name: "offset", init: zero, decay: true}),
		opt:    opt,
		newLaw: func() stepLaw { return newAdamLaw(o.Beta1, o.Beta2, o.Epsilon, o.WeightDecay, true) },
		exercised: func(l stepLaw) (string, bool) {
			law, ok := l.(*adamLaw)
			if !ok {
				return "", true
			}
			// The weight's τ must differ from 1 (else the trust ratio is untested), the zero tensor's
			// first τ must be 1, and its later ones not.
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, taus := range law.taus {
				lo, hi = min(lo, taus[0]), max(hi, taus[0])
			}
			offset := law.taus[0][2]
			later := law.taus[len(law.taus)-1][2]
			note := fmt.Sprintf("τ(weight) %.3g–%.3g; τ(offset) %.3g at its zero start, then %.3g", lo, hi, offset, later)
			return note, offset == 1 && later != 1 && (lo < 0.99 || hi > 1.01)
		},
	}
}

// rmspropLaw is RMSProp-TF: g = ∇ + wd·θ (decayed group); s' = ρs + (1−ρ)g², s starting at s0 = 1;
// b' = μb + lr·g/sqrt(s'+ε), θ' = θ − b'; lr outside: b' = μb + g/sqrt(s'+ε), θ' = θ − lr·b'.
type rmspropLaw struct {
	rho, momentum, eps, wd, s0 float64
	lrOutside                  bool
	s, buf                     [][]float64
}

func (l *rmspropLaw) step(theta, grads [][]float64, decay []bool, lr float64, _ int) [][]float64 {
	if l.s == nil {
		l.s, l.buf = zeros(theta), zeros(theta)
		for i := range l.s {
			for j := range l.s[i] {
				l.s[i][j] = l.s0
			}
		}
	}
	out := zeros(theta)
	for i := range theta {
		for j, th := range theta[i] {
			g := grads[i][j]
			if decay[i] {
				g += l.wd * th
			}
			l.s[i][j] = l.rho*l.s[i][j] + (1-l.rho)*g*g
			step := g / math.Sqrt(l.s[i][j]+l.eps)
			if l.lrOutside {
				l.buf[i][j] = l.momentum*l.buf[i][j] + step
				out[i][j] = th - lr*l.buf[i][j]
			} else {
				l.buf[i][j] = l.momentum*l.buf[i][j] + lr*step
				out[i][j] = th - l.buf[i][j]
			}
		}
	}
	return out
}

func rmspropStepCase(name string, opt config.OptimizerConfig) stepCase {
	o := opt.Resolved()
	return stepCase{
		name: name,
		vars: regressionVars(),
		opt:  opt,
		newLaw: func() stepLaw {
			return &rmspropLaw{rho: o.Rho, momentum: o.Momentum, eps: o.Epsilon, wd: o.WeightDecay, s0: 1, lrOutside: o.LROutside}
		},
	}
}

// clipLaw scales every gradient by min(1, c/(sqrt(Σg²)+ε)), one Σ over all variables and ε = 1e-6
// (PyTorch's clip_grad_norm_), then applies inner.
type clipLaw struct {
	c       float64
	inner   stepLaw
	factors []float64
}

func (l *clipLaw) step(theta, grads [][]float64, decay []bool, lr float64, t int) [][]float64 {
	var sq float64
	for _, g := range grads {
		for _, v := range g {
			sq += v * v
		}
	}
	factor := min(1, l.c/(math.Sqrt(sq)+1e-6))
	l.factors = append(l.factors, factor)
	clipped := zeros(grads)
	for i := range grads {
		for j, v := range grads[i] {
			clipped[i][j] = v * factor
		}
	}
	return l.inner.step(theta, clipped, decay, lr, t)
}

// clipStepCase clips at c (optimizer.clip_grad_norm) before SGD, as the step does (after
// accumulation, before the optimizer adds weight decay); clips says whether every step must be above
// the threshold or none.
func clipStepCase(name string, opt config.OptimizerConfig, c float64, clips bool) stepCase {
	opt.ClipGradNorm = c
	o := opt.Resolved()
	return stepCase{
		name: name,
		vars: regressionVars(),
		opt:  opt,
		newLaw: func() stepLaw {
			return &clipLaw{c: c, inner: &sgdLaw{momentum: o.Momentum, wd: o.WeightDecay, nesterov: o.Nesterov}}
		},
		exercised: func(l stepLaw) (string, bool) {
			law, ok := l.(*clipLaw)
			if !ok {
				return "", true
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, f := range law.factors {
				lo, hi = min(lo, f), max(hi, f)
			}
			note := fmt.Sprintf("c %g, factor %.3g–%.3g", c, lo, hi)
			if clips {
				return note, hi < 1
			}
			return note, lo == 1
		},
	}
}
