package trainstep

// The data-parallel step's certificate, the property the book proves for it: one step on R replicas
// of n examples is one step on one device of R·n examples. Here both run on the pure-Go backend, the
// R replicas on R in-process devices (go:devices=R) executing the SPMD program with its all-reduces.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/recipe"
)

// dpSize, dpClasses: the equivalence net's input side and classes; dpBatch is the global batch.
const dpSize, dpClasses, dpBatch = 16, 3, 8

// dpTol64 bounds the float64 differences (relative to each tensor's largest magnitude, at least 1):
// the same arithmetic, with the gradient and BatchNorm sums taken in another order.
const dpTol64 = 1e-12

// dpConfig is the equivalence recipe: the BatchNorm VGG (cifar8_bn) at width 1/16 on 16x16 images,
// optimizer name with its defaults and weight decay, accumulation k = 2, global-norm clipping at a
// norm the gradients exceed, EMA.
func dpConfig(t *testing.T, optimizer string, replicas int) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Name, cfg.Replicas = "dp", replicas
	cfg.Net.Name, cfg.Net.Width, cfg.Net.ImageSize, cfg.Net.NumClasses = "cifar8_bn", 1.0/16, dpSize, dpClasses
	cfg.Data.Source, cfg.Data.BatchSize, cfg.Data.DeviceNormalize = "cifar10", dpBatch, "false"
	cfg.Optimizer.Name, cfg.Optimizer.LR, cfg.Optimizer.WeightDecay = optimizer, 0.05, 0.01
	cfg.Optimizer.AccumulateSteps, cfg.Optimizer.ClipGradNorm = 2, 0.5
	cfg.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// dpBatches draws micro-batches of dpBatch float32 images of dpSize×dpSize×3 and labels.
func dpBatches(seed uint64, count int) (images, labels [][]float32) {
	return randomBatches(seed, count, dpSize*dpSize*3, dpClasses)
}

// randomBatches draws micro-batches of dpBatch float32 images of px values and labels in [0, classes).
func randomBatches(seed uint64, count, px, classes int) (images, labels [][]float32) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for range count {
		x := make([]float32, dpBatch*px)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]float32, dpBatch)
		for i := range y {
			y[i] = float32(rng.IntN(classes))
		}
		images, labels = append(images, x), append(labels, y)
	}
	return images, labels
}

// shardsOf splits a batch of images [h, w, c] into replicas shards, rows [r·n, (r+1)·n) to shard r.
func shardsOf(x, y []float32, replicas int, image [3]int) (images, labels []*tensors.Tensor) {
	n, px := len(y)/replicas, image[0]*image[1]*image[2]
	for r := range replicas {
		images = append(images, tensors.FromFlatDataAndDimensions(slices.Clone(x[r*n*px:(r+1)*n*px]), n, image[0], image[1], image[2]))
		lab := make([]int32, n)
		for i := range lab {
			lab[i] = int32(y[r*n+i])
		}
		labels = append(labels, tensors.FromFlatDataAndDimensions(lab, n))
	}
	return images, labels
}

// dpRun trains cfg's net in float64 (or float32) on cfg.Replicas devices of the pure-Go backend.
type dpRun struct {
	t       *testing.T
	cfg     config.Config
	f32     bool
	backend backends.Backend
	ctx     *context.Context
	step    *Step
}

func newDPRun(t *testing.T, cfg config.Config) *dpRun { return newDPRunIn(t, cfg, false) }

func newDPRunIn(t *testing.T, cfg config.Config, f32 bool) *dpRun {
	t.Helper()
	b, err := backend.Open(fmt.Sprintf("go:devices=%d", cfg.Replicas))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	r := &dpRun{t: t, cfg: cfg, f32: f32, backend: b}
	r.restart(nil)
	return r
}

