package reference

import (
	"math"
	"testing"
)

// fill and checksum mirror testdata/torch_golden.py, which printed the golden values below.
func fill(a, b float64, dims ...int) Tensor {
	t := New(dims...)
	for i := range t.Data {
		t.Data[i] = math.Sin(a*float64(i) + b)
	}
	return t
}

func checksum(t Tensor) float64 {
	s := 0.0
	for i, v := range t.Data {
		s += v * math.Cos(0.11*float64(i)+0.2)
	}
	return s
}

// golden are PyTorch 1.13's float64 results (testdata/torch_golden.py).
var golden = map[string]float64{
	"conv_grouped_s2_pads": -8.96359469124618,
	"depthwise_s2_d2":      14.227391650912214,
	"patchify2":            13.880438198134337,
	"batchnorm_train":      -0.6054522382812555,
	"batchnorm_eval":       0.2543385893249015,
	"layernorm":            -4.052415804725779,
	"gelu_erf":             -6.274661016754209,
	"gelu_tanh":            -6.275925921744456,
	"silu":                 -5.16947207707304,
	"sigmoid":              -3.606123426899632,
	"relu6":                -15.860507225595661,
	"cross_entropy":        2.3967650902350632,
	"cross_entropy_smooth": 2.4769475743174354,
	"bce_with_logits":      1.110687726420334,
	"maxpool3_s2_p1":       -6.210092531397116,
	"maxpool3_s2_p1_grad":  2.2320207924988913,
	"avgpool2_s2":          0.10307812588690121,
	"sdpa":                 5.253992281719844,
	"mha":                  1.6372173411788453,
}

func TestAgainstPyTorch(t *testing.T) {
	x := fill(0.37, 0.1, 2, 7, 6, 4)
	a := Map(fill(0.61, 0.4, 5, 7), func(v float64) float64 { return 3 * v })
	gamma := Map(fill(1.3, 0.2, 4), func(v float64) float64 { return 1 + 0.5*v })
	beta := fill(0.7, 0.9, 4)
	apply := func(t Tensor, f func(float64) float64) float64 { return checksum(Map(t, f)) }

	got := map[string]float64{}
	got["conv_grouped_s2_pads"] = checksum(Conv2D(x, fill(0.23, 0.5, 3, 3, 2, 6), fill(0.9, 0, 6).Data,
		ConvParams{Stride: 2, Pads: [2][2]int{{0, 1}, {1, 0}}, Groups: 2}))
	got["depthwise_s2_d2"] = checksum(DepthwiseConv2D(x, fill(0.41, 0.2, 3, 3, 1, 4), nil, 2, 2, [2][2]int{{2, 2}, {2, 2}}))
	got["patchify2"] = checksum(Patchify(fill(0.29, 0.3, 1, 4, 6, 4), fill(0.13, 0.7, 2, 2, 4, 5), nil, 2))
	bn, _, _ := BatchNormTrain(x, gamma.Data, beta.Data, 1e-5)
	got["batchnorm_train"] = checksum(bn)
	rv := Map(fill(0.8, 0.4, 4), func(v float64) float64 { return 1.5 + v })
	got["batchnorm_eval"] = checksum(BatchNormEval(x, gamma.Data, beta.Data, fill(0.5, 0.1, 4).Data, rv.Data, 1e-3))
	got["layernorm"] = checksum(LayerNorm(x, gamma.Data, beta.Data, 1e-6))
	got["gelu_erf"] = apply(a, GELUErf)
	got["gelu_tanh"] = apply(a, GELUTanh)
	got["silu"] = apply(a, Swish)
	got["sigmoid"] = apply(a, Sigmoid)
	got["relu6"] = apply(a, func(v float64) float64 { return ReLU6(3 * v) })
	labels := []int{3, 0, 6, 2, 5}
	got["cross_entropy"] = SoftmaxCrossEntropy(a, labels, 0)
	got["cross_entropy_smooth"] = SoftmaxCrossEntropy(a, labels, 0.1)
	targets := Map(fill(0.33, 0.8, 5, 7), func(v float64) float64 { return (v + 1) / 2 })
	got["bce_with_logits"] = BCEWithLogits(a, targets)
	xm := Map(fill(0.77, 0.3, 2, 6, 6, 3), func(v float64) float64 { return math.Floor(3 * (v + 1) / 2) })
	pads := [2][2]int{{1, 1}, {1, 1}}
	ym, argmax := MaxPool2D(xm, 3, 2, pads)
	got["maxpool3_s2_p1"] = checksum(ym)
	cot := New(ym.Dims...)
	for i := range cot.Data {
		cot.Data[i] = math.Cos(0.11*float64(i) + 0.2)
	}
	got["maxpool3_s2_p1_grad"] = checksum(MaxPool2DBackward(xm.Dims, argmax, cot))
	x6 := New(2, 6, 6, 4) // x[:, :6]: the first 6 of 7 rows of each image
	for n := range 2 {
		copy(x6.Data[n*144:(n+1)*144], x.Data[n*168:n*168+144])
	}
	got["avgpool2_s2"] = checksum(AvgPool2D(x6, 2, 2))
	got["sdpa"] = checksum(ScaledDotProductAttention(fill(0.3, 0.1, 2, 2, 3, 4), fill(0.47, 0.6, 2, 2, 5, 4), fill(0.19, 0.2, 2, 2, 5, 4)))
	scale := func(t Tensor) Tensor { return Map(t, func(v float64) float64 { return 0.3 * v }) }
	got["mha"] = checksum(MultiHeadAttention(fill(0.21, 0.9, 2, 5, 6), 2,
		scale(fill(0.17, 0.4, 6, 18)), fill(0.5, 0.3, 18).Data, scale(fill(0.27, 0.1, 6, 6)), fill(0.6, 0.2, 6).Data))

	if MaxPool2DTies(xm, 3, 2, pads) == 0 {
		t.Error("the max-pool golden input should contain tied windows")
	}
	for name, want := range golden {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: not computed", name)
			continue
		}
		if math.Abs(g-want) > 1e-12*max(1, math.Abs(want)) {
			t.Errorf("%s: reference %.15g, PyTorch %.15g", name, g, want)
		}
	}
}

