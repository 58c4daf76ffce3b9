package trainer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"

	"github.com/trainer/trainer/data"
)

// clipEpsilon is the ε of global-norm clipping, min(1, c/(‖g‖+ε)) (PyTorch's clip_grad_norm_ and timm).
const clipEpsilon = 1e-6

// accumulatorScope holds the gradient sums of accumulation; optimizer slots live under /optimizer.
const accumulatorScope = "/accumulate"

// stepScalars are the host values one execution of the train step reads.
type stepScalars struct {
	LR   float64
	Host []float64 // the optimizer's HostScalars(t)
	// EMADecay is d of the weights' EMA; EMAFresh makes the shadows start from the weights as they
	// were before this step (the first update, or shadows a checkpoint did not hold).
	EMADecay float64
	EMAFresh bool
	// Keep multiplies the gradient sum before this micro-batch's gradient is added (0 on the first
	// micro-batch of a step, 1 after); Apply is set on the last one, which updates the weights.
	Keep  float64
	Apply bool
}

// trainStep is the compiled step: forward, loss, backward, (accumulation), clipping, optimizer, EMA.
// Every value that changes during a run is an input, so it compiles once.
type trainStep struct {
	exec       *context.Exec
	hostCount  int
	accumulate int
	ema        bool
	guard      stepGuard // finiteness flags of the loss and each gradient (trainer/guard.go)
}

// Finalize releases the compiled graph.
func (ts *trainStep) Finalize() { ts.exec.Finalize() }

// run executes one (micro-)step and returns the batch's mean loss and number of correct top-1 predictions.
func (ts *trainStep) run(images, labels *tensors.Tensor, sc stepScalars) (loss, correct float64, err error) {
	if err := ts.checkScalars(sc); err != nil {
		return 0, 0, err
	}
	return ts.execute(append([]any{images, labels}, ts.scalarArgs(sc)...))
}

// checkScalars checks that sc carries the optimizer scalars the step was built for.
func (ts *trainStep) checkScalars(sc stepScalars) error {
	if len(sc.Host) != ts.hostCount {
		return fmt.Errorf("train step: %d optimizer scalars, the step was built for %d", len(sc.Host), ts.hostCount)
	}
	return nil
}

// execute runs the compiled step on args and reads the outputs the host logs: the mean loss, the
// correct count and the guard's finiteness flags (with several devices, device 0's replicated copies
// come first).
func (ts *trainStep) execute(args []any) (loss, correct float64, err error) {
	outs, err := ts.exec.Exec(args...)
	if err != nil {
		return 0, 0, err
	}
	loss = float64(tensors.ToScalar[float32](outs[0]))
	correct = float64(tensors.ToScalar[float32](outs[1]))
	ts.guard.read(outs[2])
	for _, o := range outs {
		o.FinalizeAll()
	}
	return loss, correct, nil
}

