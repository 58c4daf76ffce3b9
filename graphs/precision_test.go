package graphs

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestBFloat16ComputeTracksFloat32 runs the MNIST-CNN forward and backward with bfloat16 compute and
// float32 master weights: logits must be float32 and close to the float32 net's, and the gradients
// finite and close. bfloat16 keeps 8 mantissa bits and the pure-Go backend also accumulates its dots in
// bfloat16: measured 3.2% of the logit scale and 13% on the squared gradient norm, hence the bounds.
func TestBFloat16ComputeTracksFloat32(t *testing.T) {
	spec, err := Get("mnist_cnn")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pixels := make([]float32, 2*28*28)
	for i := range pixels {
		pixels[i] = float32(rng.NormFloat64())
	}
	images := tensors.FromFlatDataAndDimensions(pixels, 2, 28, 28, 1)
	run := func(precision string) (logits []float32, gradNorm float64) {
		ctx := context.New()
		opts := Options{Width: 0.25, Seed: 3, Precision: precision}
		exec := context.MustNewExec(testBackend(), ctx, func(ctx *context.Context, x *Node) []*Node {
			out := spec.Build(ctx, x, true, opts)
			out = FromCompute(out, opts)
			loss := ReduceAllSum(Square(out))
			w := ctx.In("conv1").GetVariable("weight").ValueGraph(x.Graph())
			g := Gradient(loss, w)[0]
			return []*Node{out, ReduceAllSum(Square(g))}
		})
		outs := exec.MustExec(images)
		return tensors.MustCopyFlatData[float32](outs[0]), float64(tensors.ToScalar[float32](outs[1]))
	}
	f32, g32 := run("float32")
	b16, g16 := run("bfloat16")
	var maxAbs, scale float64
	for i := range f32 {
		maxAbs = max(maxAbs, math.Abs(float64(f32[i]-b16[i])))
		scale = max(scale, math.Abs(float64(f32[i])))
	}
	if maxAbs > 0.06*scale || maxAbs == 0 {
		t.Errorf("bfloat16 logits differ from float32 by %g (scale %g): want a small non-zero difference", maxAbs, scale)
	}
	if math.IsNaN(g16) || math.IsInf(g16, 0) || math.Abs(g16-g32) > 0.3*g32 {
		t.Errorf("bfloat16 gradient norm² %g, float32 %g", g16, g32)
	}
}

// TestBNMicroBatchesCompensateDecay: under accumulation of k micro-batches the decay is d^(1/k), for the
// net's default decay and for an override alike.
func TestBNMicroBatchesCompensateDecay(t *testing.T) {
	if got := TorchBN.resolve(Options{BNMicroBatches: 2}).Decay; math.Abs(got-math.Sqrt(0.9)) > 1e-15 {
		t.Errorf("default decay under k=2: %g, want sqrt(0.9)", got)
	}
	if got := TorchBN.resolve(Options{BNDecay: 0.99, BNMicroBatches: 4}).Decay; math.Abs(got-math.Pow(0.99, 0.25)) > 1e-15 {
		t.Errorf("decay 0.99 under k=4: %g, want 0.99^(1/4)", got)
	}
	if got := TorchBN.resolve(Options{BNMicroBatches: 1}).Decay; got != 0.9 {
		t.Errorf("k=1 must leave the decay: %g", got)
	}
}
