package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
)

// Version is written into checkpoints and run logs.
const Version = "0.1.0"

// modelScope holds the net's variables; optimizer slots live under /optimizer.
const modelScope = graphs.ModelScope

// RunOptions are the per-invocation choices that are not part of the recipe.
type RunOptions struct {
	Resume     bool      // continue from the newest checkpoint in the run directory
	ResumeFrom string    // continue from this checkpoint file
	Out        io.Writer // progress and summaries; nil means os.Stdout
	Progress   bool      // redraw one progress line (for terminals) instead of printing log lines
}

// Result summarises a finished run.
type Result struct {
	Dir        string
	Step       int
	Eval       EvalResult
	Elapsed    time.Duration
	Checkpoint string
}

// EvalResult is the score on the eval split.
type EvalResult struct {
	Top1, Top5, Loss float64
	Examples         int
}

// session is everything a run or an eval holds open.
type session struct {
	cfg     Config
	spec    graphs.Spec
	netOpts graphs.Options
	backend backends.Backend
	ctx     *context.Context
	// loaded is set once variables come from a checkpoint: the net must then reuse them, not create them.
	loaded bool
	// evalExec is the compiled eval forward pass, built at the first eval.
	evalExec *context.Exec
}

func newSession(cfg Config) (*session, error) {
	spec, err := graphs.Get(cfg.Net.Name)
	if err != nil {
		return nil, err
	}
	backend, err := pjrt.Open(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.Backend, err)
	}
	// The graph RNG (dropout and drop-path masks) starts from the run's seed; its state is a variable,
	// so checkpoints carry it and a resumed run draws the same masks.
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, int64(cfg.Seed))
	netOpts, err := cfg.Net.Options(cfg.Seed)
	if err != nil {
		return nil, err
	}
	return &session{cfg: cfg, spec: spec, backend: backend, ctx: ctx, netOpts: netOpts}, nil
}

// loader opens a split and checks it fits the net's input.
func (s *session) loader(split string, batch int, train bool) (*data.Loader, error) {
	ds, err := data.Open(s.cfg.Data.Source, s.cfg.Data.Dir, split)
	if err != nil {
		return nil, err
	}
	want := s.spec.InputShape
	if size := s.cfg.Net.ImageSize; size > 0 {
		want[0], want[1] = size, size
	}
	if ds.Height != want[0] || ds.Width != want[1] || ds.Channels != want[2] {
		return nil, fmt.Errorf("data.source %q gives %dx%dx%d images, net %q expects %dx%dx%d",
			s.cfg.Data.Source, ds.Height, ds.Width, ds.Channels, s.spec.Name, want[0], want[1], want[2])
	}
	if classes := s.numClasses(); ds.NumClasses > classes {
		return nil, fmt.Errorf("data.source %q has %d classes, net has %d outputs (net.num_classes)",
			s.cfg.Data.Source, ds.NumClasses, classes)
	}
	return data.NewLoader(ds, data.LoaderOptions{
		BatchSize: batch, Shuffle: train, DropLast: train, Seed: uint64(s.cfg.Seed),
		Mean: []float32{float32(s.cfg.Data.Mean)}, Std: []float32{float32(s.cfg.Data.Std)},
	})
}

func (s *session) numClasses() int {
	if s.cfg.Net.NumClasses > 0 {
		return s.cfg.Net.NumClasses
	}
	return s.spec.NumClasses
}

// forward builds the net in the model scope.
func (s *session) forward(ctx *context.Context, images *Node, train bool) *Node {
	ctx = ctx.In(modelScope)
	if s.loaded {
		ctx = ctx.Reuse()
	}
	return s.spec.Build(ctx, images, train, s.netOpts)
}

// crossEntropy is the mean softmax cross-entropy of logits against integer labels.
func crossEntropy(logits, labels *Node) *Node {
	logp := LogSoftmax(logits, -1)
	onehot := OneHot(labels, logits.Shape().Dimensions[1], logp.DType())
	return Neg(ReduceAllMean(ReduceSum(Mul(onehot, logp), -1)))
}

