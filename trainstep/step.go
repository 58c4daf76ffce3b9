package trainstep

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// Step is the compiled train step of a config: forward, loss, backward, (accumulation), clipping,
// optimizer, EMA and the guard. Every value that changes during a run is an input (Scalars), so it
// compiles once.
type Step struct {
	exec       *context.Exec
	cfg        config.Config
	model      Model
	opt        Optimizer
	hostCount  int // the optimizer's HostScalars per update
	accumulate int // micro-batches per optimizer step
	ema        bool
	replicas   int
	spmd       bool // the per-device program with its own all-reduces (data_parallel.mode spmd, replicas > 1)
	// replicaIndex holds r for replica r of an SPMD step, fed to its device with every execution (the
	// same tensors each time, so each crosses to its device once).
	replicaIndex []*tensors.Tensor
	guard        guard
	params       paramGroups // optimizer.freeze and optimizer.lr_mult (params.go)
	reduceLR     bool        // guard.nonfinite reduce_lr: the carry halves the lr factor at a skipped step
	// carry is the loop state on the device (carry.go), per device: record, state; nextRow is the
	// record row the next execution writes, unread the rows written since the host last read them,
	// spilled the results read when the ring was full.
	carry           [][2]*tensors.Tensor
	nextRow, unread int
	spilled         []Result
}

// Scalars are the host values one execution of the step reads.
type Scalars struct {
	LR float64
	// Update is the optimizer update t (1-based) the micro-batch belongs to: the step feeds the
	// optimizer's HostScalars(t) (Adam's bias corrections).
	Update int
	// EMADecay is d of the weights' EMA; EMAFresh makes the shadows start from the weights as they
	// were before this step (the first update, or shadows a checkpoint did not hold).
	EMADecay float64
	EMAFresh bool
	// Keep multiplies the gradient sum before this micro-batch's gradient is added (0 on the first
	// micro-batch of a step, 1 after); Apply is set on the last one, which updates the weights.
	Keep  float64
	Apply bool
}

// Inputs are the step graph's inputs by name, in the order the host feeds them (Step.args): the
// batch, the learning rate, the optimizer's host scalars, then the EMA's and the accumulation's
// scalars when the config has them, and an SPMD step's replica index (nil otherwise).
type Inputs struct {
	Images, Labels     *Node
	LR                 *Node
	Host               []*Node
	EMADecay, EMAFresh *Node
	Keep, Apply        *Node
	// Carry is the loop state kept on the device between executions (carry.go).
	Carry carryInputs
	// Replica is r on replica r's device (int32): the layers draw their dropout masks for the global
	// batch and keep their shard's rows (graphs.ReplicaIndexParam).
	Replica *Node
}

