package trainstep

// Step certificates for gradient accumulation and the EMA, the counterparts of verify's *_step rows,
// run on the whole step (accumulateGradients, gateUpdates and updateEMA inside it). The closed forms
// below are written independently of the step's code: the gradient of the softmax regression is the
// analytic (softmax − onehot)/N, and the laws are ARCHITECTURE.md's, in float64 on the host.

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/schedule"
)

const (
	vrIn, vrClasses = testnets.RegressionIn, testnets.RegressionClasses
	// verifyStepTol: graph and closed form do the same float64 arithmetic, up to the order of sums.
	verifyStepTol = 1e-12
)

// verifyLRs change at every step and are exact in float32, the dtype the step is fed.
var verifyLRs = []float64{0.0625, 0.03125, 0.09375}

// regressionBatch draws n float32 images of 2x2x1 and labels in [0, 3).
func regressionBatch(rng *rand.Rand, n int) (x []float32, y []int32) {
	x, y = make([]float32, n*vrIn), make([]int32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range y {
		y[i] = int32(rng.IntN(vrClasses))
	}
	return x, y
}

// regressionGrad is the gradient of the mean cross-entropy of the regression: with p = softmax(xW + b),
// dz = (p − onehot)/n, dW = xᵀ·dz, db = Σ_rows dz.
func regressionGrad(w, b []float64, x []float32, y []int32) (dw, db []float64) {
	n := len(y)
	dw, db = make([]float64, vrIn*vrClasses), make([]float64, vrClasses)
	for r := range n {
		z := make([]float64, vrClasses)
		zmax := math.Inf(-1)
		for c := range vrClasses {
			z[c] = b[c]
			for i := range vrIn {
				z[c] += float64(x[r*vrIn+i]) * w[i*vrClasses+c]
			}
			zmax = max(zmax, z[c])
		}
		var sum float64
		for c := range z {
			z[c] = math.Exp(z[c] - zmax)
			sum += z[c]
		}
		for c := range vrClasses {
			dz := z[c] / sum
			if int32(c) == y[r] {
				dz--
			}
			dz /= float64(n)
			db[c] += dz
			for i := range vrIn {
				dw[i*vrClasses+c] += float64(x[r*vrIn+i]) * dz
			}
		}
	}
	return dw, db
}

// openRegression builds the float64 step of the regression (testnets.Regression) for cfg's optimizer,
// accumulation and EMA, with its variables created before the first step (so the values before it
// are known).
func openRegression(t *testing.T, cfg config.Config) (*context.Context, *Step) {
	t.Helper()
	cfg.Net.Name = testnets.Regression
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Net.Precision = "float64" // verification dtype: not a recipe value, so set after validation
	b, err := backend.Open(cfg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	net, err := NetOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := NewContext(cfg)
	model := primed(t, b, ctx, net, tensors.FromFlatDataAndDimensions(make([]float32, vrIn), 1, 2, 2, 1))
	return ctx, testStepOn(t, b, ctx, cfg, model)
}

// regressionParams reads fc/weight and fc/bias under prefix ("/model" or "/ema/model") as float64.
func regressionParams(t *testing.T, ctx *context.Context, prefix string) [2][]float64 {
	t.Helper()
	var out [2][]float64
	for i, name := range []string{"weight", "bias"} {
		v := ctx.GetVariableByScopeAndName(prefix+"/fc", name)
		if v == nil {
			t.Fatalf("no variable %s/fc/%s", prefix, name)
		}
		out[i] = tensors.MustCopyFlatData[float64](v.MustValue())
	}
	return out
}

// slotValues reads every optimizer slot as float64.
func slotValues(ctx *context.Context) map[string][]float64 {
	out := map[string][]float64{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if strings.HasPrefix(v.Scope(), "/optimizer/") {
			out[v.ScopeAndName()] = tensors.MustCopyFlatData[float64](v.MustValue())
		}
	})
	return out
}

func sameSlots(a, b map[string][]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for name, va := range a {
		vb := b[name]
		if len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}

// maxRelErr is max |got − want| / max(|want|, 1e-3·max|want|), verify's measure.
func maxRelErr(got, want [2][]float64) float64 {
	var scale float64
	for _, w := range want {
		for _, v := range w {
			scale = max(scale, math.Abs(v))
		}
	}
	var worst float64
	for i := range want {
		for j, v := range want[i] {
			worst = max(worst, math.Abs(got[i][j]-v)/max(math.Abs(v), 1e-3*scale))
		}
	}
	return worst
}

// accLaw is a closed form of one optimizer step from the gradients of its micro-batches.
type accLaw func(theta [2][]float64, micro [][2][]float64, lr float64, t int) [2][]float64

// meanGrad is G/k for G = Σ_j g_j (or G itself with sum set: a wrong law).
func meanGrad(micro [][2][]float64, sum bool) [2][]float64 {
	var out [2][]float64
	for i := range out {
		out[i] = make([]float64, len(micro[0][i]))
		for _, g := range micro {
			for j, v := range g[i] {
				out[i][j] += v
			}
		}
		if !sum {
			for j := range out[i] {
				out[i][j] /= float64(len(micro))
			}
		}
	}
	return out
}

// clipGrad scales g by min(1, c/(‖g‖+1e-6)), one norm over both tensors (c = 0: off).
func clipGrad(g [2][]float64, c float64) ([2][]float64, float64) {
	if c == 0 {
		return g, 1
	}
	var sq float64
	for _, t := range g {
		for _, v := range t {
			sq += v * v
		}
	}
	f := min(1, c/(math.Sqrt(sq)+1e-6))
	var out [2][]float64
	for i := range g {
		out[i] = make([]float64, len(g[i]))
		for j, v := range g[i] {
			out[i][j] = v * f
		}
	}
	return out, f
}

// heavyBallLaw: Ĝ = clip(G/k); g = Ĝ + wd·θ (weight only); v' = μv + g; θ' = θ − lr·v'. With sum or
// clipEach set it is one of the wrong laws (the sum G, or each micro-batch clipped before the mean).
func heavyBallLaw(mu, wd, clip float64, sum, clipEach bool, factors *[]float64) accLaw {
	var vel [2][]float64
	return func(theta [2][]float64, micro [][2][]float64, lr float64, _ int) [2][]float64 {
		if vel[0] == nil {
			vel = [2][]float64{make([]float64, len(theta[0])), make([]float64, len(theta[1]))}
		}
		if clipEach {
			clipped := make([][2][]float64, len(micro))
			for j, g := range micro {
				clipped[j], _ = clipGrad(g, clip)
			}
			micro, clip = clipped, 0
		}
		g, f := clipGrad(meanGrad(micro, sum), clip)
		if factors != nil {
			*factors = append(*factors, f)
		}
		var out [2][]float64
		for i := range theta {
			out[i] = make([]float64, len(theta[i]))
			for j, th := range theta[i] {
				gi := g[i][j]
				if i == 0 {
					gi += wd * th
				}
				vel[i][j] = mu*vel[i][j] + gi
				out[i][j] = th - lr*vel[i][j]
			}
		}
		return out
	}
}

// adamWLaw: G/k, then m' = β1m + (1−β1)G; v' = β2v + (1−β2)G²; θ' = θ − lr·(m'/b1)/(sqrt(v'/b2)+ε) −
// lr·wd·θ (weight only), with b1 = 1−β1^t, b2 = 1−β2^t for optimizer step t (fed as float32). With
// perMicro set it is the wrong law that updates once per micro-batch.
func adamWLaw(b1, b2, eps, wd float64, perMicro bool) accLaw {
	var m, v [2][]float64
	micros := 0
	one := func(theta, g [2][]float64, lr float64, t int) [2][]float64 {
		if m[0] == nil {
			m = [2][]float64{make([]float64, len(theta[0])), make([]float64, len(theta[1]))}
			v = [2][]float64{make([]float64, len(theta[0])), make([]float64, len(theta[1]))}
		}
		c1 := float64(float32(1 - math.Pow(b1, float64(t))))
		c2 := float64(float32(1 - math.Pow(b2, float64(t))))
		var out [2][]float64
		for i := range theta {
			out[i] = make([]float64, len(theta[i]))
			for j, th := range theta[i] {
				m[i][j] = b1*m[i][j] + (1-b1)*g[i][j]
				v[i][j] = b2*v[i][j] + (1-b2)*g[i][j]*g[i][j]
				out[i][j] = th - lr*(m[i][j]/c1)/(math.Sqrt(v[i][j]/c2)+eps)
				if i == 0 {
					out[i][j] -= lr * wd * th
				}
			}
		}
		return out
	}
	return func(theta [2][]float64, micro [][2][]float64, lr float64, t int) [2][]float64 {
		if !perMicro {
			return one(theta, meanGrad(micro, false), lr, t)
		}
		for _, g := range micro {
			micros++
			theta = one(theta, g, lr, micros)
		}
		return theta
	}
}

// accumulationRun trains the regression for len(verifyLRs) optimizer steps of k micro-batches of n
// (the same examples in the same order for every k) and returns the worst relative error of the
// weights against law after each step. It fails the test if a micro-batch before the last moves the
// weights or the optimizer slots.
func accumulationRun(t *testing.T, o config.OptimizerConfig, k, n int, law accLaw) float64 {
	t.Helper()
	cfg := config.Defaults()
	cfg.Name, cfg.Optimizer = "verify_acc", o
	cfg.Optimizer.AccumulateSteps = k
	ctx, step := openRegression(t, cfg)
	rng := rand.New(rand.NewPCG(11, 12))
	var worst float64
	for st, lr := range verifyLRs {
		x, y := regressionBatch(rng, k*n)
		theta := regressionParams(t, ctx, "/model")
		slots := slotValues(ctx)
		var micro [][2][]float64
		for j := range k {
			xs, ys := x[j*n*vrIn:(j+1)*n*vrIn], y[j*n:(j+1)*n]
			dw, db := regressionGrad(theta[0], theta[1], xs, ys)
			micro = append(micro, [2][]float64{dw, db})
			sc := Scalars{LR: lr, Update: st + 1, Apply: j == k-1}
			if j > 0 {
				sc.Keep = 1
			}
			images := tensors.FromFlatDataAndDimensions(append([]float32(nil), xs...), n, 2, 2, 1)
			labels := tensors.FromFlatDataAndDimensions(append([]int32(nil), ys...), n)
			if _, err := step.Run(images, labels, sc); err != nil {
				t.Fatal(err)
			}
			if j < k-1 {
				now := regressionParams(t, ctx, "/model")
				if maxRelErr(now, theta) != 0 || (st > 0 && !sameSlots(slotValues(ctx), slots)) {
					t.Fatalf("step %d: micro-batch %d of %d moved the weights or the slots", st+1, j+1, k)
				}
			}
		}
		worst = max(worst, maxRelErr(regressionParams(t, ctx, "/model"), law(theta, micro, lr, st+1)))
	}
	return worst
}

// TestVerifyAccumulationStep: k = 2 micro-batches of N = 3 are one step on the batch of 6 (the mean
// gradient G/k), for SGD heavy ball with weight decay and clipping (clipped after the mean), and for
// AdamW (bias corrections counting optimizer steps); both runs match the closed form to 1e-12, and
// the wrong laws (the sum G, clipping each micro-batch, one update per micro-batch) fail.
func TestVerifyAccumulationStep(t *testing.T) {
	const k, n = 2, 3
	sgd := config.OptimizerConfig{Name: "sgd", LR: 0.0625, Momentum: 0.9, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
		WeightDecay: 0.01}
	clipped := sgd
	clipped.ClipGradNorm = 0.3
	adamw := config.OptimizerConfig{Name: "adamw", LR: 0.0625, Momentum: -1, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, Rho: -1,
		WeightDecay: 0.05}
	var factors []float64
	for _, c := range []struct {
		what  string
		o     config.OptimizerConfig
		law   func() accLaw
		wrong bool
	}{
		{"sgd heavy ball + decay", sgd, func() accLaw { return heavyBallLaw(0.9, 0.01, 0, false, false, nil) }, false},
		{"sgd heavy ball + decay + clip", clipped, func() accLaw { return heavyBallLaw(0.9, 0.01, 0.3, false, false, &factors) }, false},
		{"adamw", adamw, func() accLaw { return adamWLaw(0.9, 0.999, 1e-8, 0.05, false) }, false},
		// Clipping and Adam are blind to the gradient's scale, so the sum is caught on plain SGD.
		{"wrong: sgd at the sum G", sgd, func() accLaw { return heavyBallLaw(0.9, 0.01, 0, true, false, nil) }, true},
		{"wrong: sgd clipping each micro-batch", clipped, func() accLaw { return heavyBallLaw(0.9, 0.01, 0.3, false, true, nil) }, true},
		{"wrong: adamw updating per micro-batch", adamw, func() accLaw { return adamWLaw(0.9, 0.999, 1e-8, 0.05, true) }, true},
	} {
		factors = nil
		acc := accumulationRun(t, c.o, k, n, c.law())
		if c.wrong {
			t.Logf("%-40s k=%d x %d against the law: %.2e", c.what, k, n, acc)
			if acc < 1e-4 {
				t.Errorf("%s: a wrong law agrees with the accumulated step to %.2e", c.what, acc)
			}
			continue
		}
		big := accumulationRun(t, c.o, 1, k*n, c.law())
		t.Logf("%-40s k=%d x %d: %.2e; one batch of %d: %.2e (max rel err against the law)", c.what, k, n, acc, k*n, big)
		if acc > verifyStepTol || big > verifyStepTol {
			t.Errorf("%s: accumulated %.2e, large batch %.2e, want ≤ %g", c.what, acc, big, verifyStepTol)
		}
		if c.o.ClipGradNorm > 0 {
			t.Logf("%-40s clip factors of the accumulated run: %.3g", c.what, factors[:len(verifyLRs)])
			if min(factors[0], factors[1], factors[2]) >= 1 {
				t.Errorf("%s: clipping never engaged (factors %v): lower the threshold", c.what, factors)
			}
		}
	}
}

// TestVerifyEMAStep: after each step the shadow is e' = d·e + (1−d)·θ', θ' the weights the step just
// wrote, d = min(decay, (1+t)/(10+t)) for the 0-based optimizer step t (0.1, 2/11, then the cap 0.2),
// starting from the weights before the first step; the wrong laws fail.
func TestVerifyEMAStep(t *testing.T) {
	const decay = 0.2
	type emaLaw struct {
		what  string
		d     func(t int) float64
		fresh bool // e starts at the weights before the first step (else at 0)
		post  bool // averages θ' (else θ before the step)
		wrong bool
	}
	warm := func(t int) float64 { return min(decay, (1+float64(t))/(10+float64(t))) }
	laws := []emaLaw{
		{"law", warm, true, true, false},
		{"wrong: no warmup cap", func(int) float64 { return decay }, true, true, true},
		{"wrong: averaging the weights before the step", warm, true, false, true},
		{"wrong: shadow starting at zero", warm, false, true, true},
	}
	if warm(2) != decay || warm(1) >= decay {
		t.Fatalf("the steps must reach the cap at the third step only: d = %g, %g, %g", warm(0), warm(1), warm(2))
	}
	cfg := config.Defaults()
	cfg.Name = "verify_ema"
	cfg.Optimizer = config.OptimizerConfig{Name: "sgd", LR: 0.0625, Momentum: 0.9, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1, WeightDecay: 0.01}
	cfg.Optimizer.AccumulateSteps = 1
	cfg.EMA = config.EMAConfig{Decay: decay, Warmup: true}
	ctx, step := openRegression(t, cfg)
	rng := rand.New(rand.NewPCG(13, 14))
	before := regressionParams(t, ctx, "/model")
	shadows := make([][2][]float64, len(laws))
	for i, l := range laws {
		for p := range before {
			shadows[i][p] = make([]float64, len(before[p]))
			if l.fresh {
				copy(shadows[i][p], before[p])
			}
		}
	}
	worst := make([]float64, len(laws))
	for st, lr := range verifyLRs {
		x, y := regressionBatch(rng, 4)
		// The loop feeds EMADecay(cfg.EMA, st); the law computes its own d.
		sc := Scalars{LR: lr, Update: st + 1, EMADecay: schedule.EMADecay(cfg.EMA, st), EMAFresh: st == 0}
		images := tensors.FromFlatDataAndDimensions(x, 4, 2, 2, 1)
		if _, err := step.Run(images, tensors.FromFlatDataAndDimensions(y, 4), sc); err != nil {
			t.Fatal(err)
		}
		after := regressionParams(t, ctx, "/model")
		got := regressionParams(t, ctx, EMAScope+"/model")
		for i, l := range laws {
			d := float64(float32(l.d(st))) // fed as float32
			src := after
			if !l.post {
				src = before
			}
			for p := range src {
				for j, th := range src[p] {
					shadows[i][p][j] = d*shadows[i][p][j] + (1-d)*th
				}
			}
			worst[i] = max(worst[i], maxRelErr(got, shadows[i]))
		}
		before = after
	}
	for i, l := range laws {
		t.Logf("%-45s max rel err of the shadow: %.2e", l.what, worst[i])
		if !l.wrong && worst[i] > verifyStepTol {
			t.Errorf("%s: shadow differs from e' = d·e + (1−d)·θ' by %.2e (relative), want ≤ %g", l.what, worst[i], verifyStepTol)
		}
		if l.wrong && worst[i] < 1e-4 {
			t.Errorf("%s: a wrong law agrees with the shadow to %.2e", l.what, worst[i])
		}
	}
}
