package verify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/gomlxfix"
	"github.com/trainer/trainer/trainstep"
)

// NetConfig sizes a whole-net gradient check. Zero fields take the defaults.
type NetConfig struct {
	// Width multiplies the net's widths (default 0.125).
	Width float64
	// ImageSize is the input resolution (default 48; nets whose default input is smaller keep theirs,
	// and a net that cannot be built at this size is tried at 2x, 4x, ... up to its default). 48 px
	// leaves a 2x2 map after a 32x downsampling; at 32 px the last stage is 1x1 and its BatchNorms
	// normalise only m = batch values, which makes the loss so curved that central differences at
	// step 1e-5 are off by 10³ (measured on resnet50, batch 2) although the gradient is right.
	ImageSize int
	// Batch is the number of examples (default 4). BatchNorm over m = batch values (after a global
	// pool, as MobileNetV4's head has) is very curved at m = 2: gradients of 10³ and central differences
	// that need steps of 1e-9 (measured); m = 4 is tame.
	Batch int
	// Coords is the number of sampled coordinates per parameter tensor (default 3): its largest
	// gradient and random others.
	Coords int
	// DropPath is the stochastic-depth rate of the second pass (default 0.25); negative skips it.
	DropPath float64
	// Step is the central-difference step (default 1e-6).
	Step float64
	// Seed draws the weights, the jitter, the batch and the sampled coordinates.
	Seed uint64
}