// New builds cfg's train step for model over ctx's variables on backend b, compiled at its first run.
// With cfg.Replicas R > 1 it is one program over R devices, every variable replicated, made as
// cfg.DataParallel.Mode says (replicas.go, docs/distributed.md); the backend must have the devices.
func New(b backends.Backend, ctx *context.Context, cfg config.Config, model Model) (*Step, error) {
	opt, err := NewOptimizer(cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	replicas := max(cfg.Replicas, 1)
	if err := backend.CheckDevices(b, replicas); err != nil {
		return nil, err
	}
	s := &Step{cfg: cfg, model: model, opt: opt, hostCount: len(opt.HostScalars(1)),
		accumulate: max(cfg.Optimizer.AccumulateSteps, 1), ema: cfg.EMA.Decay > 0, replicas: replicas,
		spmd: replicas > 1 && cfg.DataParallel.Mode == config.DataParallelSPMD, guard: guard{gate: cfg.Guard.SkipsNonFinite()},
		params: newParamGroups(cfg.Optimizer), reduceLR: cfg.Guard.NonFinite == config.GuardReduceLR}
	if s.spmd {
		for r := range replicas {
			s.replicaIndex = append(s.replicaIndex, tensors.FromValue(int32(r)))
		}
	}
	// The step's gradients need the project's Dot, convolution, Rsqrt and AllReduce gradients.
	gomlxfix.Install()
	s.exec, err = context.NewExec(b, ctx, func(ctx *context.Context, in []*Node) []*Node {
		return s.build(ctx, s.inputs(in))
	})
	if err != nil {
		return nil, err
	}
	if err := distribute(s.exec, replicas, cfg.DataParallel.Mode); err != nil {
		s.exec.Finalize()
		return nil, err
	}
	return s, nil
}

// Finalize releases the compiled graph.
func (s *Step) Finalize() {
	s.exec.Finalize()
	for _, t := range s.replicaIndex {
		t.FinalizeAll()
	}
	s.finalizeCarry()
}

// inputs names the graph's positional inputs.
func (s *Step) inputs(in []*Node) Inputs {
	x := Inputs{Images: in[0], Labels: in[1], LR: in[2], Host: in[3 : 3+s.hostCount]}
	next := 3 + s.hostCount
	if s.ema {
		x.EMADecay, x.EMAFresh = in[next], in[next+1]
		next += 2
	}
	if s.accumulate > 1 {
		x.Keep, x.Apply = in[next], in[next+1]
		next += 2
	}
	x.Carry = carryInputs{record: in[next], state: in[next+1]}
	next += 2
	if s.spmd {
		x.Replica = in[next]
	}
	return x
}

// scalarArgs are the host values of Inputs after the batch, in the same order, as float32.
func (s *Step) scalarArgs(sc Scalars) []any {
	args := []any{float32(sc.LR)}
	for _, h := range s.opt.HostScalars(sc.Update) {
		args = append(args, float32(h))
	}
	if s.ema {
		args = append(args, float32(sc.EMADecay), flag(sc.EMAFresh))
	}
	if s.accumulate > 1 {
		args = append(args, float32(sc.Keep), flag(sc.Apply))
	}
	return args
}

// NumScalars is the number of runtime scalars (4 bytes each) an execution sends besides the batch.
func (s *Step) NumScalars() int { return len(s.scalarArgs(Scalars{Update: 1})) }

func flag(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// build is the step graph: it updates the variables in ctx and returns the batch's mean loss
// (float32), its number of correct top-1 predictions and the guard's finiteness flags; an SPMD
// step (one replica's program) returns those of the global batch, then its own shard's mean loss;
// last, the carry's next record and state.
func (s *Step) build(ctx *context.Context, in Inputs) []*Node {
	g := in.Images.Graph()
	ctx.SetTraining(g, true)
	if in.Replica != nil {
		ctx.SetGraphParam(g, graphs.ReplicaIndexParam, in.Replica)
	}
	logits := s.model.Forward(ctx.In(graphs.ModelScope), NormalizeInput(s.cfg.Data, in.Images), true)
	loss := Loss(s.cfg.Loss, logits, in.Labels)
	vars, decay := trainables(ctx, g, s.model)
	vars, decay, lrFactors := s.params.split(s.model, vars, decay) // optimizer.freeze and lr_mult
	nodes := make([]*Node, len(vars))
	for i, v := range vars {
		nodes[i] = v.ValueGraph(g)
	}
	grads := Gradient(loss, nodes...)
	correct, shardLoss := correctCount(logits, in.Labels), loss
	if s.spmd {
		loss, correct, grads = crossReplicaMean(loss, correct, grads, s.replicas)
	}
	sums := squaredNorms(grads)
	flags, ok := s.guard.measure(loss, vars, sums)
	c := s.advanceCarry(in, loss, correct, flags, ok)
	if in.Keep != nil {
		grads = accumulateGradients(ctx, vars, grads, in.Keep, s.accumulate)
	}
	if clip := s.cfg.Optimizer.ClipGradNorm; clip > 0 {
		if in.Keep != nil {
			sums = squaredNorms(grads) // of the accumulated mean, not of this micro-batch
		}
		grads = clipWithSquaredNorms(grads, sums, clip)
	}
	updateInGroups(s.opt, ctx, vars, grads, decay, lrFactors, c.lr, in.Host...)
	if in.EMADecay != nil {
		updateEMA(ctx, g, in.EMADecay, c.emaFresh)
	}
	if c.apply != nil {
		gateUpdates(ctx, g, c.apply)
	} else if in.Apply != nil {
		gateUpdates(ctx, g, in.Apply)
	}
	s.guard.gateAll(ctx, g, ok) // last: a skipped step changes nothing
	outs := []*Node{ConvertDType(loss, dtypes.Float32), correct, flags}
	if s.spmd {
		outs = append(outs, ConvertDType(shardLoss, dtypes.Float32))
	}
	return append(outs, c.record, c.state)
}

// correctCount is the number of rows whose top-1 logit is the label (for soft targets, the
// dominant class), as float32.
func correctCount(logits, labels *Node) *Node {
	if labels.Rank() == 2 {
		labels = ArgMax(labels, -1, dtypes.Int32)
	}
	return ReduceAllSum(ConvertDType(Equal(ArgMax(logits, -1, dtypes.Int32), labels), dtypes.Float32))
}

// trainables lists the model's trained variables in g (sorted by name, so the update order is
// stable) and whether weight decay applies to each.
func trainables(ctx *context.Context, g *Graph, model Model) ([]*context.Variable, []bool) {
	var vars []*context.Variable
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Trainable && v.InUseByGraph(g) && strings.HasPrefix(v.Scope(), "/"+graphs.ModelScope) {
			vars = append(vars, v)
		}
	})
	sort.Slice(vars, func(i, j int) bool { return vars[i].ScopeAndName() < vars[j].ScopeAndName() })
	decay := make([]bool, len(vars))
	for i, v := range vars {
		decay[i] = !model.ExcludedFromWeightDecay(v.Scope(), v.Name())
	}
	return vars, decay
}