// restart builds a fresh context and step, as a resumed run does: with the variables of state (a
// checkpoint's host values), or with the initial ones (a pure function of the seed) when state is nil.
func (r *dpRun) restart(state map[string]*tensors.Tensor) {
	r.t.Helper()
	if r.step != nil {
		r.step.Finalize()
	}
	net, err := NetOf(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	if !r.f32 {
		net.Options.Precision = "float64" // verification dtype: set after validation
	}
	r.ctx = NewContext(r.cfg)
	var model Model = net
	if state != nil {
		for name, value := range state {
			scope, base := splitScopeName(name)
			r.ctx.InAbsPath(scope).Checked(false).VariableWithValue(base, mustClone(r.t, value))
		}
		model = reusing{net}
	}
	if r.step, err = New(r.backend, r.ctx, r.cfg, model); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		if r.step != nil {
			r.step.Finalize()
			r.step = nil
		}
	})
}

// asFloat64 reads a float32 or float64 tensor as float64.
func asFloat64(x *tensors.Tensor) []float64 {
	if x.DType().String() == "Float64" {
		return tensors.MustCopyFlatData[float64](x)
	}
	var out []float64
	for _, v := range tensors.MustCopyFlatData[float32](x) {
		out = append(out, float64(v))
	}
	return out
}