func (c NetConfig) withDefaults() NetConfig {
	if c.Width == 0 {
		c.Width = 0.125
	}
	if c.ImageSize == 0 {
		c.ImageSize = 48
	}
	if c.Batch == 0 {
		c.Batch = 4
	}
	if c.Coords == 0 {
		c.Coords = 3
	}
	if c.DropPath == 0 {
		c.DropPath = 0.25
	}
	if c.Step == 0 {
		c.Step = 1e-6
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Tolerances of the whole-net check. Per sampled coordinate, the error is |autodiff − FD| / max(|FD|,
// floor), floor = max(1e-3·(the tensor's largest |gradient|), noise/netTol), where noise =
// netLossULPs·max(1, |loss|)/step bounds what the rounding of the float64 loss does to the difference
// quotient (measured: 4 to 100 ulps of the loss, the more the more curved the net). A coordinate passes
// when one of the steps Step, Step/10, Step/100 gives an error ≤ netTol: the truncation h²·f”'/6 of a
// small-batch BatchNorm net can be large (measured on mobilenetv4 at batch 2: 0.19 at step 1e-5, 5e-8
// at 1e-8), and a ReLU or max-pool kink within the step spoils that step only, while a wrong gradient
// disagrees at every step.
const (
	netTol      = 1e-5
	netLossULPs = 1e-14
	netSteps    = 3
)

// CheckNet checks the named registered net: the autodiff gradient of its float64 cross-entropy loss
// in training mode against central differences of the same graph's loss, at sampled coordinates of
// every parameter tensor; once without drop path and once with it.
func CheckNet(backend backends.Backend, name string, cfg NetConfig) []Result {
	prefix := "net:" + name
	spec, err := graphs.Get(name)
	if err != nil {
		return []Result{failed(prefix, "", err)}
	}
	return checkSpec(backend, spec, cfg)
}

// CheckNets runs CheckNet for each name.
func CheckNets(backend backends.Backend, names []string, cfg NetConfig) []Result {
	var results []Result
	for _, name := range names {
		results = append(results, CheckNet(backend, name, cfg)...)
	}
	return results
}

func checkSpec(backend backends.Backend, spec graphs.Spec, cfg NetConfig) []Result {
	gomlxfix.Install() // the gradients checked are the ones the train step takes
	cfg = cfg.withDefaults()
	prefix := "net:" + spec.Name
	size, err := netImageSize(backend, spec, cfg)
	if err != nil {
		return []Result{failed(prefix, "", err)}
	}
	zero, rate := 0.0, cfg.DropPath
	var results []Result
	base := &netRun{backend: backend, spec: spec, cfg: cfg, size: size}
	results = append(results, safeRun(prefix+"/grad", func() []Result {
		return []Result{base.check(prefix+"/grad", &zero)}
	})...)
	if rate > 0 {
		results = append(results, safeRun(prefix+"/grad_drop_path", func() []Result {
			return []Result{base.check(prefix+"/grad_drop_path", &rate)}
		})...)
	}
	return results
}

// netImageSize picks the check's resolution: the net's own when it is at most cfg.ImageSize, else the
// smallest of cfg.ImageSize·2^k (up to the default) at which the net builds.
func netImageSize(backend backends.Backend, spec graphs.Spec, cfg NetConfig) (int, error) {
	def := spec.InputShape[0]
	if def <= cfg.ImageSize {
		return def, nil
	}
	var lastErr error
	for size := cfg.ImageSize; ; size *= 2 {
		if size >= def {
			size = def
		}
		if lastErr = tryBuild(backend, spec, cfg, size); lastErr == nil {
			return size, nil
		}
		if size == def {
			return 0, fmt.Errorf("net %q does not build at width %g, even at %d px: %w", spec.Name, cfg.Width, def, lastErr)
		}
	}
}

func tryBuild(backend backends.Backend, spec graphs.Spec, cfg NetConfig, size int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	g := NewGraph(backend, "probe")
	defer g.Finalize()
	images := Parameter(g, "images", shapes.Make(dtypes.Float32, cfg.Batch, size, size, spec.InputShape[2]))
	opts := graphs.Options{NumClasses: 10, Width: cfg.Width, ImageSize: size, Precision: "float64"}
	spec.Build(context.New().In(graphs.ModelScope), images, true, opts)
	return nil
}

// netRun holds one net's context across its passes: the weights are drawn and jittered once.
type netRun struct {
	backend backends.Backend
	spec    graphs.Spec
	cfg     NetConfig
	size    int

	ctx            *context.Context
	images, labels *tensors.Tensor
	vars           []*context.Variable // trainable, model scope, sorted by name
	snapshot       map[*context.Variable]*tensors.Tensor
	// loss0 is the first pass's loss (no drop path), to tell whether drop path changes anything.
	loss0 *float64
	// noReplay skips the RNG reset between evaluations (tests show the check then fails).
	noReplay bool
}

func (r *netRun) opts(dropPath *float64) graphs.Options {
	return graphs.Options{NumClasses: 10, Width: r.cfg.Width, ImageSize: r.size, Precision: "float64",
		Seed: r.cfg.Seed, DropPathRate: dropPath}
}

// loss builds the net in training mode and its mean cross-entropy.
func (r *netRun) loss(ctx *context.Context, images, labels *Node, dropPath *float64) *Node {
	logits := r.spec.Build(ctx.In(graphs.ModelScope), images, true, r.opts(dropPath))
	if logits.DType() != dtypes.Float64 {
		panic(fmt.Errorf("logits are %s under Precision \"float64\": the net must call graphs.ToCompute on its input "+
			"and graphs.FromCompute on its logits", logits.DType()))
	}
	return trainstep.SoftmaxCrossEntropy(logits, labels, 0)
}

// setup draws the batch, builds the variables, jitters them and snapshots every variable.
func (r *netRun) setup(dropPath *float64) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, seed(r.spec.Name)))
	c := r.spec.InputShape[2]
	pix := make([]float32, r.cfg.Batch*r.size*r.size*c)
	for i := range pix {
		pix[i] = float32(rng.NormFloat64())
	}
	r.images = tensors.FromFlatDataAndDimensions(pix, r.cfg.Batch, r.size, r.size, c)
	lab := make([]int32, r.cfg.Batch)
	for i := range lab {
		lab[i] = int32(rng.IntN(10))
	}
	r.labels = tensors.FromFlatDataAndDimensions(lab, r.cfg.Batch)

	r.ctx = context.New()
	if err := r.ctx.SetRNGStateFromSeed(int64(r.cfg.Seed)); err != nil {
		panic(err)
	}
	probe, err := context.NewExec(r.backend, r.ctx, func(ctx *context.Context, images, labels *Node) *Node {
		return r.loss(ctx, images, labels, dropPath)
	})
	if err != nil {
		panic(err)
	}
	if err := probe.PreCompile(r.images, r.labels); err != nil {
		panic(err)
	}
	probe.Finalize()
	if err := r.ctx.InitializeVariables(r.backend, nil); err != nil {
		panic(err)
	}
	for v := range r.ctx.IterVariables() {
		if v.Trainable && strings.HasPrefix(v.Scope(), "/"+graphs.ModelScope) {
			r.vars = append(r.vars, v)
		}
	}
	sort.Slice(r.vars, func(i, j int) bool { return r.vars[i].ScopeAndName() < r.vars[j].ScopeAndName() })
	// Check at a generic point, not at the initialisation: zero biases, unit γ, and ConvNeXt's 1e-6
	// layer scales (which make every block nearly the identity) would hide errors that need them
	// non-trivial.
	for _, v := range r.vars {
		x := tensors.MustCopyFlatData[float64](v.MustValue())
		rms := 0.0
		for _, e := range x {
			rms += e * e
		}
		sigma := 0.2 * max(math.Sqrt(rms/float64(len(x))), 0.1)
		for i := range x {
			x[i] += sigma * rng.NormFloat64()
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(x, v.Shape().Dimensions...)); err != nil {
			panic(err)
		}
	}
	r.snapshot = map[*context.Variable]*tensors.Tensor{}
	for v := range r.ctx.IterVariables() {
		clone, err := v.MustValue().LocalClone()
		if err != nil {
			panic(err)
		}
		r.snapshot[v] = clone
	}
}