func flag(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// newTrainStep builds (lazily, at the first run) the train step of the session's config.
func (s *session) newTrainStep(opt Optimizer) (*trainStep, error) {
	ts := &trainStep{hostCount: len(opt.HostScalars(1)), accumulate: max(s.cfg.Optimizer.AccumulateSteps, 1),
		ema: s.cfg.EMA.Decay > 0}
	ts.guard.gate = s.cfg.Guard.SkipsNonFinite()
	clip := s.cfg.Optimizer.ClipGradNorm
	exec, err := context.NewExec(s.backend, s.ctx, func(ctx *context.Context, in []*Node) []*Node {
		images, labels, lr := in[0], in[1], in[2]
		host := in[3 : 3+ts.hostCount]
		next := 3 + ts.hostCount
		g := images.Graph()
		ctx.SetTraining(g, true)
		logits := s.forward(ctx, s.netInput(images), true)
		loss := s.trainLoss(logits, labels)
		vars, decay := s.trainables(ctx, g)
		nodes := make([]*Node, len(vars))
		for i, v := range vars {
			nodes[i] = v.ValueGraph(g)
		}
		grads := Gradient(loss, nodes...)
		sums := squaredNorms(grads)
		finite, ok := ts.guard.measure(loss, vars, sums)
		var emaDecay, emaFresh, keep, apply *Node
		if ts.ema {
			emaDecay, emaFresh = in[next], in[next+1]
			next += 2
		}
		if ts.accumulate > 1 {
			keep, apply = in[next], in[next+1]
			grads = accumulateGradients(ctx, vars, grads, keep, ts.accumulate)
		}
		if clip > 0 {
			if ts.accumulate > 1 {
				sums = squaredNorms(grads) // of the accumulated mean, not of this micro-batch
			}
			grads = clipWithSquaredNorms(grads, sums, clip)
		}
		opt.Update(ctx, vars, grads, decay, lr, host...)
		if ts.ema {
			updateEMA(ctx, g, emaDecay, emaFresh)
		}
		if apply != nil {
			gateUpdates(ctx, g, apply)
		}
		ts.guard.gateAll(ctx, g, ok) // last: a skipped step changes nothing
		if labels.Rank() == 2 {
			labels = ArgMax(labels, -1, dtypes.Int32) // soft targets: accuracy against the dominant class
		}
		correct := ReduceAllSum(ConvertDType(Equal(ArgMax(logits, -1, dtypes.Int32), labels), dtypes.Float32))
		return []*Node{ConvertDType(loss, dtypes.Float32), correct, finite}
	})
	if err != nil {
		return nil, err
	}
	ts.exec = exec
	return ts, nil
}

// netInput is the net's input for a batch as the loader hands it over: float32 images are already
// normalised; uint8 pixels (data.device_normalize) are normalised here first.
func (s *session) netInput(images *Node) *Node {
	if images.DType() != dtypes.Uint8 {
		return images
	}
	mean, std := s.cfg.Data.Normalisation()
	table, err := data.NormalizeTable(mean, std, images.Shape().Dimensions[images.Rank()-1])
	if err != nil {
		panic(fmt.Errorf("data.mean, data.std: %w", err))
	}
	return NormalizePixels(images, table)
}

// NormalizePixels maps uint8 pixels x [..., c] to table[x*c + channel] in float32: the loader's
// own normalisation table (data.NormalizeTable), looked up rather than recomputed so the floats
// are the host's bit for bit on every backend (XLA may rewrite a division by a constant as a
// multiplication by its reciprocal, which rounds differently).
func NormalizePixels(x *Node, table []float32) *Node {
	g := x.Graph()
	dims := x.Shape().Dimensions
	c := dims[len(dims)-1]
	if len(table) != 256*c {
		panic(fmt.Sprintf("NormalizePixels: a table of %d values for %d channels, want %d", len(table), c, 256*c))
	}
	idx := ConvertDType(x, dtypes.Int32)
	if c > 1 {
		idx = Add(MulScalar(idx, float64(c)), Iota(g, shapes.Make(dtypes.Int32, dims...), len(dims)-1))
	}
	// Flat indices [n, 1]: GoMLX v0.26's shape inference checks Gather's index axis against the
	// operand's rank, so a [b, h, w, c, 1] index into the rank-1 table is refused.
	n := x.Shape().Size()
	return Reshape(Gather(Const(g, table), Reshape(idx, n, 1)), dims...)
}

// trainables lists the net's trained variables in g (sorted by name, so the update order is stable)
// and whether weight decay applies to each.
func (s *session) trainables(ctx *context.Context, g *Graph) ([]*context.Variable, []bool) {
	var vars []*context.Variable
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Trainable && v.InUseByGraph(g) && strings.HasPrefix(v.Scope(), "/"+modelScope) {
			vars = append(vars, v)
		}
	})
	sort.Slice(vars, func(i, j int) bool { return vars[i].ScopeAndName() < vars[j].ScopeAndName() })
	decay := make([]bool, len(vars))
	for i, v := range vars {
		decay[i] = !s.spec.ExcludedFromWeightDecay(v.Scope(), v.Name())
	}
	return vars, decay
}

// trainLoss is the configured loss of logits [batch, classes] against integer labels [batch], or
// against soft targets [batch, classes] (mixup/cutmix, smoothing already folded in by the loader):
// SoftCrossEntropy, or BCE on the soft targets binarised at the threshold as timm does.
func (s *session) trainLoss(logits, labels *Node) *Node {
	l := s.cfg.Loss
	soft := labels.Rank() == 2
	if l.Name != "bce" {
		if soft {
			return SoftCrossEntropy(logits, labels)
		}
		return SoftmaxCrossEntropy(logits, labels, l.LabelSmoothing)
	}
	classes := logits.Shape().Dimensions[logits.Rank()-1]
	var targets *Node
	if soft {
		targets = ConvertDType(labels, logits.DType())
		if l.BCETargetThreshold > 0 {
			targets = ConvertDType(GreaterThan(targets, Scalar(labels.Graph(), targets.DType(), l.BCETargetThreshold)), targets.DType())
		}
	} else {
		targets = BCETargets(labels, classes, l.LabelSmoothing, l.BCETargetThreshold, logits.DType())
	}
	loss := BCEWithLogits(logits, targets)
	if l.BCEDivisor == "batch" {
		loss = MulScalar(loss, float64(classes)) // BCEWithLogits divides by batch × classes
	}
	return loss
}

