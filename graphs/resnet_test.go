package graphs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The reference numbers below come from PyTorch 1.13 / torchvision 0.14 on this machine:
// sum(p.numel() for p in m.parameters()); multiply-accumulates of every Conv2d (out_h·out_w·out_c·in_c/groups·kh·kw)
// and Linear (in·out) through forward hooks; and the state_dict fingerprint: sha256 of the sorted lines
// "<key> <torch shape joined by x>" without num_batches_tracked, first 16 hex digits (see netFingerprint).

// netInfo is what building a net's graph (nothing runs) tells about it.
type netInfo struct {
	trainable, buffers int // parameter counts: trainable (torch's parameters()) and running statistics
	noDecay            int // trainable parameters in the spec's no-weight-decay group
	macs               int64
	logits             []int
	fingerprint        string
	keys               int
}

// inspectNet builds spec's graph for one size×size image under the model scope and describes it.
func inspectNet(t *testing.T, spec Spec, opts Options, size int) netInfo {
	t.Helper()
	var stats Stats
	opts.Stats = &stats
	ctx := context.New()
	g := NewGraph(testBackend(), "inspect_"+spec.Name)
	defer g.Finalize()
	images := Parameter(g, "images", shapes.Make(dtypes.Float32, 1, size, size, spec.InputShape[2]))
	logits := spec.Build(ctx.In(ModelScope), images, false, opts)
	info := netInfo{macs: stats.MACs, logits: logits.Shape().Dimensions}
	var lines []string
	for v := range ctx.IterVariables() {
		if v.Trainable {
			info.trainable += v.Shape().Size()
			if spec.ExcludedFromWeightDecay(v.Scope(), v.Name()) {
				info.noDecay += v.Shape().Size()
			}
		} else {
			info.buffers += v.Shape().Size()
		}
		key, ok := spec.StateDictKey(v.Scope(), v.Name())
		if !ok {
			t.Errorf("%s: variable %s/%s has no state_dict key", spec.Name, v.Scope(), v.Name())
			continue
		}
		lines = append(lines, key+" "+joinDims(torchDims(v.Name(), v.Shape().Dimensions)))
	}
	if spec.TorchBuffers != nil {
		var keys []string
		for _, line := range lines {
			keys = append(keys, line[:strings.Index(line, " ")])
		}
		for key, b := range spec.TorchBuffers(keys) {
			lines = append(lines, key+" "+joinDims(b.Shape))
		}
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	info.fingerprint, info.keys = hex.EncodeToString(sum[:8]), len(lines)
	return info
}

// torchDims is the generic layout rule of weight import/export: HWIO <-> OIHW, [in,out] <-> [out,in].
func torchDims(name string, dims []int) []int {
	if name == "weight" && len(dims) == 4 {
		return []int{dims[3], dims[2], dims[0], dims[1]}
	}
	if name == "weight" && len(dims) == 2 {
		return []int{dims[1], dims[0]}
	}
	return dims
}

func joinDims(dims []int) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return strings.Join(s, "x")
}

// netRef is a net's reference description at its default size.
type netRef struct {
	params, noDecay int
	macs            int64
	fingerprint     string
	keys            int
	classes         int
}