// Result is what one execution tells the host.
type Result struct {
	Loss    float64 // the batch's mean loss
	Correct float64 // top-1 hits in the batch
	// NonFinite says what was non-finite; its zero value means everything was finite.
	NonFinite NonFinite
	// ShardLosses are the replicas' own mean losses, replica r's over shard r, before they were
	// averaged into Loss (SPMD steps over several devices; nil otherwise).
	ShardLosses []float64
}

// Outputs are one execution's outputs, still where the backend left them.
type Outputs struct {
	step *Step
	outs []*tensors.Tensor
}

// Execute runs one (micro-)step on a batch given as one shard per replica (one shard on one
// device): shard r of the images and labels goes to device r. It reads nothing back: the outputs
// stay where the backend left them, and the carry (carry.go) moves on to this execution's.
func (s *Step) Execute(images, labels []*tensors.Tensor, sc Scalars) (Outputs, error) {
	if s.carry == nil {
		s.StartCarry(1, false)
	}
	args, err := s.args(images, labels, sc)
	if err != nil {
		return Outputs{}, err
	}
	outs, err := s.exec.Exec(args...)
	if err != nil {
		return Outputs{}, err
	}
	// Device-major: each device's outputs end with its carry's record and state.
	perDevice := len(outs) / s.replicas
	var results []*tensors.Tensor
	next := make([][2]*tensors.Tensor, s.replicas)
	for r := range s.replicas {
		own := outs[r*perDevice : (r+1)*perDevice]
		results = append(results, own[:perDevice-2]...)
		next[r] = [2]*tensors.Tensor{own[perDevice-2], own[perDevice-1]}
	}
	s.takeCarry(next)
	return Outputs{step: s, outs: results}, nil
}

// Dispatch runs one (micro-)step and keeps nothing of its outputs but the carry: the loop reads
// the executions' results from the record later (Drain).
func (s *Step) Dispatch(images, labels []*tensors.Tensor, sc Scalars) error {
	outs, err := s.Execute(images, labels, sc)
	if err != nil {
		return err
	}
	outs.Finalize()
	return nil
}

// Loss copies the batch's mean loss to the host, which waits for the execution to end.
func (o Outputs) Loss() float64 { return float64(tensors.ToScalar[float32](o.outs[0])) }

// Result reads the loss, the correct count and the guard's flags (with several devices, device
// 0's replicated copies) and, of an SPMD step, every replica's shard loss.
func (o Outputs) Result() Result {
	res := Result{Loss: o.Loss(), Correct: float64(tensors.ToScalar[float32](o.outs[1])),
		NonFinite: o.step.guard.read(tensors.MustCopyFlatData[float32](o.outs[2]))}
	if o.step.spmd {
		perDevice := len(o.outs) / o.step.replicas // device-major
		for r := range o.step.replicas {
			res.ShardLosses = append(res.ShardLosses, float64(tensors.ToScalar[float32](o.outs[r*perDevice+3])))
		}
	}
	return res
}

// Finalize frees the outputs.
func (o Outputs) Finalize() {
	for _, t := range o.outs {
		t.FinalizeAll()
	}
}

// RunShards executes one (micro-)step on the replicas' shards of a batch and reads its Result.
func (s *Step) RunShards(images, labels []*tensors.Tensor, sc Scalars) (Result, error) {
	outs, err := s.Execute(images, labels, sc)
	if err != nil {
		return Result{}, err
	}
	defer outs.Finalize()
	return outs.Result(), nil
}

// Run executes one (micro-)step on one device's batch.
func (s *Step) Run(images, labels *tensors.Tensor, sc Scalars) (Result, error) {
	return s.RunShards([]*tensors.Tensor{images}, []*tensors.Tensor{labels}, sc)
}

// args lays out one execution's inputs device by device, as GoMLX's Exec takes them: replica r's
// images and labels, then the (replicated) scalars, then an SPMD step's r, for r = 0..R-1.
func (s *Step) args(images, labels []*tensors.Tensor, sc Scalars) ([]any, error) {
	if len(images) != len(labels) || len(images) != s.replicas {
		return nil, fmt.Errorf("train step: %d image shards and %d label shards for %d replica(s)", len(images), len(labels), s.replicas)
	}
	for r, im := range images {
		// Every shard feeds the same program input: float32 images, or uint8 pixels under
		// data.device_normalize, never a mix.
		if im.DType() != images[0].DType() {
			return nil, fmt.Errorf("train step: image shard %d is %s, shard 0 %s", r, im.DType(), images[0].DType())
		}
	}
	scalars := s.scalarArgs(sc)
	var args []any
	for r := range images {
		args = append(args, images[r], labels[r])
		args = append(args, scalars...)
		args = append(args, s.carry[r][0], s.carry[r][1])
		if s.spmd {
			args = append(args, s.replicaIndex[r])
		}
	}
	return args, nil
}