func mustClone(t *testing.T, x *tensors.Tensor) *tensors.Tensor {
	t.Helper()
	c, err := x.LocalClone()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func splitScopeName(scopeAndName string) (scope, name string) {
	i := len(scopeAndName) - 1
	for scopeAndName[i] != '/' {
		i--
	}
	scope, name = scopeAndName[:i], scopeAndName[i+1:]
	if scope == "" {
		scope = "/"
	}
	return scope, name
}

// microStep runs micro-batch j of optimizer step t (0-based) on the global batch x, y.
func (r *dpRun) microStep(x, y []float32, t, j int) Result {
	r.t.Helper()
	lrs := []float64{0.0625, 0.03125, 0.09375}
	k := r.cfg.Optimizer.AccumulateSteps
	sc := Scalars{LR: lrs[t%len(lrs)], Update: t + 1, Apply: j == k-1, EMADecay: 0.9, EMAFresh: t == 0}
	if j > 0 {
		sc.Keep = 1
	}
	net, err := NetOf(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	form := BatchOf(r.cfg, net)
	images, labels := shardsOf(x, y, r.cfg.Replicas, [3]int{form.Height, form.Width, form.Channels})
	res, err := r.step.RunShards(images, labels, sc)
	if err != nil {
		r.t.Fatalf("%d replica(s), step %d/%d: %v", r.cfg.Replicas, t, j, err)
	}
	return res
}

// state reads every variable to the host (device 0's copy), failing the test unless every device
// holds the same bits.
func (r *dpRun) state() map[string]*tensors.Tensor {
	r.t.Helper()
	out := map[string]*tensors.Tensor{}
	r.ctx.EnumerateVariables(func(v *context.Variable) {
		if !v.HasValue() {
			return
		}
		if r.cfg.Replicas > 1 {
			dist, err := v.DistributedValue()
			if err != nil {
				r.t.Fatal(err)
			}
			shards := dist.Shards()
			for d, shard := range shards {
				if !shard.Equal(shards[0]) {
					r.t.Errorf("%d replicas: %s on device %d differs from device 0's", r.cfg.Replicas, v.ScopeAndName(), d)
				}
			}
		}
		out[v.ScopeAndName()] = mustClone(r.t, v.MustValue())
	})
	return out
}

// stateDiff is the largest difference between two states' float tensors, relative to each tensor's
// largest magnitude (at least 1), and where it is.
func stateDiff(t *testing.T, got, want map[string]*tensors.Tensor) (float64, string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("states of %d and %d variables", len(got), len(want))
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	worst, where := 0.0, ""
	for _, name := range names {
		g, ok := got[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if !want[name].DType().IsFloat() {
			if !g.Equal(want[name]) {
				t.Errorf("%s differs", name)
			}
			continue
		}
		a, b := asFloat64(g), asFloat64(want[name])
		scale := 1.0
		for _, v := range b {
			scale = max(scale, math.Abs(v))
		}
		for i := range a {
			if d := math.Abs(a[i]-b[i]) / scale; d > worst || math.IsNaN(d) {
				worst, where = d, fmt.Sprintf("%s[%d]", name, i)
			}
		}
	}
	return worst, where
}

// TestReplicasEqualOneDevice: for SGD-momentum, AdamW, LAMB and RMSProp-TF with sync BatchNorm,
// accumulation k = 2, clipping and EMA, three optimizer steps on R = 2 and 4 replicas, resumed from
// host values after the second, leave every variable (weights, BatchNorm statistics, optimizer slots,
// gradient sums, EMA shadows) within dpTol64 of one device's run on the joined batches, with every
// device's copy identical; the losses and correct counts are the global batch's.
func TestReplicasEqualOneDevice(t *testing.T) {
	const steps, k = 3, 2
	images, labels := dpBatches(11, steps*k)
	for _, opt := range []string{"sgd", "adamw", "lamb", "rmsprop_tf"} {
		for _, replicas := range []int{2, 4} {
			one, many := newDPRun(t, dpConfig(t, opt, 1)), newDPRun(t, dpConfig(t, opt, replicas))
			worst := 0.0
			for s := range steps {
				if s == 2 { // resume both from their checkpoint-like host state
					one.restart(one.state())
					many.restart(many.state())
				}
				for j := range k {
					i := s*k + j
					a, b := one.microStep(images[i], labels[i], s, j), many.microStep(images[i], labels[i], s, j)
					if math.Abs(a.Loss-b.Loss) > 1e-6*math.Abs(a.Loss) || a.Correct != b.Correct || b.NonFinite.Any() {
						t.Errorf("%s, %d replicas, micro-batch %d: loss %v correct %v, one device %v %v", opt, replicas, i,
							b.Loss, b.Correct, a.Loss, a.Correct)
					}
					if len(b.ShardLosses) != replicas {
						t.Errorf("%s, %d replicas: %d shard losses", opt, replicas, len(b.ShardLosses))
					}
				}
				d, where := stateDiff(t, many.state(), one.state())
				if d > dpTol64 {
					t.Errorf("%s, %d replicas, after step %d: state differs by %.3g at %s", opt, replicas, s+1, d, where)
				}
				worst = max(worst, d)
			}
			t.Logf("%s, %d replicas: largest relative difference from one device over %d steps: %.2g", opt, replicas, steps, worst)
		}
	}
}

// oneShard is rows [r·n, (r+1)·n) of a batch of replicas·n rows.
func oneShard(x, y []float32, r, replicas int) ([]float32, []float32) {
	n, px := len(y)/replicas, dpSize*dpSize*3
	return x[r*n*px : (r+1)*n*px], y[r*n : (r+1)*n]
}

// TestPerReplicaBatchNorm: with data_parallel.sync_bn false each replica normalises over its own shard.
// One SGD-momentum step from the initial weights is linear in the gradient, so the R-replica step must
// leave the mean of R one-device steps, one on each shard alone (their weights, velocities and
// BatchNorm running statistics, which the step averages over the replicas), and it must differ from
// the global-batch step. Replica r's own loss is shard r's: the shards reach their devices in order
// (the shards' losses all differ, so a swap would fail the check).
func TestPerReplicaBatchNorm(t *testing.T) {
	images, labels := dpBatches(5, 1)
	x, y := images[0], labels[0]
	for _, replicas := range []int{2, 4} {
		cfg := dpConfig(t, "sgd", replicas)
		cfg.Optimizer.AccumulateSteps, cfg.Optimizer.ClipGradNorm, cfg.EMA.Decay = 1, 0, 0
		cfg.DataParallel.SyncBN = false
		many := newDPRun(t, cfg)
		res := many.microStep(x, y, 0, 0)
		got := many.state()

		global := cfg
		global.Replicas, global.DataParallel.SyncBN = 1, true
		whole := newDPRun(t, global)
		whole.microStep(x, y, 0, 0)

		shard := global
		shard.Data.BatchSize = dpBatch / replicas
		mean := map[string][]float64{}
		for r := range replicas {
			run := newDPRun(t, shard)
			xr, yr := oneShard(x, y, r, replicas)
			alone := run.microStep(xr, yr, 0, 0)
			if math.Abs(res.ShardLosses[r]-alone.Loss) > 1e-6*alone.Loss {
				t.Errorf("%d replicas: replica %d's loss %v, shard %d's alone %v", replicas, r, res.ShardLosses[r], r, alone.Loss)
			}
			for name, v := range run.state() {
				if v.DType().String() != "Float64" {
					continue
				}
				vals := tensors.MustCopyFlatData[float64](v)
				if mean[name] == nil {
					mean[name] = make([]float64, len(vals))
				}
				for i, x := range vals {
					mean[name][i] += x / float64(replicas)
				}
			}
		}
		for i, a := range res.ShardLosses {
			for _, b := range res.ShardLosses[:i] {
				if math.Abs(a-b) < 1e-4 {
					t.Fatalf("%d replicas: two shards have the same loss %v: the placement check cannot tell them apart", replicas, a)
				}
			}
		}
		want := map[string]*tensors.Tensor{}
		for name, v := range got {
			want[name] = v
			if m, ok := mean[name]; ok {
				want[name] = tensors.FromFlatDataAndDimensions(m, v.Shape().Dimensions...)
			}
		}
		if d, where := stateDiff(t, got, want); d > dpTol64 {
			t.Errorf("%d replicas without sync BN: state differs from the mean of the shards' steps by %.3g at %s", replicas, d, where)
		}
		d, where := stateDiff(t, got, whole.state())
		if d < 1e-6 {
			t.Errorf("%d replicas without sync BN: state within %.3g of the global-batch step: per-shard BatchNorm made no difference", replicas, d)
		}
		t.Logf("%d replicas without sync BN: differs from the global-batch step by %.2g (at %s)", replicas, d, where)
	}
}

// dpTol32 bounds the float32 differences of TestReplicasEqualOneDeviceFloat32 (relative to each
// tensor's largest magnitude, at least 1): float32 rounds at 6e-8 and the sums are reordered (SGD
// measured 2e-6). AdamW divides by √v, so an element whose gradient is near zero moves by up to lr
// whatever its rounding: its reordered sums show at full size (measured 7e-5).
var dpTol32 = map[string]float64{"sgd": 1e-5, "adamw": 2e-4}

// TestReplicasEqualOneDeviceFloat32: the same certificate in float32, the dtype runs train in, to
// rounding.
func TestReplicasEqualOneDeviceFloat32(t *testing.T) {
	const steps, k = 3, 2
	images, labels := dpBatches(13, steps*k)
	for _, opt := range []string{"sgd", "adamw"} {
		for _, replicas := range []int{2, 4} {
			one, many := newDPRunIn(t, dpConfig(t, opt, 1), true), newDPRunIn(t, dpConfig(t, opt, replicas), true)
			for s := range steps {
				for j := range k {
					i := s*k + j
					one.microStep(images[i], labels[i], s, j)
					many.microStep(images[i], labels[i], s, j)
				}
			}
			d, where := stateDiff(t, many.state(), one.state())
			if d > dpTol32[opt] {
				t.Errorf("%s, %d replicas, float32: state differs by %.3g at %s", opt, replicas, d, where)
			}
			t.Logf("%s, %d replicas, float32: largest relative difference from one device after %d steps: %.2g", opt, replicas, steps, d)
		}
	}
}

// TestReplicasDrawTheGlobalMasks: dropout on R replicas draws the one-device run's masks (each replica
// draws the global batch's and keeps its shard's rows), so the BatchNorm-and-dropout MLP at dropout
// 0.5 trains on 2 and 4 replicas exactly as on one device, to float64 rounding, over two steps.
func TestReplicasDrawTheGlobalMasks(t *testing.T) {
	const px, classes = 28 * 28, 10
	images, labels := randomBatches(17, 2, px, classes)
	config := func(replicas int) config.Config {
		cfg := dpConfig(t, "sgd", replicas)
		cfg.Net = config.Defaults().Net
		cfg.Net.Name, cfg.Net.Dropout = testnets.BNDropoutMLP, 0.5
		cfg.Data.Source = "mnist"
		cfg.Optimizer.AccumulateSteps = 1
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	one := newDPRun(t, config(1))
	for i := range images {
		one.microStep(images[i], labels[i], i, 0)
	}
	for _, replicas := range []int{2, 4} {
		many := newDPRun(t, config(replicas))
		for i := range images {
			many.microStep(images[i], labels[i], i, 0)
		}
		if d, where := stateDiff(t, many.state(), one.state()); d > dpTol64 {
			t.Errorf("%d replicas with dropout: state differs from one device's by %.3g at %s", replicas, d, where)
		}
	}
}

// TestReplicasGuardTogether: a non-finite value in one replica's shard is non-finite on every replica
// (the all-reduced gradients carry it), so under guard.nonfinite skip every replica withholds the step
// alike: the result names what one device names for the joined batch, and every variable on every
// device is as it was.
func TestReplicasGuardTogether(t *testing.T) {
	images, labels := dpBatches(19, 1)
	x, y := slices.Clone(images[0]), labels[0]
	x[len(x)-1] = float32(math.NaN()) // the last replica's shard
	config := func(replicas int) config.Config {
		cfg := dpConfig(t, "adamw", replicas)
		cfg.Optimizer.AccumulateSteps, cfg.Guard.NonFinite = 1, config.GuardSkip
		return cfg
	}
	one := newDPRun(t, config(1))
	one.microStep(images[0], y, 0, 0)
	want := one.microStep(x, y, 1, 0).NonFinite
	if !want.Any() {
		t.Fatal("one device: the NaN pixel made nothing non-finite")
	}
	for _, replicas := range []int{2, 4} {
		run := newDPRun(t, config(replicas))
		run.microStep(images[0], y, 0, 0) // one good step, so that slots and shadows exist
		before := run.state()
		if got := run.microStep(x, y, 1, 0).NonFinite; got != want {
			t.Errorf("%d replicas: a NaN in the last shard gave %+v, one device %+v", replicas, got, want)
		}
		if d, where := stateDiff(t, run.state(), before); d != 0 {
			t.Errorf("%d replicas: the skipped step changed %s (by %.3g)", replicas, where, d)
		}
	}
}

// sameStepsOnBackends runs the same float32 steps of cfg on backends a and b (backend.Open names) and
// reports, as errors naming what, each variable whose bits differ between the two.
func sameStepsOnBackends(t *testing.T, cfg config.Config, a, b, what string, images, labels [][]float32) {
	t.Helper()
	run := func(mode string) map[string]*tensors.Tensor {
		be, err := backend.Open(mode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(be.Finalize)
		r := &dpRun{t: t, cfg: cfg, f32: true, backend: be}
		r.restart(nil)
		for s := range images {
			r.microStep(images[s], labels[s], s, 0)
		}
		return r.state()
	}
	want, got := run(a), run(b)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%s: %d variables on %s, %d on %s", what, len(got), b, len(want), a)
	}
	for name, w := range want {
		if g := got[name]; g == nil || !g.Equal(w) {
			t.Errorf("%s: %s after %d steps differs between %s and %s", what, name, len(images), a, b)
		}
	}
}
