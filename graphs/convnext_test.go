package graphs

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Helpers shared by the ConvNeXt and ViT tests (prefixed netCheck to stay clear of other families' tests).

// netCheckData is a tiny generated batch: images [n, size, size, 3] in the given dtype, labels int32.
func netCheckData(seed uint64, n, size, classes int, dtype dtypes.DType) (*tensors.Tensor, *tensors.Tensor) {
	rng := rand.New(rand.NewPCG(seed, 7))
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
	}
	pixels := make([]float64, n*size*size*3)
	for i := range pixels {
		pixels[i] = rng.NormFloat64()
	}
	if dtype == dtypes.Float64 {
		return tensors.FromFlatDataAndDimensions(pixels, n, size, size, 3), tensors.FromValue(labels)
	}
	p32 := make([]float32, len(pixels))
	for i, v := range pixels {
		p32[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(p32, n, size, size, 3), tensors.FromValue(labels)
}

// netCheckContext returns a context whose dropout/drop-path RNG is seeded (deterministic tests).
func netCheckContext() *context.Context {
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, int64(42))
	return ctx
}

// netCheckLoss is the mean softmax cross-entropy of logits [n, classes] against int labels [n].
func netCheckLoss(logits, labels *Node) *Node {
	classes := logits.Shape().Dimensions[1]
	oneHot := OneHot(labels, classes, logits.DType())
	return Neg(ReduceAllMean(ReduceSum(Mul(oneHot, LogSoftmax(logits)), -1)))
}

// netCheckLogits runs the net once on images and returns its logits as float64, with their shape.
func netCheckLogits(t *testing.T, build BuildFn, opts Options, train bool, images *tensors.Tensor) ([]float64, []int) {
	t.Helper()
	exec, err := context.NewExec(testBackend(), netCheckContext(), func(ctx *context.Context, x *Node) *Node {
		return ConvertDType(build(ctx.In(ModelScope), x, train, opts), dtypes.Float64)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(images)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float64](out[0]), out[0].Shape().Dimensions
}

// netCheckSGD runs steps of plain SGD (θ −= lr·g, every trainable variable) in training mode on one
// fixed batch and returns the loss before each step and, for the first step, each trainable variable's
// gradient norm by "scope/name".
func netCheckSGD(t *testing.T, build BuildFn, opts Options, images, labels *tensors.Tensor, lr float64, steps int) ([]float64, map[string]float64) {
	t.Helper()
	var names []string
	ctx := netCheckContext()
	exec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, x, y *Node) []*Node {
		g := x.Graph()
		loss := netCheckLoss(build(ctx.In(ModelScope), x, true, opts), y)
		var vars []*context.Variable
		var values []*Node
		names = names[:0]
		ctx.EnumerateVariables(func(v *context.Variable) {
			if v.Trainable && v.InUseByGraph(g) {
				vars = append(vars, v)
				values = append(values, v.ValueGraph(g))
				names = append(names, v.Scope()+"/"+v.Name())
			}
		})
		grads := Gradient(loss, values...)
		norms := make([]*Node, len(grads))
		for i, grad := range grads {
			norms[i] = ConvertDType(Sqrt(ReduceAllSum(Square(grad))), dtypes.Float64)
			vars[i].SetValueGraph(Sub(values[i], MulScalar(grad, lr)))
		}
		return []*Node{ConvertDType(loss, dtypes.Float64), Stack(norms, 0)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	var losses []float64
	norms := map[string]float64{}
	for step := range steps {
		out, err := exec.Exec(images, labels)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, out[0].Value().(float64))
		if step == 0 {
			for i, n := range tensors.MustCopyFlatData[float64](out[1]) {
				norms[names[i]] = n
			}
		}
	}
	return losses, norms
}

// netCheckTrains asserts finite, non-zero gradients for every trainable variable and a falling loss.
func netCheckTrains(t *testing.T, build BuildFn, opts Options, size int, lr float64, minVars int) {
	t.Helper()
	images, labels := netCheckData(3, 4, size, 10, dtypes.Float32)
	losses, norms := netCheckSGD(t, build, opts, images, labels, lr, 6)
	if len(norms) < minVars {
		t.Errorf("%d trainable variables got gradients, want at least %d", len(norms), minVars)
	}
	for name, n := range norms {
		if math.IsNaN(n) || math.IsInf(n, 0) || n == 0 {
			t.Errorf("gradient of %s has norm %g", name, n)
		}
	}
	for _, l := range losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			t.Fatalf("non-finite loss: %v", losses)
		}
	}
	t.Logf("losses over %d SGD steps (lr %g): %.4f", len(losses), lr, losses)
	// 10 classes: the initial loss is near ln 10; memorising 4 examples must bring it well down.
	if math.Abs(losses[0]-math.Log(10)) > 1 {
		t.Errorf("initial loss %.4f, expected near ln 10 = 2.30", losses[0])
	}
	if last := losses[len(losses)-1]; !(last < 0.8*losses[0]) {
		t.Errorf("loss did not fall: %.4f", losses)
	}
}

