package trainstep

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testbackend"
	"github.com/trainer/trainer/verify/reference"
)

// lossBackend is the completed pure-Go backend, shared by the loss and optimizer-law tests.
var lossBackend = testbackend.Go

// lossAndGrad runs loss(logits, other) in float64 and returns its value and d/dlogits.
func lossAndGrad(t *testing.T, loss func(logits, other *Node) *Node, logits reference.Tensor, other *tensors.Tensor) (float64, []float64) {
	t.Helper()
	exec := MustNewExec(lossBackend(), func(l, o *Node) []*Node {
		value := loss(l, o)
		return []*Node{value, Gradient(value, l)[0]}
	})
	defer exec.Finalize()
	outs := exec.MustExec(tensors.FromFlatDataAndDimensions(append([]float64(nil), logits.Data...), logits.Dims...), other)
	return tensors.ToScalar[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])
}

func randomLogits(rng *rand.Rand, b, k int, scale float64) reference.Tensor {
	t := reference.New(b, k)
	for i := range t.Data {
		t.Data[i] = scale * rng.NormFloat64()
	}
	return t
}

// checkAgainst compares a graph loss and its gradient with the reference value and the reference's
// central differences.
func checkAgainst(t *testing.T, name string, got float64, grad []float64, logits reference.Tensor, ref func(reference.Tensor) float64) {
	t.Helper()
	want := ref(logits)
	if math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
		t.Errorf("%s: loss %.15g, reference %.15g", name, got, want)
	}
	fd := reference.CentralDiffRichardson(func(x []float64) float64 {
		return ref(reference.FromData(x, logits.Dims...))
	}, append([]float64(nil), logits.Data...), 1e-3)
	if _, rel := reference.Errors(grad, fd); rel > 1e-8 {
		t.Errorf("%s: gradient relative error %.2e against central differences", name, rel)
	}
}

func TestSoftmaxCrossEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const b, k = 6, 5
	logits := randomLogits(rng, b, k, 2)
	labels := make([]int32, b)
	ints := make([]int, b)
	for i := range labels {
		labels[i] = int32(rng.IntN(k))
		ints[i] = int(labels[i])
	}
	lab := tensors.FromFlatDataAndDimensions(labels, b)
	for _, eps := range []float64{0, 0.1} {
		got, grad := lossAndGrad(t, func(l, o *Node) *Node { return SoftmaxCrossEntropy(l, o, eps) }, logits, lab)
		checkAgainst(t, "smoothing "+[]string{"0", "0.1"}[int(eps*10)], got, grad, logits, func(x reference.Tensor) float64 {
			return reference.SoftmaxCrossEntropy(x, ints, eps)
		})
	}
}

// Smoothed one-hot targets (1−ε)·onehot + ε/K make the soft cross-entropy equal the smoothed one.
func TestSoftCrossEntropyMatchesSmoothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const b, k, eps = 4, 7, 0.1
	logits := randomLogits(rng, b, k, 3)
	labels := make([]int32, b)
	targets := reference.New(b, k)
	for i := range labels {
		labels[i] = int32(rng.IntN(k))
		for c := range k {
			targets.Data[i*k+c] = eps / k
		}
		targets.Data[i*k+int(labels[i])] += 1 - eps
	}
	soft, softGrad := lossAndGrad(t, SoftCrossEntropy, logits, tensors.FromFlatDataAndDimensions(targets.Data, b, k))
	hard, hardGrad := lossAndGrad(t, func(l, o *Node) *Node { return SoftmaxCrossEntropy(l, o, eps) }, logits,
		tensors.FromFlatDataAndDimensions(labels, b))
	if math.Abs(soft-hard) > 1e-14 {
		t.Errorf("soft %v, smoothed hard %v", soft, hard)
	}
	if abs, _ := reference.Errors(softGrad, hardGrad); abs > 1e-15 {
		t.Errorf("gradients differ by %g", abs)
	}
	checkAgainst(t, "soft", soft, softGrad, logits, func(x reference.Tensor) float64 {
		return reference.SoftCrossEntropy(x, targets)
	})
}

// BCE's gradient is (σ(x) − t)/n everywhere, at x = 0 and at large |x| included.
func TestBCEWithLogits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const b, k = 3, 6
	logits := randomLogits(rng, b, k, 3)
	logits.Data[0], logits.Data[1], logits.Data[2], logits.Data[3] = 0, 0, 60, -60
	targets := reference.New(b, k)
	for i := range targets.Data {
		targets.Data[i] = rng.Float64()
	}
	targets.Data[1] = 1
	got, grad := lossAndGrad(t, BCEWithLogits, logits, tensors.FromFlatDataAndDimensions(targets.Data, b, k))
	checkAgainst(t, "bce", got, grad, logits, func(x reference.Tensor) float64 { return reference.BCEWithLogits(x, targets) })
	n := float64(b * k)
	for i, x := range logits.Data {
		want := (reference.Sigmoid(x) - targets.Data[i]) / n
		if math.Abs(grad[i]-want) > 1e-15 {
			t.Errorf("d/dx at x=%v, t=%v: %v, want (σ(x)−t)/n = %v", x, targets.Data[i], grad[i], want)
		}
	}
}

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
		loss := func(logits, targets *Node) *Node { return Loss(cfg.Loss, logits, targets) }
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
