package trainstep

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/schedule"
)

func randomBatch(rng *rand.Rand, n int) (*tensors.Tensor, *tensors.Tensor) {
	images := make([]float32, n*28*28)
	labels := make([]int32, n)
	for i := range images {
		images[i] = float32(rng.NormFloat64())
	}
	for i := range labels {
		labels[i] = int32(rng.IntN(10))
	}
	return tensors.FromFlatDataAndDimensions(images, n, 28, 28, 1), tensors.FromFlatDataAndDimensions(labels, n)
}

// sliceBatch cuts examples [from, to) out of a batch.
func sliceBatch(images, labels *tensors.Tensor, from, to int) (*tensors.Tensor, *tensors.Tensor) {
	img := tensors.MustCopyFlatData[float32](images)
	lab := tensors.MustCopyFlatData[int32](labels)
	const px = 28 * 28
	return tensors.FromFlatDataAndDimensions(img[from*px:to*px], to-from, 28, 28, 1),
		tensors.FromFlatDataAndDimensions(lab[from:to], to-from)
}

// values returns the flat float32 values of every variable whose scope starts with prefix.
func values(ctx *context.Context, prefix string) map[string][]float32 {
	out := map[string][]float32{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if strings.HasPrefix(v.Scope(), prefix) && v.DType().IsFloat() {
			out[v.ScopeAndName()] = tensors.MustCopyFlatData[float32](v.MustValue())
		}
	})
	return out
}

func TestClipGlobalNorm(t *testing.T) {
	// Gradients (3, 4) and (12): global norm 13.
	for _, c := range []struct{ clip, factor float64 }{
		{20, 1},                         // below the threshold: untouched
		{13 + clipEpsilon, 1},           // at it: c/(‖g‖+ε) = 1
		{6.5, 6.5 / (13 + clipEpsilon)}, // above: scaled to norm c (up to ε)
	} {
		exec := MustNewExec(lossBackend(), func(a, b *Node) []*Node { return ClipGlobalNorm([]*Node{a, b}, c.clip) })
		outs := exec.MustExec([]float64{3, 4}, []float64{12})
		got := append(tensors.MustCopyFlatData[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])...)
		for i, g := range []float64{3, 4, 12} {
			if want := g * c.factor; math.Abs(got[i]-want) > 1e-15*want {
				t.Errorf("clip %g: element %d = %.17g, want %.17g", c.clip, i, got[i], want)
			}
		}
		exec.Finalize()
	}
}

func TestBCETargetsAndDivisor(t *testing.T) {
	exec := MustNewExec(lossBackend(), func(labels *Node) []*Node {
		return []*Node{BCETargets(labels, 4, 0.1, 0, dtypes.Float64), BCETargets(labels, 4, 0.1, 0.2, dtypes.Float64)}
	})
	defer exec.Finalize()
	outs := exec.MustExec([]int32{2, 0})
	soft := tensors.MustCopyFlatData[float64](outs[0])
	hard := tensors.MustCopyFlatData[float64](outs[1])
	// timm: off = 0.1/4 = 0.025, on = 1 − 0.1 + 0.025 = 0.925; threshold 0.2 keeps only the label.
	wantSoft := []float64{0.025, 0.025, 0.925, 0.025, 0.925, 0.025, 0.025, 0.025}
	wantHard := []float64{0, 0, 1, 0, 1, 0, 0, 0}
	for i := range wantSoft {
		if math.Abs(soft[i]-wantSoft[i]) > 1e-15 || hard[i] != wantHard[i] {
			t.Fatalf("targets %v / %v, want %v / %v", soft, hard, wantSoft, wantHard)
		}
	}

	// The batch divisor is K times the per-element mean; the loss value is checked against the
	// softplus form on the host.
	logits := [][]float32{{1.5, -2, 0.25, 0}, {-0.5, 3, 0, -1}}
	var sum float64
	for i, row := range logits {
		for j, x := range row {
			tgt := wantSoft[i*4+j]
			sum += math.Max(float64(x), 0) - float64(x)*tgt + math.Log1p(math.Exp(-math.Abs(float64(x))))
		}
	}
	for _, c := range []struct {
		divisor string
		want    float64
	}{{"elements", sum / 8}, {"batch", sum / 2}} {
		cfg := config.Defaults()
		cfg.Loss = config.LossConfig{Name: "bce", LabelSmoothing: 0.1, BCEDivisor: c.divisor}
		e := MustNewExec(lossBackend(), func(l, y *Node) *Node { return Loss(cfg.Loss, l, y) })
		got := float64(tensors.ToScalar[float32](e.MustExec(logits, []int32{2, 0})[0]))
		e.Finalize()
		if math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("divisor %s: loss %.7g, want %.7g", c.divisor, got, c.want)
		}
	}
}