// trainStep compiles forward + loss + backward + optimizer as one graph; inputs are the batch and the
// learning rate, outputs the loss and the number of correct predictions.
func (s *session) trainStep(opt Optimizer) (*context.Exec, error) {
	return context.NewExec(s.backend, s.ctx, func(ctx *context.Context, images, labels, lr *Node) []*Node {
		g := images.Graph()
		ctx.SetTraining(g, true)
		logits := s.forward(ctx, images, true)
		loss := crossEntropy(logits, labels)
		var vars []*context.Variable
		ctx.EnumerateVariables(func(v *context.Variable) {
			if v.Trainable && v.InUseByGraph(g) && strings.HasPrefix(v.Scope(), "/"+modelScope) {
				vars = append(vars, v)
			}
		})
		sort.Slice(vars, func(i, j int) bool { return vars[i].ScopeAndName() < vars[j].ScopeAndName() })
		nodes := make([]*Node, len(vars))
		decay := make([]bool, len(vars))
		for i, v := range vars {
			nodes[i] = v.ValueGraph(g)
			decay[i] = !s.spec.ExcludedFromWeightDecay(v.Scope(), v.Name())
		}
		grads := Gradient(loss, nodes...)
		opt.Update(ctx, vars, grads, decay, lr)
		correct := ReduceAllSum(ConvertDType(Equal(ArgMax(logits, -1, dtypes.Int32), labels), dtypes.Float32))
		return []*Node{loss, correct}
	})
}

// evaluate scores the current variables on every example of the loader (the padded tail is masked).
func (s *session) evaluate(loader *data.Loader) (EvalResult, error) {
	if s.evalExec == nil {
		// Built once per session: every eval of a run reuses the compiled forward graph.
		exec, err := context.NewExec(s.backend, s.ctx.Reuse(), func(ctx *context.Context, images *Node) *Node {
			return s.forward(ctx, images, false)
		})
		if err != nil {
			return EvalResult{}, err
		}
		s.evalExec = exec
	}
	exec := s.evalExec
	var res EvalResult
	it := loader.Iterate(0, 0)
	defer it.Close()
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		images := imagesTensor(loader, b)
		outs, err := exec.Exec(images)
		images.FinalizeAll()
		if err != nil {
			return res, fmt.Errorf("eval step: %w", err)
		}
		logits := tensors.MustCopyFlatData[float32](outs[0])
		outs[0].FinalizeAll()
		classes := len(logits) / len(b.Labels)
		for i := range b.Size {
			row := logits[i*classes : (i+1)*classes]
			top1, top5, nll := scoreRow(row, int(b.Labels[i]))
			res.Top1 += top1
			res.Top5 += top5
			res.Loss += nll
		}
		res.Examples += b.Size
	}
	if res.Examples == 0 {
		return res, errors.New("eval split is empty")
	}
	n := float64(res.Examples)
	res.Top1, res.Top5, res.Loss = res.Top1/n, res.Top5/n, res.Loss/n
	return res, nil
}

// scoreRow returns (top-1 hit, top-5 hit, negative log-likelihood) of one row of logits.
func scoreRow(row []float32, label int) (top1, top5, nll float64) {
	rank := 0
	for _, v := range row {
		if v > row[label] {
			rank++
		}
	}
	if rank == 0 {
		top1 = 1
	}
	if rank < 5 {
		top5 = 1
	}
	maxv := math.Inf(-1)
	for _, v := range row {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - maxv)
	}
	return top1, top5, maxv + math.Log(sum) - float64(row[label])
}

func imagesTensor(l *data.Loader, b data.Batch) *tensors.Tensor {
	ds := l.Dataset()
	return tensors.FromFlatDataAndDimensions(b.Images, len(b.Labels), ds.Height, ds.Width, ds.Channels)
}

// metricsLog appends one JSON object per line to metrics.jsonl; each record is one write call.
type metricsLog struct{ f *os.File }

func openMetrics(path string) (*metricsLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &metricsLog{f: f}, nil
}