// netCheckGradients compares the autodiff gradient of the loss (eval mode, float64) with central finite
// differences along a random direction, per trainable variable and for the input images. This is what
// catches a wrong convolution input gradient (GoMLX v0.26's even-kernel VJP).
func netCheckGradients(t *testing.T, build BuildFn, opts Options, size int) {
	t.Helper()
	opts.Precision = "float64"
	images, labels := netCheckData(5, 2, size, 10, dtypes.Float64)
	ctx := netCheckContext()
	var vars []*context.Variable
	gradExec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, x, y *Node) []*Node {
		g := x.Graph()
		loss := netCheckLoss(build(ctx.In(ModelScope), x, false, opts), y)
		vars = vars[:0]
		wrt := []*Node{x}
		ctx.EnumerateVariables(func(v *context.Variable) {
			if v.Trainable && v.InUseByGraph(g) {
				vars = append(vars, v)
				wrt = append(wrt, v.ValueGraph(g))
			}
		})
		return Gradient(loss, wrt...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer gradExec.Finalize()
	grads, err := gradExec.Exec(images, labels)
	if err != nil {
		t.Fatal(err)
	}
	lossExec, err := context.NewExec(testBackend(), ctx.Reuse(), func(ctx *context.Context, x, y *Node) *Node {
		return netCheckLoss(build(ctx.In(ModelScope), x, false, opts), y)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lossExec.Finalize()
	loss := func(x *tensors.Tensor) float64 {
		out, err := lossExec.Exec(x, labels)
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Value().(float64)
	}

	rng := rand.New(rand.NewPCG(11, 13))
	// The norms right after the depthwise convs have small variances (std-0.02 weights), so the loss is
	// strongly curved there: the central difference's O(eps²) error is 2e-6 relative at eps 1e-5.
	const eps = 1e-6
	// directional returns ⟨grad, d⟩ and the central difference of the loss along d, with set(θ) installing
	// a perturbed value.
	directional := func(base []float64, dims []int, grad *tensors.Tensor, set func(*tensors.Tensor) float64) (float64, float64) {
		g := tensors.MustCopyFlatData[float64](grad)
		plus, minus := make([]float64, len(base)), make([]float64, len(base))
		ad := 0.0
		for i := range base {
			d := rng.NormFloat64()
			ad += g[i] * d
			plus[i], minus[i] = base[i]+eps*d, base[i]-eps*d
		}
		lp := set(tensors.FromFlatDataAndDimensions(plus, dims...))
		lm := set(tensors.FromFlatDataAndDimensions(minus, dims...))
		return ad, (lp - lm) / (2 * eps)
	}
	worst := 0.0
	check := func(name string, ad, fd float64) {
		err := math.Abs(ad - fd)
		worst = max(worst, err/(math.Max(math.Abs(ad), math.Abs(fd))+1e-8))
		if err > 1e-6*math.Max(math.Abs(ad), math.Abs(fd))+1e-8 {
			t.Errorf("gradient of %s along a random direction: autodiff %.10g, finite differences %.10g", name, ad, fd)
		}
	}

	imageValues := tensors.MustCopyFlatData[float64](images)
	ad, fd := directional(imageValues, images.Shape().Dimensions, grads[0], loss)
	check("the input images", ad, fd)
	for i, v := range vars {
		// SetValue finalizes the previous tensor: keep a copy of the values and dims.
		dims := v.Shape().Dimensions
		values := tensors.MustCopyFlatData[float64](v.MustValue())
		ad, fd := directional(values, dims, grads[i+1], func(t *tensors.Tensor) float64 {
			v.MustSetValue(t)
			return loss(images)
		})
		v.MustSetValue(tensors.FromFlatDataAndDimensions(values, dims...))
		check(v.Scope()+"/"+v.Name(), ad, fd)
	}
	t.Logf("checked the input and %d variables against finite differences: worst relative error %.2g", len(vars), worst)
}

// netCheckMaxDiff is max |a−b|.
func netCheckMaxDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// netCheckDropPath asserts that drop path changes training outputs, leaves eval outputs untouched, and
// that with no drop path training and eval compute the same function (no other train-only behaviour).
func netCheckDropPath(t *testing.T, build BuildFn, opts Options, size int) {
	t.Helper()
	images, _ := netCheckData(9, 8, size, 10, dtypes.Float32)
	none, half := 0.0, 0.5
	opts.DropPathRate = &none
	evalNone, _ := netCheckLogits(t, build, opts, false, images)
	trainNone, _ := netCheckLogits(t, build, opts, true, images)
	opts.DropPathRate = &half
	evalHalf, _ := netCheckLogits(t, build, opts, false, images)
	trainHalf, _ := netCheckLogits(t, build, opts, true, images)
	if d := netCheckMaxDiff(evalNone, evalHalf); d != 0 {
		t.Errorf("drop path changed eval logits by %g", d)
	}
	if d := netCheckMaxDiff(evalNone, trainNone); d != 0 {
		t.Errorf("without drop path, train and eval logits differ by %g", d)
	}
	d := netCheckMaxDiff(evalHalf, trainHalf)
	if d < 1e-3 {
		t.Errorf("drop path 0.5 changed train logits by only %g", d)
	}
	t.Logf("drop path 0.5: train logits moved by up to %.4g", d)
}

// netCheckGELUForms asserts that the tanh GELU changes the logits, by a little. At initialisation the
// pre-activations are small (weights of std 0.02), where the forms differ by ~1e-7 of the logits, so
// this runs in float64.
func netCheckGELUForms(t *testing.T, build BuildFn, opts Options, size int) {
	t.Helper()
	opts.Precision = "float64"
	images, _ := netCheckData(4, 2, size, 10, dtypes.Float64)
	opts.GELU = GELUErf
	erf, _ := netCheckLogits(t, build, opts, false, images)
	opts.GELU = GELUDefault
	def, _ := netCheckLogits(t, build, opts, false, images)
	opts.GELU = GELUTanh
	tanh, _ := netCheckLogits(t, build, opts, false, images)
	if d := netCheckMaxDiff(erf, def); d != 0 {
		t.Errorf("the default GELU is not erf: logits differ by %g", d)
	}
	scale := netCheckMaxDiff(erf, make([]float64, len(erf)))
	d := netCheckMaxDiff(erf, tanh)
	// The two forms differ by at most ~1e-3 per activation: visible, but small against the logits.
	if d < 1e-10*scale || d > 0.01*scale {
		t.Errorf("GELU tanh vs erf: logits differ by %g (logits up to %g)", d, scale)
	}
	t.Logf("GELU tanh vs erf: max logit difference %.3g (max |logit| %.3g)", d, scale)
}

// netCheckDecayGroup asserts that a spec's no-weight-decay rule is exactly "rank ≤ 1, or one of the
// embeddings" over every variable of the built net: biases, norms, layer scales, cls_token, pos_embed.
func netCheckDecayGroup(t *testing.T, spec Spec, opts Options, size int, embeddings ...string) {
	t.Helper()
	ctx := netCheckVariables(t, spec, opts, size)
	excluded := 0
	ctx.EnumerateVariables(func(v *context.Variable) {
		want := v.Shape().Rank() <= 1
		for _, e := range embeddings {
			want = want || v.Name() == e
		}
		if got := spec.ExcludedFromWeightDecay(v.Scope(), v.Name()); got != want {
			t.Errorf("%s/%s %v: excluded from weight decay = %v, want %v", v.Scope(), v.Name(), v.Shape(), got, want)
		}
		if want {
			excluded++
		}
		if v.Scope() != "/"+ModelScope && !strings.HasPrefix(v.Scope(), "/"+ModelScope+"/") {
			t.Errorf("variable %s/%s outside the model scope", v.Scope(), v.Name())
		}
	})
	if excluded == 0 {
		t.Error("no variable excluded from weight decay")
	}
}

// netCheckVariables builds the net's graph once (nothing runs) and returns the context holding its
// variables; a panic while building fails the test instead of aborting the package's test binary.
func netCheckVariables(t *testing.T, spec Spec, opts Options, size int) (ctx *context.Context) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("building %s: %v", spec.Name, r)
		}
	}()
	ctx = context.New()
	g := NewGraph(testBackend(), "variables")
	defer g.Finalize()
	spec.Build(ctx.In(ModelScope), Parameter(g, "x", netCheckImages(1, size)), false, opts)
	return ctx
}