// checkNetAgainstRef asserts a net's full-size structure against the PyTorch reference numbers.
func checkNetAgainstRef(t *testing.T, name string, ref netRef) {
	t.Helper()
	spec, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	info := inspectNet(t, spec, Options{}, spec.InputShape[0])
	if info.trainable != ref.params {
		t.Errorf("%s: %d trainable parameters, torch has %d", name, info.trainable, ref.params)
	}
	if info.noDecay != ref.noDecay {
		t.Errorf("%s: %d parameters without weight decay, want %d (biases and norms)", name, info.noDecay, ref.noDecay)
	}
	if info.macs != ref.macs {
		t.Errorf("%s: %d MACs, torch has %d", name, info.macs, ref.macs)
	}
	if info.fingerprint != ref.fingerprint || info.keys != ref.keys {
		t.Errorf("%s: state_dict fingerprint %s over %d keys, torch has %s over %d", name, info.fingerprint,
			info.keys, ref.fingerprint, ref.keys)
	}
	if len(info.logits) != 2 || info.logits[1] != ref.classes {
		t.Errorf("%s: logits %v, want [1 %d]", name, info.logits, ref.classes)
	}
	sum, err := Summarize(testBackend(), spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ForwardFLOPs != 2*ref.macs {
		t.Errorf("%s: Summarize reports %d FLOPs, want %d", name, sum.ForwardFLOPs, 2*ref.macs)
	}
	// Summarize counts every variable today, running statistics included; torch's count is the
	// trainable one. Accept both until Summarize settles on one.
	if sum.Parameters != info.trainable && sum.Parameters != info.trainable+info.buffers {
		t.Errorf("%s: Summarize reports %d parameters, neither %d trainable nor %d with running stats", name,
			sum.Parameters, info.trainable, info.trainable+info.buffers)
	}
}

func TestResNetsMatchTorchvisionStructure(t *testing.T) {
	// noDecay: the 1-D parameters (BN weight/bias, fc bias) of torchvision's models.
	checkNetAgainstRef(t, "resnet34", netRef{params: 21797672, noDecay: 18024, macs: 3663761408,
		fingerprint: "3527dbbb4ac82262", keys: 182, classes: 1000})
	checkNetAgainstRef(t, "resnet50", netRef{params: 25557032, noDecay: 54120, macs: 4089184256,
		fingerprint: "a506be68cf630f4c", keys: 267, classes: 1000})
}

func TestResNet50AtRSBTrainSize(t *testing.T) {
	spec, _ := Get("resnet50")
	info := inspectNet(t, spec, Options{ImageSize: 160}, 160)
	if info.trainable != 25557032 || info.macs != 2087321600 {
		t.Errorf("resnet50 at 160 px: %d parameters (want 25557032), %d MACs (torch: 2087321600)", info.trainable, info.macs)
	}
	if sum, err := Summarize(testBackend(), spec, Options{ImageSize: 160}); err != nil || sum.ForwardFLOPs != 2*2087321600 {
		t.Errorf("Summarize of resnet50 at ImageSize 160: %d FLOPs, want %d (err %v)", sum.ForwardFLOPs, 2*2087321600, err)
	}
	// Under XLA's SAME phase the even sizes keep the same output sizes, so the cost is unchanged.
	same := inspectNet(t, spec, Options{Padding: PadSame}, 160)
	if same.macs != info.macs || same.trainable != info.trainable {
		t.Errorf("resnet50 at 160 px with SAME padding: %d MACs %d parameters, want %d and %d", same.macs,
			same.trainable, info.macs, info.trainable)
	}
	// Odd sizes build in both modes (ceil vs floor differ only in the padded cells).
	for _, p := range []Padding{PadSymmetric, PadSame} {
		if odd := inspectNet(t, spec, Options{Padding: p, NumClasses: 10}, 97); odd.logits[1] != 10 {
			t.Errorf("resnet50 at 97 px, padding %s: logits %v", p, odd.logits)
		}
	}
}

func TestResNetNoWeightDecayGroup(t *testing.T) {
	spec, _ := Get("resnet50")
	for _, c := range []struct {
		scope, name string
		excluded    bool
	}{
		{"/model/conv1", "weight", false},
		{"/model/bn1", "weight", true},
		{"/model/layer1/0/bn3", "bias", true},
		{"/model/layer2/0/downsample/0", "weight", false},
		{"/model/layer2/0/downsample/1", "weight", true},
		{"/model/fc", "weight", false},
		{"/model/fc", "bias", true},
	} {
		if got := spec.ExcludedFromWeightDecay(c.scope, c.name); got != c.excluded {
			t.Errorf("%s/%s: excluded from weight decay %v, want %v", c.scope, c.name, got, c.excluded)
		}
	}
}

func TestResNetValidPaddingIsRejected(t *testing.T) {
	spec, _ := Get("resnet34")
	if _, err := Summarize(testBackend(), spec, Options{Padding: PadValid, Width: 1.0 / 16}); err == nil ||
		!strings.Contains(err.Error(), "valid") {
		t.Errorf("Padding valid should be refused with a clear error, got %v", err)
	}
}

// tinyDataset is a fixed batch: each class has its own smooth pattern plus a little noise.
func tinyDataset(batch, size, channels, classes int) (images, labels *tensors.Tensor) {
	rng := rand.New(rand.NewPCG(3, 4))
	pixels := make([]float32, batch*size*size*channels)
	ids := make([]int32, batch)
	for n := range batch {
		ids[n] = int32(n % classes)
		freq := float64(ids[n]+1) * math.Pi / float64(size)
		for h := range size {
			for w := range size {
				for c := range channels {
					v := math.Sin(freq*float64(h+2*w+3*c)) + 0.1*rng.NormFloat64()
					pixels[((n*size+h)*size+w)*channels+c] = float32(v)
				}
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(pixels, batch, size, size, channels),
		tensors.FromFlatDataAndDimensions(ids, batch)
}

// crossEntropy is the mean softmax cross-entropy of logits [batch, classes] against int labels.
func crossEntropy(logits, labels *Node) *Node {
	classes := logits.Shape().Dimensions[1]
	oneHot := OneHot(labels, classes, logits.DType())
	return Neg(ReduceAllMean(ReduceSum(Mul(oneHot, LogSoftmax(logits)), -1)))
}

// trainRun is what trainSteps observed.
type trainRun struct {
	losses    []float64   // losses[k]: the loss after k updates
	gradNorms [][]float64 // gradNorms[k][i]: ‖∂loss/∂vars[i]‖ at step k
	vars      []string
	logits    []int
	stepTimes []time.Duration // wall time of each step after the first (which compiles)
	ctx       *context.Context
}

// trainSteps runs steps+1 plain SGD steps (θ −= lr·g) on one fixed batch in training mode and records the
// loss before each update, so losses[steps] is the loss after steps updates.
func trainSteps(t *testing.T, spec Spec, opts Options, images, labels *tensors.Tensor, steps int, lr float64) trainRun {
	t.Helper()
	run := trainRun{ctx: context.New()}
	exec, err := context.NewExec(testBackend(), run.ctx.Checked(false), func(ctx *context.Context, x, y *Node) []*Node {
		g := x.Graph()
		logits := spec.Build(ctx.In(ModelScope), x, true, opts)
		loss := crossEntropy(logits, y)
		var vars []*context.Variable
		var values []*Node
		run.vars = run.vars[:0]
		for v := range ctx.IterVariables() {
			if v.Trainable {
				vars = append(vars, v)
				values = append(values, v.ValueGraph(g))
				run.vars = append(run.vars, v.Scope()+"/"+v.Name())
			}
		}
		grads := Gradient(loss, values...)
		norms := make([]*Node, len(grads))
		for i, grad := range grads {
			norms[i] = Sqrt(ReduceAllSum(Square(ConvertDType(grad, dtypes.Float64))))
			vars[i].SetValueGraph(Sub(values[i], MulScalar(grad, lr)))
		}
		return []*Node{ConvertDType(loss, dtypes.Float64), Stack(norms, 0), dimsNode(logits)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	for k := 0; k <= steps; k++ {
		start := time.Now()
		outs, err := exec.Exec(images, labels)
		if err != nil {
			t.Fatalf("%s step %d: %v", spec.Name, k, err)
		}
		if k > 0 {
			run.stepTimes = append(run.stepTimes, time.Since(start))
		}
		run.losses = append(run.losses, tensors.MustCopyFlatData[float64](outs[0])[0])
		run.gradNorms = append(run.gradNorms, tensors.MustCopyFlatData[float64](outs[1]))
		run.logits = toInts(tensors.MustCopyFlatData[int32](outs[2]))
	}
	return run
}

// dimsNode returns x's dimensions as an int32 vector, to report them from a graph.
func dimsNode(x *Node) *Node {
	dims := make([]int32, x.Rank())
	for i, d := range x.Shape().Dimensions {
		dims[i] = int32(d)
	}
	return Const(x.Graph(), dims)
}

func toInts(v []int32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// checkTrains asserts the training run of a reduced net: logits shape, finite loss, finite and non-zero
// gradient for every trainable variable, and a loss that falls by at least minDrop over the run.
func checkTrains(t *testing.T, name string, opts Options, batch, size int, lr, minDrop float64) trainRun {
	t.Helper()
	spec, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	images, labels := tinyDataset(batch, size, spec.InputShape[2], classes(opts, spec.NumClasses))
	run := trainSteps(t, spec, opts, images, labels, 5, lr)
	if want := []int{batch, classes(opts, spec.NumClasses)}; fmt.Sprint(run.logits) != fmt.Sprint(want) {
		t.Errorf("%s: logits %v, want %v", name, run.logits, want)
	}
	for k, loss := range run.losses {
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			t.Fatalf("%s: loss %v at step %d", name, loss, k)
		}
	}
	for i, norm := range run.gradNorms[0] {
		if math.IsNaN(norm) || math.IsInf(norm, 0) || norm == 0 {
			t.Errorf("%s: gradient norm of %s is %v at the first step", name, run.vars[i], norm)
		}
	}
	// The mean of the last three losses: small BN nets on 4 examples are sensitive (float32 and float64
	// runs of ResNet-50 part after a step or two, both falling), so one step may bounce.
	first := run.losses[0]
	last := (run.losses[3] + run.losses[4] + run.losses[5]) / 3
	if !(last < first-minDrop) {
		t.Errorf("%s: loss went %.4f -> %.4f (mean of steps 3-5) with SGD lr %g, want a drop of at least %g: %v",
			name, first, last, lr, minDrop, run.losses)
	}
	var total time.Duration
	for _, d := range run.stepTimes {
		total += d
	}
	t.Logf("%s width %g, %d px, batch %d: %d trainable tensors, loss %.4f -> %.4f, one forward+backward+SGD step %v",
		name, opts.Width, size, batch, len(run.vars), first, last, total/time.Duration(len(run.stepTimes)))
	return run
}

func TestResNetsTrainAtReducedWidth(t *testing.T) {
	// 48 px keeps layer4 at 2x2, so its BatchNorms see 16 values per channel rather than 4. Measured
	// (float32 / float64): resnet34 2.83 -> 0.58 / 0.62, resnet50 2.70 -> 1.43 / 1.74.
	opts := Options{Width: 1.0 / 16, NumClasses: 10, Seed: 1}
	t.Run("resnet34", func(t *testing.T) { checkTrains(t, "resnet34", opts, 4, 48, 0.1, 0.8) })
	t.Run("resnet50", func(t *testing.T) { checkTrains(t, "resnet50", opts, 4, 48, 0.03, 0.4) })
	opts.Precision = "bfloat16"
	t.Run("resnet50 bfloat16", func(t *testing.T) { checkTrains(t, "resnet50", opts, 4, 48, 0.03, 0.4) })
}

// checkBatchNormModes asserts that a training forward pass updates every BatchNorm's running statistics,
// the first one exactly as PyTorch does (running = 0.9·running + 0.1·batch, unbiased variance), and that
// eval forward passes use them: they differ from the training output, repeat exactly and change nothing.
// preBN computes the input of the BatchNorm at scope bnScope (reusing the net's variables).
func checkBatchNormModes(t *testing.T, name string, opts Options, batch, size int, bnScope string,
	preBN func(ctx *context.Context, x *Node) *Node) {
	t.Helper()
	spec, _ := Get(name)
	images, _ := tinyDataset(batch, size, spec.InputShape[2], 10)
	ctx := context.New()
	forward := func(train bool) []float64 {
		return forward64(t, ctx.Checked(false), images, func(ctx *context.Context, x *Node) *Node {
			return spec.Build(ctx.In(ModelScope), x, train, opts)
		})
	}
	statsOf := func() map[string][]float64 {
		m := map[string][]float64{}
		for v := range ctx.IterVariables() {
			if !v.Trainable {
				m[v.Scope()+"/"+v.Name()] = variableValues(t, v)
			}
		}
		return m
	}

	// Pre-BN activations at the initial weights (training does not change weights here).
	pre := func() []float64 {
		return forward64(t, ctx.Reuse(), images, func(ctx *context.Context, x *Node) *Node {
			return preBN(ctx.In(ModelScope), x)
		})
	}

	trainOut := forward(true)
	stats := statsOf()
	if len(stats) == 0 {
		t.Fatalf("%s: no running statistics", name)
	}
	for key, v := range stats {
		init := 0.0
		if strings.HasSuffix(key, "running_var") {
			init = 1
		}
		if maxAbsDiffConst(v, init) == 0 {
			t.Errorf("%s: %s not updated by a training forward pass", name, key)
		}
	}

	// The first BatchNorm's update, against its input's batch statistics.
	x := pre()
	ch := len(stats[bnScope+"/running_mean"])
	m := len(x) / ch
	for c := range ch {
		var mean, sq float64
		for i := c; i < len(x); i += ch {
			mean += x[i]
		}
		mean /= float64(m)
		for i := c; i < len(x); i += ch {
			sq += (x[i] - mean) * (x[i] - mean)
		}
		wantMean, wantVar := 0.1*mean, 0.9+0.1*sq/float64(m-1)
		gotMean, gotVar := stats[bnScope+"/running_mean"][c], stats[bnScope+"/running_var"][c]
		if math.Abs(gotMean-wantMean) > 1e-5*(1+math.Abs(wantMean)) || math.Abs(gotVar-wantVar) > 1e-5*wantVar {
			t.Errorf("%s: %s channel %d: running mean/var %g/%g, want %g/%g", name, bnScope, c, gotMean, gotVar,
				wantMean, wantVar)
			break
		}
	}

	evalOut := forward(false)
	if maxAbsDiff(evalOut, trainOut) < 1e-3 {
		t.Errorf("%s: eval output equals the training output (max diff %g): running statistics unused", name,
			maxAbsDiff(evalOut, trainOut))
	}
	if again := forward(false); maxAbsDiff(again, evalOut) != 0 {
		t.Errorf("%s: two eval passes differ by %g", name, maxAbsDiff(again, evalOut))
	}
	for key, v := range statsOf() {
		if maxAbsDiff(v, stats[key]) != 0 {
			t.Errorf("%s: eval changed %s", name, key)
		}
	}
}

// variableValues reads a float32 or float64 variable as float64s.
func variableValues(t *testing.T, v *context.Variable) []float64 {
	t.Helper()
	value, err := v.Value()
	if err != nil {
		t.Fatal(err)
	}
	if value.DType() == dtypes.Float64 {
		return tensors.MustCopyFlatData[float64](value)
	}
	f := tensors.MustCopyFlatData[float32](value)
	out := make([]float64, len(f))
	for i, x := range f {
		out[i] = float64(x)
	}
	return out
}

func maxAbsDiff[T float32 | float64](a, b []T) float64 {
	d := math.Inf(1)
	if len(a) == len(b) {
		d = 0
		for i := range a {
			d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		}
	}
	return d
}

func maxAbsDiffConst(a []float64, c float64) float64 {
	d := 0.0
	for _, x := range a {
		d = max(d, math.Abs(x-c))
	}
	return d
}

func TestResNetBatchNormModes(t *testing.T) {
	opts := Options{Width: 1.0 / 16, NumClasses: 10, Seed: 2}
	checkBatchNormModes(t, "resnet50", opts, 4, 32, "/model/bn1", func(ctx *context.Context, x *Node) *Node {
		return Conv(ctx.In("conv1"), x, ConvConfig{Filters: scaled(64, opts.Width), Kernel: 7, Stride: 2,
			Padding: PadSymmetric, Init: InitKaimingNormalFanOut}, opts)
	})
}

// evalLogits runs one eval forward pass of a fresh net and returns its logits as float64.
func evalLogits(t *testing.T, spec Spec, opts Options, images *tensors.Tensor) []float64 {
	t.Helper()
	return forward64(t, context.New(), images, func(ctx *context.Context, x *Node) *Node {
		out := spec.Build(ctx.In(ModelScope), x, false, opts)
		if out.DType() != opts.ParamDType() {
			panic(fmt.Sprintf("logits are %s, want %s", out.DType(), opts.ParamDType()))
		}
		return out
	})
}

// forward64 runs fn on images once (a fresh exec over ctx) and returns its output as float64.
func forward64(t *testing.T, ctx *context.Context, images *tensors.Tensor, fn func(ctx *context.Context, x *Node) *Node) []float64 {
	t.Helper()
	e, err := context.NewExec(testBackend(), ctx, func(ctx *context.Context, x *Node) *Node {
		return ConvertDType(fn(ctx, x), dtypes.Float64)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	outs, err := e.Exec(images)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float64](outs[0])
}

func relDiff(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num += (a[i] - b[i]) * (a[i] - b[i])
		den += b[i] * b[i]
	}
	return math.Sqrt(num / den)
}

func TestResNetPaddingAndPrecision(t *testing.T) {
	spec, _ := Get("resnet34")
	opts := Options{Width: 1.0 / 16, NumClasses: 10, Seed: 3}
	images, _ := tinyDataset(2, 32, 3, 10)
	ref := evalLogits(t, spec, opts, images)

	// Same weights (same seed), other padding phase: other logits.
	same := opts
	same.Padding = PadSame
	if d := relDiff(evalLogits(t, spec, same, images), ref); d < 1e-3 {
		t.Errorf("SAME padding changed the logits by only %g: the override is not applied", d)
	}

	// bfloat16 compute with float32 masters: other logits, but the same function. The bound is loose: one
	// bfloat16 conv on the pure-Go backend is ~1% off (K=576), and 30+ layers of a net at its random
	// initialisation compound that (measured 0.13 here; 0.2–0.6 for ResNet-50 and in train mode).
	bf := opts
	bf.Precision = "bfloat16"
	if d := relDiff(evalLogits(t, spec, bf, images), ref); d > 0.4 || d == 0 {
		t.Errorf("bfloat16 logits differ from float32 by %g (relative), want 0 < d <= 0.4", d)
	} else {
		t.Logf("resnet34 bfloat16 vs float32 logits: relative difference %.4f", d)
	}

	// float64 verification precision: float64 logits equal to the float32 ones up to float32 rounding.
	f64 := opts
	f64.Precision = "float64"
	if d := relDiff(evalLogits(t, spec, f64, images), ref); d > 1e-4 {
		t.Errorf("float64 logits differ from float32 by %g (relative)", d)
	}
}

// torchCheckScript loads the weights a Go test wrote, runs the reference PyTorch model in float64 and
// writes its outputs: eval at the initial statistics; train (updating the running statistics) with the
// cross-entropy gradient's norm and sum per parameter; eval again.
const torchCheckScript = `
import json, sys
import numpy as np, torch, torchvision
d, name = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from torch_reference import Cifar  # scripts/torch_reference.py: the one PyTorch transcription of graphs/cifar.go
meta = json.load(open(d + "/meta.json"))
flat = np.fromfile(d + "/data.f32", dtype="<f4").astype(np.float64)

vgg = [64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0]
models = {
    "resnet34": lambda: torchvision.models.resnet34(num_classes=meta["classes"]),
    "resnet50": lambda: torchvision.models.resnet50(num_classes=meta["classes"]),
    "cifar_cnn": lambda: Cifar([32, 32, 0, 64, 64, 0], False, 512, meta["classes"]),
    "cifar8": lambda: Cifar(vgg, False, 0, meta["classes"]),
    "cifar8_bn": lambda: Cifar(vgg, True, 0, meta["classes"]),
}
m = models[name]().double()
ref = m.state_dict()
sd = {}
for e in meta["vars"]:
    a = torch.from_numpy(flat[e["offset"]:e["offset"] + e["size"]].copy()).reshape(e["shape"])
    if e["key"].endswith("weight") and a.dim() == 4:
        a = a.permute(3, 2, 0, 1)
    elif e["key"].endswith("weight") and a.dim() == 2:
        a = a.t()
    if tuple(a.shape) != tuple(ref[e["key"]].shape):
        a = a.reshape(ref[e["key"]].shape)
    sd[e["key"]] = a.contiguous()
missing, unexpected = m.load_state_dict(sd, strict=False)
assert not unexpected and all(k.endswith("num_batches_tracked") for k in missing), (missing, unexpected)
x = torch.from_numpy(flat[meta["x_offset"]:meta["x_offset"] + meta["x_size"]].copy()).reshape(meta["x_shape"])
x = x.permute(0, 3, 1, 2).contiguous()
out = {}
with torch.no_grad():
    m.eval(); out["eval0"] = m(x).flatten().tolist()
m.train()
logits = m(x)
torch.nn.functional.cross_entropy(logits, torch.tensor(meta["labels"])).backward()
out["train"] = logits.detach().flatten().tolist()
out["grads"] = {k: [p.grad.norm().item(), p.grad.sum().item()] for k, p in m.named_parameters()}
with torch.no_grad():
    m.eval(); out["eval1"] = m(x).flatten().tolist()
out["stats"] = {k: v.flatten().tolist() for k, v in m.state_dict().items() if "running" in k}
json.dump(out, open(d + "/out.json", "w"))
`

// torchPython finds a python3 with torch and torchvision (Debian's /usr/bin/python3 here), or "".
func torchPython() string {
	for _, p := range []string{os.Getenv("TRAINER_TORCH_PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		if exec.Command(p, "-c", "import torch, torchvision, numpy").Run() == nil {
			return p
		}
	}
	return ""
}

// checkAgainstTorch builds the net in float64 with its initial weights, writes them (float32-exact, as the
// host initialisers draw float32) with an input batch, and compares the logits of eval / train / eval
// passes and the running statistics with PyTorch's in float64.
func checkAgainstTorch(t *testing.T, name string, opts Options, batch, size int) {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-check against PyTorch skipped in -short mode")
	}
	python := torchPython()
	if python == "" {
		t.Skip("no python3 with torch and torchvision (set TRAINER_TORCH_PYTHON)")
	}
	spec, _ := Get(name)
	opts.Precision = "float64"
	nClasses := classes(opts, spec.NumClasses)
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float64, batch*size*size*3)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64()))
	}
	images := tensors.FromFlatDataAndDimensions(x, batch, size, size, 3)

	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = int32((3 + 5*i) % nClasses)
	}

	ctx := context.New()
	forward := func(train bool) []float64 {
		return forward64(t, ctx.Checked(false), images, func(ctx *context.Context, x *Node) *Node {
			return spec.Build(ctx.In(ModelScope), x, train, opts)
		})
	}
	// trainPass runs the training forward pass and returns the logits and, per trainable variable (by
	// state_dict key), the norm and the sum of the cross-entropy gradient.
	trainPass := func() ([]float64, map[string][2]float64) {
		var keys []string
		e, err := context.NewExec(testBackend(), ctx.Checked(false), func(ctx *context.Context, x *Node) []*Node {
			logits := spec.Build(ctx.In(ModelScope), x, true, opts)
			loss := crossEntropy(logits, Const(x.Graph(), labels))
			var values []*Node
			for v := range ctx.IterVariables() {
				if v.Trainable {
					key, _ := spec.StateDictKey(v.Scope(), v.Name())
					keys = append(keys, key)
					values = append(values, v.ValueGraph(x.Graph()))
				}
			}
			grads := Gradient(loss, values...)
			norms, sums := make([]*Node, len(grads)), make([]*Node, len(grads))
			for i, g := range grads {
				norms[i], sums[i] = Sqrt(ReduceAllSum(Square(g))), ReduceAllSum(g)
			}
			return []*Node{logits, Stack(norms, 0), Stack(sums, 0)}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Finalize()
		outs, err := e.Exec(images)
		if err != nil {
			t.Fatal(err)
		}
		norms, sums := tensors.MustCopyFlatData[float64](outs[1]), tensors.MustCopyFlatData[float64](outs[2])
		grads := map[string][2]float64{}
		for i, key := range keys {
			grads[key] = [2]float64{norms[i], sums[i]}
		}
		return tensors.MustCopyFlatData[float64](outs[0]), grads
	}
	start := time.Now()
	eval0 := forward(false)

	// Dump the initial variables and the input.
	dir := t.TempDir()
	type entry struct {
		Key    string `json:"key"`
		Shape  []int  `json:"shape"`
		Offset int    `json:"offset"`
		Size   int    `json:"size"`
	}
	meta := struct {
		Vars    []entry `json:"vars"`
		XOffset int     `json:"x_offset"`
		XSize   int     `json:"x_size"`
		XShape  []int   `json:"x_shape"`
		Classes int     `json:"classes"`
		Labels  []int32 `json:"labels"`
	}{Classes: nClasses, Labels: labels}
	var data []float32
	appendExact := func(what string, values []float64) {
		for _, v := range values {
			if float64(float32(v)) != v {
				t.Fatalf("%s: %s holds %v, not exactly a float32", name, what, v)
			}
			data = append(data, float32(v))
		}
	}
	for v := range ctx.IterVariables() {
		key, ok := spec.StateDictKey(v.Scope(), v.Name())
		if !ok {
			t.Fatalf("%s: no state_dict key for %s/%s", name, v.Scope(), v.Name())
		}
		meta.Vars = append(meta.Vars, entry{key, v.Shape().Dimensions, len(data), v.Shape().Size()})
		appendExact(key, variableValues(t, v))
	}
	meta.XOffset, meta.XSize, meta.XShape = len(data), len(x), []int{batch, size, size, 3}
	appendExact("input", x)
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	metaJSON, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), metaJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.f32"), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	trainOut, grads := trainPass()
	eval1 := forward(false)
	goTime := time.Since(start)

	scripts, err := filepath.Abs(filepath.Join("..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", torchCheckScript, dir, name, scripts)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("PyTorch reference failed: %v\n%s", err, out)
	}
	var ref struct {
		Eval0, Train, Eval1 []float64
		Stats               map[string][]float64
		Grads               map[string][2]float64
	}
	outJSON, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(outJSON, &ref); err != nil {
		t.Fatal(err)
	}
	const tol = 1e-9
	worst := 0.0
	compare := func(what string, got, want []float64) {
		if len(got) != len(want) {
			t.Errorf("%s: %s has %d values, torch %d", name, what, len(got), len(want))
			return
		}
		scale := 0.0
		for _, w := range want {
			scale = max(scale, math.Abs(w))
		}
		d := maxAbsDiff(got, want) / max(scale, 1e-30)
		worst = max(worst, d)
		if d > tol {
			t.Errorf("%s: %s differs from torch by %g relative to its largest value %g", name, what, d, scale)
		}
	}
	compare("eval logits at init", eval0, ref.Eval0)
	compare("train logits", trainOut, ref.Train)
	compare("eval logits after the train pass", eval1, ref.Eval1)
	nStats := 0
	for v := range ctx.IterVariables() {
		if v.Trainable {
			continue
		}
		key, _ := spec.StateDictKey(v.Scope(), v.Name())
		compare(key, variableValues(t, v), ref.Stats[key])
		nStats++
	}
	if nStats != len(ref.Stats) {
		t.Errorf("%s: %d running statistics, torch has %d", name, nStats, len(ref.Stats))
	}
	// Gradients: the norm relative to itself; the sum, which may cancel, relative to the larger of the two.
	if len(grads) != len(ref.Grads) {
		t.Errorf("%s: %d gradients, torch has %d", name, len(grads), len(ref.Grads))
	}
	worstGrad := 0.0
	for key, want := range ref.Grads {
		got, ok := grads[key]
		if !ok {
			t.Errorf("%s: no gradient for %s", name, key)
			continue
		}
		dNorm := math.Abs(got[0]-want[0]) / max(want[0], 1e-30)
		dSum := math.Abs(got[1]-want[1]) / max(math.Abs(want[1]), want[0], 1e-30)
		worstGrad = max(worstGrad, dNorm, dSum)
		if dNorm > tol || dSum > tol {
			t.Errorf("%s: gradient of %s: norm %g sum %g, torch %g %g", name, key, got[0], got[1], want[0], want[1])
		}
	}
	t.Logf("%s at %d px, batch %d, float64: worst relative difference to torch %.3g in outputs and statistics, "+
		"%.3g in gradients (Go passes %v)", name, size, batch, worst, worstGrad, goTime.Round(time.Millisecond))
}

func TestResNetsAgainstTorch(t *testing.T) {
	checkAgainstTorch(t, "resnet34", Options{}, 2, 48)
	checkAgainstTorch(t, "resnet50", Options{}, 2, 64)
}

// TestResNetZeroInitLast: with ZeroInitLast the γ of every block's last BatchNorm (bn2 of a
// BasicBlock, bn3 of a Bottleneck) starts at exactly 0 and every other variable is as without it; without
// it every γ starts at 1 (torchvision's default init is unchanged).
func TestResNetZeroInitLast(t *testing.T) {
	for _, c := range []struct{ name, last string }{{"resnet34", "bn2"}, {"resnet50", "bn3"}} {
		values := func(zero bool) map[string][]float64 {
			ctx := mobileGraphOnly(t, c.name, Options{Seed: 3, Width: 0.25, ZeroInitLast: zero}, 32)
			if err := ctx.InitializeVariables(testBackend(), nil); err != nil {
				t.Fatal(err)
			}
			out := map[string][]float64{}
			ctx.EnumerateVariables(func(v *context.Variable) { out[v.Scope()+"/"+v.Name()] = variableValues(t, v) })
			return out
		}
		on, off := values(true), values(false)
		zeroed := 0
		for key, v := range off {
			w := on[key]
			lastGamma := strings.HasSuffix(key, "/"+c.last+"/weight") && strings.Contains(key, "/layer")
			gamma := strings.HasSuffix(key, "/weight") && (strings.Contains(key, "/bn") || strings.HasSuffix(key, "/downsample/1/weight"))
			switch {
			case lastGamma:
				zeroed++
				if maxAbsDiffConst(w, 0) != 0 || maxAbsDiffConst(v, 1) != 0 {
					t.Errorf("%s %s: with zero_init_last max |γ| %g, without max |γ−1| %g; want exactly 0 and 1",
						c.name, key, maxAbsDiffConst(w, 0), maxAbsDiffConst(v, 1))
				}
			case gamma && maxAbsDiffConst(v, 1) != 0:
				t.Errorf("%s %s: γ differs from 1 by %g", c.name, key, maxAbsDiffConst(v, 1))
			case maxAbsDiff(v, w) != 0:
				t.Errorf("%s %s changes with zero_init_last (max diff %g)", c.name, key, maxAbsDiff(v, w))
			}
		}
		if zeroed != 16 {
			t.Errorf("%s: %d blocks' last γ seen, want 16 (3+4+6+3)", c.name, zeroed)
		}
	}
}

// TestResNetFP32Head: under bfloat16 compute, FP32Head runs the classifier in float32: a change of the
// fc bias far below bfloat16's resolution (2^-14 relative) reaches the logits, where the bfloat16 head
// rounds it away; in float32 compute the option changes nothing.
func TestResNetFP32Head(t *testing.T) {
	spec, _ := Get("resnet34")
	images, _ := tinyDataset(2, 32, 3, 10)
	nudged := func(opts Options) (before, after []float64) {
		ctx := context.New()
		build := func(ctx *context.Context, x *Node) *Node { return spec.Build(ctx.In(ModelScope), x, false, opts) }
		before = forward64(t, ctx, images, build)
		v := ctx.GetVariableByScopeAndName("/"+ModelScope+"/fc", "bias")
		b := variableValues(t, v)
		nb := make([]float32, len(b))
		for i, x := range b {
			nb[i] = float32(x * (1 + 1.0/16384))
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(nb, len(nb))); err != nil {
			t.Fatal(err)
		}
		return before, forward64(t, ctx.Reuse(), images, build)
	}
	base := Options{Width: 1.0 / 16, NumClasses: 10, Seed: 3, Precision: "bfloat16"}
	head := base
	head.FP32Head = true
	if b, a := nudged(head); maxAbsDiff(a, b) == 0 {
		t.Error("bfloat16 net with FP32Head: a 2^-14 change of the fc bias did not reach the logits")
	}
	if b, a := nudged(base); maxAbsDiff(a, b) != 0 {
		t.Errorf("bfloat16 head: a 2^-14 change of the fc bias moved the logits by %g; bfloat16 should round it away", maxAbsDiff(a, b))
	}
	f32, f32Head := Options{Width: 1.0 / 16, NumClasses: 10, Seed: 3}, Options{Width: 1.0 / 16, NumClasses: 10, Seed: 3, FP32Head: true}
	if d := maxAbsDiff(evalLogits(t, spec, f32, images), evalLogits(t, spec, f32Head, images)); d != 0 {
		t.Errorf("FP32Head in float32 compute changed the logits by %g", d)
	}
}