func (m *metricsLog) write(record map[string]any) error {
	record["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(record)
	if err != nil {
		return err
	}
	_, err = m.f.Write(append(line, '\n'))
	return err
}

func (m *metricsLog) Close() error { return m.f.Close() }

// Run trains cfg's net on cfg's data, evaluating after every eval.every_epochs epochs and writing
// runs/<name>/{config.yaml, metrics.jsonl, checkpoints/}.
func Run(cfg Config, opts RunOptions) (res Result, err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	start := time.Now()
	s, err := newSession(cfg)
	if err != nil {
		return res, err
	}
	trainLoader, err := s.loader("train", cfg.Data.BatchSize, true)
	if err != nil {
		return res, err
	}
	evalLoader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return res, err
	}
	perEpoch := trainLoader.StepsPerEpoch()
	if perEpoch == 0 {
		return res, fmt.Errorf("data.batch_size %d is larger than the training split (%d examples)",
			cfg.Data.BatchSize, trainLoader.Dataset().N)
	}
	total := cfg.Epochs * perEpoch
	if cfg.Steps > 0 {
		total = cfg.Steps
	}

	dir := cfg.Dir()
	ckptDir := filepath.Join(dir, "checkpoints")
	res.Dir = dir
	startStep := 0
	switch {
	case opts.ResumeFrom != "" || opts.Resume:
		ckpt, err := s.resumePoint(ckptDir, opts.ResumeFrom)
		if err != nil {
			return res, err
		}
		startStep = ckpt.Header.Step
		s.load(ckpt)
		fmt.Fprintf(out, "resuming %s from %s (step %d)\n", cfg.Name, ckpt.Path, startStep)
		if ckpt.Header.ConfigHash != cfg.Hash() {
			fmt.Fprintf(out, "note: the config differs from the one that wrote this checkpoint\n")
		}
	default:
		if paths, _ := ListCheckpoints(ckptDir); len(paths) > 0 {
			return res, fmt.Errorf("run directory %s already holds checkpoints: pass --resume to continue it, "+
				"or choose another run name (--set name=...), or delete the directory", dir)
		}
	}
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		return res, err
	}
	if err := writeFileAtomic(filepath.Join(dir, "config.yaml"), cfg.YAML()); err != nil {
		return res, fmt.Errorf("writing resolved config: %w", err)
	}
	metrics, err := openMetrics(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		return res, err
	}
	defer metrics.Close()

	opt, err := NewOptimizer(cfg.Optimizer)
	if err != nil {
		return res, err
	}
	step, err := s.trainStep(opt)
	if err != nil {
		return res, err
	}
	defer step.Finalize()

	save := func(at int) (string, error) {
		return SaveCheckpoint(ckptDir, s.ctx, CheckpointHeader{
			TrainerVersion: Version, ConfigHash: cfg.Hash(), Net: cfg.Net.Name,
			Step: at, Epoch: at / perEpoch,
		}, cfg.Checkpoint.Keep)
	}
	bar := newProgress(out, opts.Progress, startStep)
	fmt.Fprintf(out, "training %s (%s) on %s: %d steps, %d per epoch, batch %d, backend %s\n",
		cfg.Name, cfg.Net.Name, cfg.Data.Source, total, perEpoch, cfg.Data.BatchSize, s.backend.Name())

	var lossSum, correctSum float64
	var logCount int
	logStart := time.Now()
	current := startStep
	lastEval := -1
	for current < total {
		epoch, pos := current/perEpoch, current%perEpoch
		it := trainLoader.Iterate(epoch, pos)
		for b, ok := it.Next(); ok && current < total; b, ok = it.Next() {
			lr := LearningRate(cfg, current, total, perEpoch)
			images := imagesTensor(trainLoader, b)
			labels := tensors.FromFlatDataAndDimensions(b.Labels, len(b.Labels))
			outs, err := step.Exec(images, labels, float32(lr))
			images.FinalizeAll()
			labels.FinalizeAll()
			if err != nil {
				it.Close()
				return res, fmt.Errorf("train step %d: %w", current, err)
			}
			loss := float64(tensors.ToScalar[float32](outs[0]))
			correct := float64(tensors.ToScalar[float32](outs[1]))
			current++
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				it.Close()
				return res, fmt.Errorf("step %d: loss is %v; stopping (lower optimizer.lr?)", current, loss)
			}
			lossSum += loss
			correctSum += correct
			logCount++
			elapsed := time.Since(logStart).Seconds()
			ips := float64(logCount*cfg.Data.BatchSize) / elapsed
			avgLoss := lossSum / float64(logCount)
			logNow := logCount == cfg.Log.EverySteps || current == total
			if opts.Progress && !logNow {
				bar.update(current, total, perEpoch, avgLoss, lr, ips) // a terminal bar moves every step
			}
			if logNow {
				acc := correctSum / float64(logCount*cfg.Data.BatchSize)
				if err := metrics.write(map[string]any{"type": "train", "step": current, "epoch": float64(current) / float64(perEpoch),
					"loss": avgLoss, "accuracy": acc, "lr": lr, "images_per_sec": ips}); err != nil {
					it.Close()
					return res, err
				}
				bar.update(current, total, perEpoch, avgLoss, lr, ips)
				lossSum, correctSum, logCount, logStart = 0, 0, 0, time.Now()
			}
			if cfg.Checkpoint.EverySteps > 0 && current%cfg.Checkpoint.EverySteps == 0 && current < total {
				if _, err := save(current); err != nil {
					it.Close()
					return res, err
				}
			}
		}
		it.Close()
		if current%perEpoch == 0 && cfg.Eval.EveryEpochs > 0 && (current/perEpoch)%cfg.Eval.EveryEpochs == 0 {
			bar.done()
			ev, err := s.evaluate(evalLoader)
			if err != nil {
				return res, err
			}
			lastEval, res.Eval = current, ev
			fmt.Fprintf(out, "epoch %d: eval top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%d images)\n",
				current/perEpoch, 100*ev.Top1, 100*ev.Top5, ev.Loss, ev.Examples)
			if err := metrics.write(map[string]any{"type": "eval", "step": current, "epoch": current / perEpoch,
				"top1": ev.Top1, "top5": ev.Top5, "loss": ev.Loss, "examples": ev.Examples}); err != nil {
				return res, err
			}
		}
	}
	bar.done()
	if lastEval != current {
		ev, err := s.evaluate(evalLoader)
		if err != nil {
			return res, err
		}
		res.Eval = ev
		fmt.Fprintf(out, "final eval at step %d: top-1 %.2f%%  top-5 %.2f%%  loss %.4f\n", current, 100*ev.Top1, 100*ev.Top5, ev.Loss)
		if err := metrics.write(map[string]any{"type": "eval", "step": current, "epoch": float64(current) / float64(perEpoch),
			"top1": ev.Top1, "top5": ev.Top5, "loss": ev.Loss, "examples": ev.Examples}); err != nil {
			return res, err
		}
	}
	res.Checkpoint, err = save(current)
	if err != nil {
		return res, err
	}
	res.Step = current
	res.Elapsed = time.Since(start)
	fmt.Fprintf(out, "done in %s; checkpoint %s\n", res.Elapsed.Round(time.Second), res.Checkpoint)
	return res, nil
}