// netCheckImages is the shape of a float32 NHWC batch of square RGB images.
func netCheckImages(batch, size int) shapes.Shape {
	return shapes.Make(dtypes.Float32, batch, size, size, 3)
}

// reduced ConvNeXt for the numeric tests: 32 px, small dims; layer scale 0.5 so that the blocks' branches
// (and hence GELU and drop path) visibly move the logits.
var convNeXtSmall = convNeXtConfig{depths: [4]int{1, 1, 2, 1}, dims: [4]int{8, 16, 24, 32}, layerScale: 0.5, dropPath: 0.1}

func convNeXtSmallBuild(c convNeXtConfig) BuildFn {
	return func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
		return buildConvNeXt(ctx, x, train, opts, c)
	}
}

func TestConvNeXtTinySummary(t *testing.T) {
	spec, err := Get("convnext_tiny")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Summarize(testBackend(), spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// torchvision 0.14: sum(p.numel() for p in convnext_tiny().parameters()).
	if sum.Parameters != 28_589_128 {
		t.Errorf("convnext_tiny: %d parameters, want 28,589,128", sum.Parameters)
	}
	// MACs by hand: stem, per-block (dw 7x7 + two Linears), downsamplings, head.
	macs := int64(56 * 56 * 96 * 4 * 4 * 3)
	res, dims, depths := []int64{56, 28, 14, 7}, []int64{96, 192, 384, 768}, []int64{3, 3, 9, 3}
	for s := range 4 {
		hw, c := res[s]*res[s], dims[s]
		macs += depths[s] * hw * (c*49 + 2*c*4*c)
		if s < 3 {
			macs += res[s+1] * res[s+1] * dims[s+1] * 4 * c
		}
	}
	macs += 768 * 1000
	if sum.ForwardFLOPs != 2*macs {
		t.Errorf("convnext_tiny: %d forward FLOPs, want %d", sum.ForwardFLOPs, 2*macs)
	}
	t.Logf("convnext_tiny: %d parameters, %.3f GMACs", sum.Parameters, float64(macs)/1e9)

	sum, err = Summarize(testBackend(), spec, Options{NumClasses: 10, Width: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	// Width 1/4: dims (24, 48, 96, 192) with the same structure, 10 classes.
	want := convNeXtParams([4]int{3, 3, 9, 3}, [4]int{24, 48, 96, 192}, 10)
	if sum.Parameters != want {
		t.Errorf("convnext_tiny width 0.25: %d parameters, want %d", sum.Parameters, want)
	}
}

// convNeXtParams counts ConvNeXt parameters from the architecture (torchvision's module list).
func convNeXtParams(depths, dims [4]int, classes int) int {
	ln := func(c int) int { return 2 * c }
	n := 4*4*3*dims[0] + dims[0] + ln(dims[0])
	for s := range 4 {
		c := dims[s]
		block := 49*c + c + ln(c) + c*4*c + 4*c + 4*c*c + c + c
		n += depths[s] * block
		if s < 3 {
			n += ln(c) + 2*2*c*dims[s+1] + dims[s+1]
		}
	}
	return n + ln(dims[3]) + dims[3]*classes + classes
}

func TestConvNeXtNamesAndDecayGroup(t *testing.T) {
	spec, _ := Get("convnext_tiny")
	opts := Options{Width: 1.0 / 12, NumClasses: 10}
	netCheckDecayGroup(t, spec, opts, 32)

	// Every torchvision state_dict key of a ConvNeXt-T, in our naming.
	ctx := netCheckVariables(t, spec, opts, 32)
	got := map[string][]int{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		key, ok := spec.StateDictKey(v.Scope(), v.Name())
		if !ok {
			t.Errorf("no state_dict key for %s/%s", v.Scope(), v.Name())
		}
		got[key] = v.Shape().Dimensions
	})
	want := map[string][]int{
		"classifier.0.weight":         {64},
		"classifier.2.bias":           {10},
		"classifier.2.weight":         {64, 10},
		"features.0.0.bias":           {8},
		"features.0.0.weight":         {4, 4, 3, 8},
		"features.0.1.bias":           {8},
		"features.0.1.weight":         {8},
		"features.1.0.block.0.weight": {7, 7, 1, 8},
		"features.1.0.block.2.weight": {8},
		"features.1.0.block.3.weight": {8, 32},
		"features.1.0.block.5.bias":   {8},
		"features.1.1.block.5.weight": {32, 8},
		"features.1.2.block.0.weight": {7, 7, 1, 8},
		"features.1.2.layer_scale":    {8},
		"features.2.0.weight":         {8},
		"features.2.1.bias":           {16},
		"features.2.1.weight":         {2, 2, 8, 16},
		"features.3.0.block.3.bias":   {64},
		"features.3.1.block.2.weight": {16},
		"features.3.2.block.0.bias":   {16},
		"features.4.0.bias":           {16},
		"features.4.1.weight":         {2, 2, 16, 32},
		"features.5.0.block.0.weight": {7, 7, 1, 32},
		"features.5.8.block.3.weight": {32, 128},
		"features.5.8.layer_scale":    {32},
		"features.6.0.weight":         {32},
		"features.6.1.bias":           {64},
		"features.7.0.block.2.bias":   {64},
		"features.7.1.block.3.bias":   {256},
		"features.7.2.block.5.weight": {256, 64},
		"features.7.2.layer_scale":    {64},
	}
	for key, dims := range want {
		if d, ok := got[key]; !ok || !slices.Equal(d, dims) {
			t.Errorf("%s: shape %v (present %v), want %v", key, d, ok, dims)
		}
	}
	// Stem 4, 18 blocks of 9 (dwconv, norm, fc1, fc2 weight+bias; layer_scale), 3 downsamplings of 4, head 4.
	if len(got) != 4+18*9+3*4+4 {
		t.Errorf("%d variables, want %d", len(got), 4+18*9+3*4+4)
	}
}

func TestConvNeXtInitialisation(t *testing.T) {
	// torchvision: trunc_normal(0.02) conv/linear weights, zero biases, layer_scale 1e-6, LN ones/zeros.
	stats := netCheckInitStats(t, "convnext_tiny", Options{Width: 0.25, NumClasses: 10, Seed: 1})
	for _, s := range []string{"features/5/3/block/3", "features/0/0", "features/1/0/block/0", "classifier/2"} {
		mean, std, _ := stats(s, "weight")
		if math.Abs(std-0.02) > 0.004 || math.Abs(mean) > 0.004 {
			t.Errorf("%s weight: mean %.4f std %.4f, want trunc_normal(0.02)", s, mean, std)
		}
		if _, _, m := stats(s, "bias"); m != 0 {
			t.Errorf("%s bias: not zero (max %g)", s, m)
		}
	}
	if mean, std, _ := stats("features/3/1", "layer_scale"); math.Abs(mean-1e-6) > 1e-12 || std > 1e-12 {
		t.Errorf("layer_scale: mean %g std %g, want 1e-6", mean, std)
	}
	if mean, std, _ := stats("features/2/0", "weight"); mean != 1 || std != 0 {
		t.Errorf("LayerNorm weight: mean %g std %g, want ones", mean, std)
	}
}

func TestConvNeXtForwardShapeAndPrecisions(t *testing.T) {
	netCheckPrecisions(t, "convnext_tiny", Options{Width: 1.0 / 12, NumClasses: 10, Seed: 3})
}

// netCheckPrecisions builds a net at 32 px for 10 classes and checks float32 and bfloat16 logits have
// the right shape and agree within bfloat16's precision.
func netCheckPrecisions(t *testing.T, name string, opts Options) {
	t.Helper()
	images, _ := netCheckData(2, 2, 32, 10, dtypes.Float32)
	spec, _ := Get(name)
	f32, dims := netCheckLogits(t, spec.Build, opts, false, images)
	if !slices.Equal(dims, []int{2, 10}) {
		t.Fatalf("logits shape %v, want [2 10]", dims)
	}
	opts.Precision = "bfloat16"
	bf16, dims := netCheckLogits(t, spec.Build, opts, false, images)
	if !slices.Equal(dims, []int{2, 10}) {
		t.Fatalf("bfloat16 logits shape %v, want [2 10]", dims)
	}
	scale := netCheckMaxDiff(f32, make([]float64, len(f32)))
	d := netCheckMaxDiff(f32, bf16)
	if scale == 0 || d > 0.05*scale+1e-3 || math.IsNaN(d) {
		t.Errorf("bfloat16 logits differ from float32 by %g (logits up to %g)", d, scale)
	}
	t.Logf("bfloat16 vs float32: max logit difference %.3g (max |logit| %.3g)", d, scale)
}

func TestConvNeXtTrains(t *testing.T) {
	// The registered net at width 1/12 (dims 8..64, depths 3,3,9,3): 18 blocks, so 4+18·9+12+4 variables.
	spec, _ := Get("convnext_tiny")
	netCheckTrains(t, spec.Build, Options{Width: 1.0 / 12, NumClasses: 10, Seed: 4}, 32, 0.1, 4+18*9+12+4)
}

func TestConvNeXtGradientsMatchFiniteDifferences(t *testing.T) {
	netCheckGradients(t, convNeXtSmallBuild(convNeXtSmall), Options{NumClasses: 10, Seed: 5}, 32)
}

func TestConvNeXtDropPath(t *testing.T) {
	netCheckDropPath(t, convNeXtSmallBuild(convNeXtSmall), Options{NumClasses: 10, Seed: 6}, 32)
}

func TestConvNeXtGELUForms(t *testing.T) {
	netCheckGELUForms(t, convNeXtSmallBuild(convNeXtSmall), Options{NumClasses: 10, Seed: 7}, 32)
}

// netCheckInitStats builds the named net once (32 px, one image) so its variables get their initial
// values, and returns a function giving the mean, standard deviation and largest magnitude of the
// variable scope/name under the model scope (scope "" for variables at the model scope itself).
func netCheckInitStats(t *testing.T, net string, opts Options) func(scope, name string) (mean, std, maxAbs float64) {
	t.Helper()
	spec, _ := Get(net)
	ctx := context.New()
	exec, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, x *Node) *Node {
		return spec.Build(ctx.In(ModelScope), x, false, opts)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	images, _ := netCheckData(1, 1, 32, 10, dtypes.Float32)
	if _, err := exec.Exec(images); err != nil {
		t.Fatal(err)
	}
	return func(scope, name string) (mean, std, maxAbs float64) {
		v := ctx.GetVariableByScopeAndName(strings.TrimSuffix("/"+ModelScope+"/"+scope, "/"), name)
		if v == nil {
			t.Fatalf("no variable %s/%s", scope, name)
		}
		values := tensors.MustCopyFlatData[float32](v.MustValue())
		for _, x := range values {
			mean += float64(x)
			std += float64(x) * float64(x)
			maxAbs = max(maxAbs, math.Abs(float64(x)))
		}
		n := float64(len(values))
		mean /= n
		return mean, math.Sqrt(std/n - mean*mean), maxAbs
	}
}