func TestConv2DByHand(t *testing.T) {
	// 1 image 3x3x1, kernel 2x2 of ones, stride 1, pads [0,1] on both axes (the SAME phase of an even kernel).
	x := FromData([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 3, 3, 1)
	w := FromData([]float64{1, 1, 1, 1}, 2, 2, 1, 1)
	y := Conv2D(x, w, []float64{10}, ConvParams{Pads: [2][2]int{{0, 1}, {0, 1}}})
	want := []float64{22, 26, 19, 34, 38, 25, 25, 27, 19}
	for i, v := range want {
		if y.Data[i] != v {
			t.Fatalf("conv: got %v, want %v", y.Data, want)
		}
	}
	// Depthwise: channel k only sees kernel k.
	x2 := FromData([]float64{1, 10, 2, 20}, 1, 1, 2, 2)
	w2 := FromData([]float64{3, 5}, 1, 1, 1, 2)
	y2 := DepthwiseConv2D(x2, w2, nil, 1, 1, [2][2]int{})
	if got := y2.Data; got[0] != 3 || got[1] != 50 || got[2] != 6 || got[3] != 100 {
		t.Errorf("depthwise: got %v", got)
	}
}

func TestMaxPoolFirstMaximum(t *testing.T) {
	// One 2x2 window with three equal maxima: the first in row-major order takes the gradient.
	x := FromData([]float64{1, 5, 5, 5}, 1, 2, 2, 1)
	y, arg := MaxPool2D(x, 2, 2, [2][2]int{})
	if y.Data[0] != 5 || arg[0] != 1 {
		t.Errorf("max %v at %d, want 5 at 1", y.Data[0], arg[0])
	}
	dx := MaxPool2DBackward(x.Dims, arg, FromData([]float64{7}, 1, 1, 1, 1))
	if dx.Data[1] != 7 || dx.Data[2] != 0 || dx.Data[3] != 0 {
		t.Errorf("gradient %v, want all of it on cell 1", dx.Data)
	}
	if n := MaxPool2DTies(x, 2, 2, [2][2]int{}); n != 1 {
		t.Errorf("ties = %d, want 1", n)
	}
	// Padding is −∞: an all-negative input never selects a padded cell.
	neg := FromData([]float64{-3, -2, -4, -1}, 1, 2, 2, 1)
	yn, _ := MaxPool2D(neg, 3, 2, [2][2]int{{1, 1}, {1, 1}})
	if yn.Data[0] != -1 {
		t.Errorf("padded max = %v, want −1", yn.Data[0])
	}
}

func TestFiniteDifferences(t *testing.T) {
	f := func(x []float64) float64 { return x[0]*x[0]*x[0] + math.Sin(x[1])*x[0] }
	x := []float64{0.7, -1.3}
	want := []float64{3*0.49 + math.Sin(-1.3), 0.7 * math.Cos(-1.3)}
	plain := CentralDiff(f, x, 1e-3)
	rich := CentralDiffRichardson(f, x, 1e-3)
	for i := range want {
		// Plain central differences carry h²·f'''/6 = 1e-6 here; Richardson removes it.
		if e := math.Abs(plain[i] - want[i]); e > 2e-6 || (i == 0 && e < 1e-7) {
			t.Errorf("central diff [%d]: error %g", i, e)
		}
		if e := math.Abs(rich[i] - want[i]); e > 1e-10 {
			t.Errorf("Richardson [%d]: error %g", i, e)
		}
	}
	if x[0] != 0.7 || x[1] != -1.3 {
		t.Errorf("x not restored: %v", x)
	}
}

func TestLossesByHand(t *testing.T) {
	// Uniform logits: CE = log K whatever the label or smoothing; BCE at 0 is log 2.
	z := New(2, 4)
	if got := SoftmaxCrossEntropy(z, []int{1, 3}, 0.1); math.Abs(got-math.Log(4)) > 1e-15 {
		t.Errorf("CE of uniform logits = %v", got)
	}
	if got := BCEWithLogits(z, New(2, 4)); math.Abs(got-math.Ln2) > 1e-15 {
		t.Errorf("BCE at 0 = %v", got)
	}
	// Large logits stay finite.
	big := FromData([]float64{800, -800}, 1, 2)
	if got := BCEWithLogits(big, FromData([]float64{1, 0}, 1, 2)); got != 0 {
		t.Errorf("BCE of confident correct logits = %v, want 0", got)
	}
}

func TestErrors(t *testing.T) {
	abs, rel := Errors([]float64{1, 2.001, 0}, []float64{1, 2, 1e-9})
	if math.Abs(abs-0.001) > 1e-12 || math.Abs(rel-0.0005) > 1e-9 {
		t.Errorf("abs %g rel %g", abs, rel)
	}
	// Elements near zero are judged against 1e-3 of the largest.
	_, rel = Errors([]float64{1e-6}, []float64{0})
	if rel < 1e290 {
		t.Errorf("an all-zero want must make any difference a huge relative error: rel %g", rel)
	}
	if _, rel := Errors([]float64{math.NaN()}, []float64{1}); !math.IsInf(rel, 1) {
		t.Errorf("NaN must be an infinite error, got %g", rel)
	}
}