// resumePoint loads the checkpoint to continue from and checks it belongs to this net.
func (s *session) resumePoint(ckptDir, from string) (*Checkpoint, error) {
	var ckpt *Checkpoint
	var err error
	if from != "" {
		ckpt, err = LoadCheckpoint(from)
	} else {
		var ok bool
		ckpt, ok, err = LatestCheckpoint(ckptDir)
		if err == nil && !ok {
			return nil, fmt.Errorf("--resume: no checkpoint in %s", ckptDir)
		}
	}
	if err != nil {
		return nil, err
	}
	if ckpt.Header.Net != s.cfg.Net.Name {
		return nil, fmt.Errorf("checkpoint %s: net %q, the config trains %q", ckpt.Path, ckpt.Header.Net, s.cfg.Net.Name)
	}
	return ckpt, nil
}

// load makes the checkpoint the source of every variable the graphs ask for.
func (s *session) load(ckpt *Checkpoint) {
	s.ctx.SetLoader(ckpt)
	s.loaded = true
}

// Evaluate loads a checkpoint into cfg's net and scores it on the eval split.
func Evaluate(cfg Config, checkpointPath string) (EvalResult, error) {
	s, err := newSession(cfg)
	if err != nil {
		return EvalResult{}, err
	}
	ckpt, err := s.resumePoint("", checkpointPath)
	if err != nil {
		return EvalResult{}, err
	}
	s.load(ckpt)
	loader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return EvalResult{}, err
	}
	return s.evaluate(loader)
}