// TestAccumulationEqualsTheLargeBatch: k micro-batches of N are one step on k·N (a net without
// BatchNorm), for SGD with momentum, decay and clipping, and for AdamW whose bias corrections count
// optimizer steps; the micro-batches before the last leave weights and slots untouched.
func TestAccumulationEqualsTheLargeBatch(t *testing.T) {
	const k, n, steps = 4, 8, 2
	for _, o := range []config.OptimizerConfig{
		{Name: "sgd", LR: 0.05, Momentum: 0.9, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1, WeightDecay: 1e-2, ClipGradNorm: 0.5},
		{Name: "adamw", LR: 1e-3, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1, WeightDecay: 0.05},
	} {
		rng := rand.New(rand.NewPCG(3, 4))
		var batches [][2]*tensors.Tensor
		for range steps {
			x, y := randomBatch(rng, k*n)
			batches = append(batches, [2]*tensors.Tensor{x, y})
		}
		run := func(accumulate int) map[string][]float32 {
			cfg := config.Defaults()
			cfg.Name, cfg.Net.Name, cfg.Optimizer = "acc", "linear", o
			cfg.Optimizer.AccumulateSteps = accumulate
			ctx, step := testStep(t, cfg)
			var initial map[string][]float32
			for st, b := range batches {
				per := k * n / accumulate
				for j := range accumulate {
					x, y := sliceBatch(b[0], b[1], j*per, (j+1)*per)
					sc := Scalars{LR: o.LR, Update: st + 1, Apply: j == accumulate-1}
					if j > 0 {
						sc.Keep = 1
					}
					if _, err := step.Run(x, y, sc); err != nil {
						t.Fatal(err)
					}
					if st == 0 && j == 0 {
						initial = values(ctx, "/model")
					}
					if st == 0 && j > 0 && j < accumulate-1 {
						if now := values(ctx, "/model"); !sameValues(now, initial) {
							t.Fatalf("%s: micro-batch %d changed the weights before the apply step", o.Name, j)
						}
					}
				}
			}
			out := values(ctx, "/model")
			for name, v := range values(ctx, "/optimizer") {
				out[name] = v
			}
			return out
		}
		big, small := run(1), run(k)
		if len(big) < 4 || len(big) != len(small) {
			t.Fatalf("%s: %d and %d variables", o.Name, len(big), len(small))
		}
		var worst float64
		for name, want := range big {
			got := small[name]
			for i := range want {
				worst = max(worst, math.Abs(float64(got[i]-want[i]))/max(1e-3, math.Abs(float64(want[i]))))
			}
		}
		if worst > 1e-5 {
			t.Errorf("%s: accumulated run differs from the large batch by %.2e (relative)", o.Name, worst)
		}
		t.Logf("%s: k=%d x %d vs one batch of %d: largest relative difference %.2e", o.Name, k, n, k*n, worst)
	}
}

func sameValues(a, b map[string][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for name, va := range a {
		if !slices.Equal(va, b[name]) {
			return false
		}
	}
	return true
}

// TestAccumulationCompensatesBatchNorm: under k = 2 the running statistics decay by d^(1/2) per
// micro-batch, so the same batch seen twice moves them exactly as one update at d.
func TestAccumulationCompensatesBatchNorm(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name, cfg.Net.Dropout = "bn", testnets.BNDropoutMLP, 0
	cfg.Optimizer.AccumulateSteps = 2
	stats := func(k int) map[string][]float32 {
		x, y := randomBatch(rand.New(rand.NewPCG(8, 9)), 16) // the same batch for both, one tensor per backend
		c := cfg
		c.Optimizer.AccumulateSteps = k
		ctx, step := testStep(t, c)
		for j := range k {
			if _, err := step.Run(x, y, Scalars{LR: 0.1, Update: 1, Keep: float64(min(j, 1)), Apply: j == k-1}); err != nil {
				t.Fatal(err)
			}
		}
		out := map[string][]float32{}
		for name, v := range values(ctx, "/model/bn") {
			if strings.Contains(name, "running") {
				out[name] = v
			}
		}
		return out
	}
	one, two := stats(1), stats(2)
	if len(one) != 2 {
		t.Fatalf("running statistics: %v", one)
	}
	for name, want := range one {
		for i := range want {
			if math.Abs(float64(two[name][i]-want[i])) > 1e-5*max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("%s[%d]: k=2 gives %g, one update at d gives %g", name, i, two[name][i], want[i])
			}
		}
	}
}