// BCETargets are timm's BinaryCrossEntropy targets for integer labels: off = ε/K everywhere and
// on = 1 − ε + ε/K at the label; with threshold > 0 they are binarised as target > threshold.
func BCETargets(labels *Node, classes int, smoothing, threshold float64, dtype dtypes.DType) *Node {
	off := smoothing / float64(classes)
	onehot := OneHot(labels, classes, dtype)
	targets := AddScalar(MulScalar(onehot, 1-smoothing), off)
	if threshold > 0 {
		targets = ConvertDType(GreaterThan(targets, Scalar(labels.Graph(), dtype, threshold)), dtype)
	}
	return targets
}

// ClipGlobalNorm scales every gradient by min(1, c/(‖g‖+ε)), ‖g‖ being one norm over all of them
// (summed in the gradients' dtype, the master dtype).
func ClipGlobalNorm(grads []*Node, c float64) []*Node {
	return clipWithSquaredNorms(grads, squaredNorms(grads), c)
}

// squaredNorms returns Σg² of each gradient, in the first gradient's dtype.
func squaredNorms(grads []*Node) []*Node {
	sums := make([]*Node, len(grads))
	for i, g := range grads {
		sums[i] = ReduceAllSum(Square(ConvertDType(g, grads[0].DType())))
	}
	return sums
}

// clipWithSquaredNorms is ClipGlobalNorm given each gradient's Σg², so a step that already has them
// (the non-finite guard measures them) does not reduce every gradient twice.
func clipWithSquaredNorms(grads, sums []*Node, c float64) []*Node {
	if len(grads) == 0 {
		return grads
	}
	dtype := grads[0].DType()
	sum := sums[0]
	for _, sq := range sums[1:] {
		sum = Add(sum, sq)
	}
	factor := MinScalar(Div(Scalar(sum.Graph(), dtype, c), AddScalar(Sqrt(sum), clipEpsilon)), 1)
	out := make([]*Node, len(grads))
	for i, g := range grads {
		out[i] = Mul(g, ConvertDType(factor, g.DType()))
	}
	return out
}

// accumulateGradients keeps G' = keep·G + g per variable and returns the mean G'/k the apply step uses.
func accumulateGradients(ctx *context.Context, vars []*context.Variable, grads []*Node, keep *Node, k int) []*Node {
	out := make([]*Node, len(grads))
	for i, v := range vars {
		sumVar := ctx.InAbsPath(context.JoinScope(accumulatorScope+v.Scope(), v.Name())).Checked(false).
			WithInitializer(initializers.Zero).VariableWithShape("grad", v.Shape())
		sumVar.SetTrainable(false)
		g := ConvertDType(grads[i], v.DType())
		sum := Add(Mul(sumVar.ValueGraph(g.Graph()), ConvertDType(keep, v.DType())), g)
		sumVar.SetValueGraph(sum)
		out[i] = DivScalar(sum, float64(k))
	}
	return out
}

// gateUpdates keeps the weights, optimizer slots and EMA shadows unchanged unless apply is set: the
// micro-batches before the last only accumulate (BatchNorm statistics and the RNG move every time).
func gateUpdates(ctx *context.Context, g *Graph, apply *Node) {
	on := GreaterThan(apply, ZerosLike(apply))
	ctx.EnumerateVariables(func(v *context.Variable) {
		gated := strings.HasPrefix(v.Scope(), "/optimizer/") || strings.HasPrefix(v.Scope(), emaScope+"/") ||
			(v.Trainable && strings.HasPrefix(v.Scope(), "/"+modelScope))
		if !gated || !v.ChangedInGraph(g) {
			return
		}
		before := g.GetParameterByName(v.ParameterName())
		after := v.ValueGraph(g)
		v.SetValueGraph(Where(BroadcastToDims(on, after.Shape().Dimensions...), after, before))
	})
}