// restore puts back the snapshot of every variable the graph changes (BatchNorm's running statistics,
// the RNG state), so each evaluation sees the same state and draws the same dropout and drop-path masks.
func (r *netRun) restore(all bool) {
	for v, t := range r.snapshot {
		if r.noReplay && !all && v.Name() == context.RNGStateVariableName {
			continue
		}
		if all || !v.Trainable {
			clone, err := t.LocalClone()
			if err != nil {
				panic(err)
			}
			if err := v.SetValue(clone); err != nil {
				panic(err)
			}
		}
	}
}

func (r *netRun) check(name string, dropPath *float64) Result {
	if r.ctx == nil {
		r.setup(dropPath)
	}
	r.restore(true)
	gradExec, err := context.NewExec(r.backend, r.ctx.Reuse(), func(ctx *context.Context, images, labels *Node) []*Node {
		g := images.Graph()
		loss := r.loss(ctx, images, labels, dropPath)
		nodes := make([]*Node, len(r.vars))
		for i, v := range r.vars {
			nodes[i] = v.ValueGraph(g)
		}
		return append([]*Node{loss}, Gradient(loss, nodes...)...)
	})
	if err != nil {
		panic(err)
	}
	defer gradExec.Finalize()
	lossExec, err := context.NewExec(r.backend, r.ctx.Reuse(), func(ctx *context.Context, images, labels *Node) *Node {
		return r.loss(ctx, images, labels, dropPath)
	})
	if err != nil {
		panic(err)
	}
	defer lossExec.Finalize()
	evalLoss := func() float64 {
		r.restore(false)
		out, err := lossExec.Exec(r.images, r.labels)
		if err != nil {
			panic(err)
		}
		return tensors.ToScalar[float64](out[0])
	}

	r.restore(false)
	outs, err := gradExec.Exec(r.images, r.labels)
	if err != nil {
		panic(err)
	}
	grads := make([][]float64, len(r.vars))
	params := 0
	for i := range r.vars {
		grads[i] = tensors.MustCopyFlatData[float64](outs[i+1])
		params += len(grads[i])
	}
	// The same loss from the loss-only graph: the two graphs agree and replay the same masks.
	loss0 := tensors.ToScalar[float64](outs[0])
	if l := evalLoss(); l != loss0 && !r.noReplay {
		return Result{Name: name, Shapes: r.shapes(len(r.vars), params, 0), MaxAbsErr: math.Abs(l - loss0), MaxRelErr: inf, Tolerance: netTol,
			Note: fmt.Sprintf("the loss graph gives %v, the gradient graph %v: state not replayed", l, loss0)}
	}
	if *dropPath == 0 {
		r.loss0 = &loss0
	} else if r.loss0 != nil && *r.loss0 == loss0 {
		return Result{Name: name, Shapes: r.shapes(len(r.vars), params, 0), Tolerance: netTol, Pass: true,
			Note: "not applicable: the loss does not change with the drop-path rate (the net has no drop path)"}
	}

	rng := rand.New(rand.NewPCG(r.cfg.Seed, seed(name)))
	h := r.cfg.Step
	var maxAbs, maxRel float64
	worst, coords, retried := "", 0, 0
	for i, v := range r.vars {
		base := tensors.MustCopyFlatData[float64](r.snapshot[v])
		dims := v.Shape().Dimensions
		lossAt := func(j int, x float64) float64 {
			pert := append([]float64(nil), base...)
			pert[j] = x
			if err := v.SetValue(tensors.FromFlatDataAndDimensions(pert, dims...)); err != nil {
				panic(err)
			}
			return evalLoss()
		}
		tensorMax := 0.0
		for _, g := range grads[i] {
			tensorMax = max(tensorMax, math.Abs(g))
		}
		for _, j := range sampleCoords(grads[i], r.cfg.Coords, rng) {
			ad := grads[i][j]
			rel, abs := inf, inf
			step := h
			for k := range netSteps {
				up, down := base[j]+step, base[j]-step
				fd := (lossAt(j, up) - lossAt(j, down)) / (up - down)
				noise := netLossULPs * max(1, math.Abs(loss0)) / step
				floor := max(1e-3*tensorMax, noise/netTol, 1e-300)
				a := math.Abs(ad - fd)
				if e := a / max(math.Abs(fd), floor); e < rel {
					rel, abs = e, a
				}
				if rel <= netTol {
					break
				}
				if k == 0 {
					retried++
				}
				step /= 10
			}
			coords++
			maxAbs = max(maxAbs, abs)
			if rel > maxRel {
				maxRel, worst = rel, fmt.Sprintf("%s[%d]", v.ScopeAndName(), j)
			}
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(base, dims...)); err != nil {
			panic(err)
		}
	}
	res := within(name, r.shapes(len(r.vars), params, coords), maxAbs, maxRel, netTol)
	var notes []string
	if !res.Pass {
		notes = append(notes, "worst: "+worst)
	}
	if retried > 0 {
		notes = append(notes, fmt.Sprintf("%d coords needed smaller steps", retried))
	}
	res.Note = strings.Join(notes, "; ")
	return res
}

func (r *netRun) shapes(tensors, params, coords int) string {
	return fmt.Sprintf("images %dx%dx%dx%d, width %g, %d tensors (%d params), %d coords",
		r.cfg.Batch, r.size, r.size, r.spec.InputShape[2], r.cfg.Width, tensors, params, coords)
}

// sampleCoords picks the coordinate of the largest |gradient| and n−1 other distinct random ones.
func sampleCoords(grad []float64, n int, rng *rand.Rand) []int {
	if len(grad) <= n {
		idx := make([]int, len(grad))
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	best := 0
	for i, g := range grad {
		if math.Abs(g) > math.Abs(grad[best]) {
			best = i
		}
	}
	picked := map[int]bool{best: true}
	idx := []int{best}
	for len(idx) < n {
		j := rng.IntN(len(grad))
		if !picked[j] {
			picked[j] = true
			idx = append(idx, j)
		}
	}
	return idx
}