// TestEMAShadowsWeightsAndStatistics follows e' = d·e + (1−d)·θ' over two steps from a fresh start (the
// shadow starts at the weights before the first step) for a weight and a BatchNorm running mean.
func TestEMAShadowsWeightsAndStatistics(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name = "ema", testnets.BNDropoutMLP
	cfg.EMA = config.EMAConfig{Decay: 0.99, Warmup: true}
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := randomBatch(rng, 8)
	ctx, step := primedStep(t, cfg, x) // the weights exist before the first step, so their values are known
	prev := values(ctx, "/model")
	shadow := map[string][]float64{}
	for name, v := range prev {
		shadow[name] = make([]float64, len(v))
		for i := range v {
			shadow[name][i] = float64(v[i])
		}
	}
	for tt := range 3 {
		d := schedule.EMADecay(cfg.EMA, tt)
		if _, err := step.Run(x, y, Scalars{LR: 0.1, Update: tt + 1, EMADecay: d, EMAFresh: tt == 0}); err != nil {
			t.Fatal(err)
		}
		now := values(ctx, "/model")
		got := values(ctx, EMAScope)
		df := float64(float32(d))
		for _, name := range []string{"/model/fc1/weight", "/model/bn/running_mean", "/model/bn/weight"} {
			for i, th := range now[name] {
				shadow[name][i] = df*shadow[name][i] + (1-df)*float64(th)
				g := got[EMAScope+name][i]
				if math.Abs(float64(g)-shadow[name][i]) > 1e-5*max(1, math.Abs(shadow[name][i])) {
					t.Fatalf("step %d %s[%d]: shadow %g, law %g", tt, name, i, g, shadow[name][i])
				}
			}
		}
	}
}

// TestBFloat16StepTracksFloat32: the same 12 AdamW steps of the MLP and of the MNIST-CNN (quarter
// width) on one batch in bfloat16 compute (float32 masters, optimizer state and loss) and in float32
// give losses within 0.05 nats of each other (the MLP's falls from 2.27 to 0.65), and both learn.
func TestBFloat16StepTracksFloat32(t *testing.T) {
	for _, net := range []string{"mlp", "mnist_cnn"} {
		t.Run(net, func(t *testing.T) { testBFloat16StepTracksFloat32(t, net) })
	}
}

func testBFloat16StepTracksFloat32(t *testing.T, net string) {
	losses := func(precision string) []float64 {
		cfg := config.Defaults()
		cfg.Name, cfg.Net.Name, cfg.Net.Precision, cfg.Net.Width = "bf16", net, precision, 0.25
		cfg.Optimizer = config.OptimizerConfig{Name: "adamw", LR: 1e-3, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			WeightDecay: 0.05, AccumulateSteps: 1}
		_, step := testStep(t, cfg)
		x, y := randomBatch(rand.New(rand.NewPCG(21, 22)), 32)
		var out []float64
		for st := range 12 {
			res, err := step.Run(x, y, Scalars{LR: 1e-3, Update: st + 1})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Loss)
		}
		return out
	}
	f32, bf16 := losses("float32"), losses("bfloat16")
	var worst float64
	for i := range f32 {
		worst = max(worst, math.Abs(bf16[i]-f32[i]))
	}
	if worst > 0.05 {
		t.Errorf("bfloat16 losses %v depart from float32 %v by %.3f", bf16, f32, worst)
	}
	if last := len(f32) - 1; f32[last] > 0.9*f32[0] || bf16[last] > 0.9*bf16[0] {
		t.Errorf("no learning: float32 %v, bfloat16 %v", f32, bf16)
	}
	t.Logf("float32 %.4f -> %.4f, bfloat16 %.4f -> %.4f, largest gap %.3f", f32[0], f32[len(f32)-1], bf16[0], bf16[len(bf16)-1], worst)
}
