package verify

import (
	"math/rand/v2"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/trainer"
	"github.com/trainer/trainer/verify/reference"
)

// stepTol bounds the optimizer checks: the closed form and the graph do the same float64 arithmetic.
const stepTol = 1e-12

// stepChecks check one train step of the trainer's optimizers: the parameters after each of three
// steps equal the update law of ARCHITECTURE.md applied to the step's gradient, which is itself
// compared with central differences of the reference.
func stepChecks() []Check {
	const mu, wd = 0.9, 0.01
	return []Check{
		sgdStepCheck("sgd_step", trainer.SGD{WeightDecay: wd}),
		sgdStepCheck("sgd_heavy_ball_step", trainer.SGD{Momentum: mu, WeightDecay: wd}),
		sgdStepCheck("sgd_nesterov_step", trainer.SGD{Momentum: mu, Nesterov: true, WeightDecay: wd}),
	}
}

// sgdLaw is the closed form: g = ∇ + wd·θ (decayed variables only); v' = μv + g; heavy ball
// θ' = θ − lr·v'; Nesterov θ' = θ − lr·(g + μv'); without momentum θ' = θ − lr·g.
func sgdLaw(o trainer.SGD, theta, velocity, grad []float64, decay bool, lr float64) (newTheta, newVelocity []float64) {
	newTheta = make([]float64, len(theta))
	newVelocity = make([]float64, len(theta))
	for i := range theta {
		g := grad[i]
		if decay {
			g += o.WeightDecay * theta[i]
		}
		step := g
		if o.Momentum > 0 {
			newVelocity[i] = o.Momentum*velocity[i] + g
			step = newVelocity[i]
			if o.Nesterov {
				step = g + o.Momentum*newVelocity[i]
			}
		}
		newTheta[i] = theta[i] - lr*step
	}
	return newTheta, newVelocity
}

// sgdStepCheck trains a softmax regression (weight decayed, bias not) for three steps.
func sgdStepCheck(name string, opt trainer.SGD) Check {
	return Check{Name: name, Run: func(backend backends.Backend) []Result {
		const batch, in, classes, steps = 5, 4, 3, 3
		const lr = 0.0625 // exact in float32, the dtype the loop feeds
		rng := rand.New(rand.NewPCG(seed(name), 7))
		x := reference.FromData(normal(1)(rng, []int{batch, in}), batch, in)
		lab := labels(classes)(rng, []int{batch})
		labInts := make([]int, batch)
		for i, v := range lab {
			labInts[i] = int(v)
		}
		shapes := "x 5x4, fc/weight 4x3 (decayed), fc/bias 3 (not decayed)"

		ctx := context.New()
		w := ctx.InAbsPath("/model/fc").VariableWithValue("weight", tensors.FromFlatDataAndDimensions(normal(0.5)(rng, []int{in, classes}), in, classes))
		b := ctx.InAbsPath("/model/fc").VariableWithValue("bias", tensors.FromFlatDataAndDimensions(normal(0.5)(rng, []int{classes}), classes))
		vars := []*context.Variable{w, b}
		decay := []bool{true, false}
		exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, x, labels, lr *Node) []*Node {
			g := x.Graph()
			logits := Add(Dot(x, w.ValueGraph(g)), InsertAxes(b.ValueGraph(g), 0))
			loss := trainer.SoftmaxCrossEntropy(logits, labels, 0)
			grads := Gradient(loss, w.ValueGraph(g), b.ValueGraph(g))
			opt.Update(ctx, vars, grads, decay, lr)
			return grads
		})
		if err != nil {
			return []Result{failed(name, shapes, err)}
		}
		defer exec.Finalize()

		velocity := [][]float64{make([]float64, in*classes), make([]float64, classes)}
		var gradAbs, gradRel, stepAbs, stepRel float64
		for range steps {
			theta := [][]float64{tensors.MustCopyFlatData[float64](w.MustValue()), tensors.MustCopyFlatData[float64](b.MustValue())}
			outs, err := exec.Exec(hostTensor(x, dtypes.Float64, false), hostTensor(reference.FromData(lab, batch), dtypes.Float64, true), float32(lr))
			if err != nil {
				return []Result{failed(name, shapes, err)}
			}
			// The step's gradient against the reference.
			loss := func(wb []float64) float64 {
				wt := reference.FromData(wb[:in*classes], in, classes)
				return reference.SoftmaxCrossEntropy(reference.Dense(x, wt, wb[in*classes:]), labInts, 0)
			}
			fd := reference.CentralDiffRichardson(loss, append(append([]float64(nil), theta[0]...), theta[1]...), fdStep)
			graphGrad := append(tensors.MustCopyFlatData[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])...)
			a, r := reference.Errors(graphGrad, fd)
			gradAbs, gradRel = max(gradAbs, a), max(gradRel, r)
			// The update law applied to that gradient.
			for i, v := range vars {
				wantTheta, wantVel := sgdLaw(opt, theta[i], velocity[i], tensors.MustCopyFlatData[float64](outs[i]), decay[i], lr)
				a, r := reference.Errors(tensors.MustCopyFlatData[float64](v.MustValue()), wantTheta)
				stepAbs, stepRel = max(stepAbs, a), max(stepRel, r)
				velocity[i] = wantVel
			}
		}
		return []Result{
			within(name+"/grad", shapes, gradAbs, gradRel, gradTol),
			within(name+"/update", shapes, stepAbs, stepRel, stepTol),
		}
	}}
}
