package trainer

import (
	"io"
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
)

// The step takes soft targets [batch, classes]: smoothed one-hot rows score exactly as the integer
// labels do (softmax CE and BCE, with and without the threshold), and a mixed row scores as the plain
// formulas say (−Σ t·log p; BCE on t, or on t > threshold).
func TestSoftTargetsInTheStep(t *testing.T) {
	const b, k, eps = 4, 5, 0.1
	rng := rand.New(rand.NewPCG(4, 5))
	logits := randomLogits(rng, b, k, 2)
	labels := []int32{0, 3, 4, 3}
	onehot := make([]float32, b*k)
	for i, l := range labels {
		for c := range k {
			onehot[i*k+c] = eps / k
			if int(l) == c {
				onehot[i*k+c] += 1 - eps
			}
		}
	}
	// A mix of rows i and b−1−i at λ = 0.7.
	mixed := make([]float64, b*k)
	for i := range b {
		for c := range k {
			mixed[i*k+c] = 0.7*float64(onehot[i*k+c]) + 0.3*float64(onehot[(b-1-i)*k+c])
		}
	}
	mixed32 := make([]float32, len(mixed))
	for i, v := range mixed {
		mixed32[i] = float32(v)
	}
	refLoss := func(l config.LossConfig) float64 {
		var sum float64
		for i := range b {
			row := logits.Data[i*k : (i+1)*k]
			maxv := math.Inf(-1)
			for _, v := range row {
				maxv = math.Max(maxv, v)
			}
			var z float64
			for _, v := range row {
				z += math.Exp(v - maxv)
			}
			for c, x := range row {
				tgt := float64(float32(mixed[i*k+c]))
				if l.Name == "softmax_ce" {
					sum -= tgt * (x - maxv - math.Log(z))
					continue
				}
				if l.BCETargetThreshold > 0 {
					tgt = map[bool]float64{true: 1, false: 0}[tgt > l.BCETargetThreshold]
				}
				sum += math.Max(x, 0) - x*tgt + math.Log1p(math.Exp(-math.Abs(x)))
			}
		}
		switch {
		case l.Name == "softmax_ce":
			return sum / b
		case l.BCEDivisor == "batch":
			return sum / b
		}
		return sum / (b * k)
	}
	for _, l := range []config.LossConfig{
		{Name: "softmax_ce", LabelSmoothing: eps},
		{Name: "bce", LabelSmoothing: eps, BCEDivisor: "elements"},
		{Name: "bce", LabelSmoothing: eps, BCEDivisor: "batch", BCETargetThreshold: 0.2},
	} {
		cfg := config.Defaults()
		cfg.Loss = l
		s := &session{cfg: cfg}
		loss := func(logits, targets *Node) *Node { return s.trainLoss(logits, targets) }
		hard, hardGrad := lossAndGrad(t, loss, logits, tensors.FromFlatDataAndDimensions(labels, b))
		soft, softGrad := lossAndGrad(t, loss, logits, tensors.FromFlatDataAndDimensions(onehot, b, k))
		if math.Abs(hard-soft) > 1e-6 {
			t.Errorf("%+v: one-hot soft targets give %v, integer labels %v", l, soft, hard)
		}
		for i := range hardGrad {
			if math.Abs(hardGrad[i]-softGrad[i]) > 1e-7 {
				t.Fatalf("%+v: gradient %d: soft %v, hard %v", l, i, softGrad[i], hardGrad[i])
			}
		}
		got, _ := lossAndGrad(t, loss, logits, tensors.FromFlatDataAndDimensions(mixed32, b, k))
		if want := refLoss(l); math.Abs(got-want) > 1e-12*math.Max(1, want) {
			t.Errorf("%+v: mixed targets give %v, want %v", l, got, want)
		}
	}
}

// A run with mixup and cutmix stopped at a checkpoint mid-epoch and resumed ends bit-identical to the
// uninterrupted run; the same run without mixing ends elsewhere (the mixing took effect).
func TestMixupRunResumesExactly(t *testing.T) {
	mk := func(name string, mix bool) config.Config {
		cfg := smallRun(t, name)
		cfg.Steps = 12
		cfg.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 5}
		cfg.Loss.LabelSmoothing = 0.1
		if mix {
			cfg.Data.Augment.MixupAlpha, cfg.Data.Augment.CutmixAlpha = 0.8, 1
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a := mk("a", true)
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	b := mk("b", true)
	resB := rerunFrom(t, b, 12)
	resC, err := Run(mk("c", false), RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ckA, errA := checkpoint.Load(resA.Checkpoint)
	ckB, errB := checkpoint.Load(resB.Checkpoint)
	ckC, errC := checkpoint.Load(resC.Checkpoint)
	if errA != nil || errB != nil || errC != nil {
		t.Fatal(errA, errB, errC)
	}
	const w = "/model/fc/weight"
	if _, ok := ckA.Tensors[w]; !ok {
		t.Fatalf("checkpoint lacks %s", w)
	}
	for name, ta := range ckA.Tensors {
		if tb, ok := ckB.Tensors[name]; !ok || !equalBytes(ta, tb) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}
	if equalBytes(ckA.Tensors[w], ckC.Tensors[w]) {
		t.Error("mixup and cutmix left the weights as the unmixed run's")
	}
	if resA.Eval.Top1 < 0.5 {
		t.Errorf("mixed run reached top-1 %.3f, want > 0.5", resA.Eval.Top1)
	}
}
