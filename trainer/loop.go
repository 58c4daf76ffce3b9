package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/pjrt"
	"github.com/trainer/trainer/schedule"
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
	// Stop, when closed (the CLI closes it on SIGINT/SIGTERM), ends the run after the optimizer step in
	// flight: a checkpoint is written and Result.Interrupted is set.
	Stop <-chan struct{}
}

// Result summarises a finished run.
type Result struct {
	Dir        string
	Step       int
	Eval       EvalResult
	EMAEval    EvalResult // the EMA shadows' score at the last eval (zero without ema.decay)
	Elapsed    time.Duration
	Checkpoint string
	// Interrupted says the run ended early on RunOptions.Stop; Checkpoint then holds its state.
	Interrupted bool
}

// EvalResult is the score on the eval split.
type EvalResult struct {
	Top1, Top5, Loss float64
	Examples         int
}

// session is everything a run or an eval holds open.
type session struct {
	cfg     config.Config
	spec    graphs.Spec
	netOpts graphs.Options
	backend backends.Backend
	ctx     *context.Context
	// loaded is set once variables come from a checkpoint: the net must then reuse them, not create them.
	loaded bool
	// evalExec is the compiled eval forward pass, built at the first eval.
	evalExec *context.Exec
	// emaCtx holds copies of the EMA shadows under the model scope; emaEvalExec scores them.
	emaCtx      *context.Context
	emaEvalExec *context.Exec
	// emaFresh is set when the shadows must start from the weights at the next step: a new run, or a
	// checkpoint written without EMA.
	emaFresh bool
}

func newSession(cfg config.Config) (*session, error) {
	if _, err := graphs.Get(cfg.Net.Name); err != nil {
		return nil, err
	}
	backend, err := pjrt.Open(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.Backend, err)
	}
	s, err := sessionOn(cfg, backend)
	if err != nil {
		backend.Finalize()
		return nil, err
	}
	return s, nil
}

// loader opens a split and checks it fits the net's input (trainer/data.go).
func (s *session) loader(split string, batch int, train bool) (*data.Loader, error) {
	return s.openLoader(split, batch, train)
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

// evaluate scores the current variables on every example of the loader (the padded tail is masked).
func (s *session) evaluate(loader *data.Loader) (EvalResult, error) {
	return s.evaluateWith(s.ctx, &s.evalExec, loader)
}

// evaluateEMA scores the EMA shadows (as of the last optimizer step) the same way.
func (s *session) evaluateEMA(loader *data.Loader) (EvalResult, error) {
	ctx, err := s.emaContext()
	if err != nil {
		return EvalResult{}, fmt.Errorf("EMA eval: %w", err)
	}
	return s.evaluateWith(ctx, &s.emaEvalExec, loader)
}

// evaluateWith runs the eval forward pass over ctx's variables; *execp caches its compiled graph, so
// every eval of a run reuses it.
func (s *session) evaluateWith(evalCtx *context.Context, execp **context.Exec, loader *data.Loader) (EvalResult, error) {
	if *execp == nil {
		exec, err := context.NewExec(s.backend, evalCtx.Reuse(), func(ctx *context.Context, images *Node) *Node {
			return s.forward(ctx.Reuse(), s.netInput(images), false)
		})
		if err != nil {
			return EvalResult{}, err
		}
		*execp = exec
	}
	exec := *execp
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
	if err := it.Err(); err != nil {
		return res, fmt.Errorf("eval data: %w", err)
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

// imagesTensor copies a batch into a tensor, float32 images or uint8 pixels (data.device_normalize:
// the graph normalises them, netInput); the loader reuses the batch's buffers afterwards.
func imagesTensor(l *data.Loader, b data.Batch) *tensors.Tensor {
	h, w, c := l.Shape()
	if b.Pixels != nil {
		return tensors.FromFlatDataAndDimensions(b.Pixels, len(b.Labels), h, w, c)
	}
	return tensors.FromFlatDataAndDimensions(b.Images, len(b.Labels), h, w, c)
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

// A non-finite number (a diverged eval loss, say) is written as null: JSON has no NaN, and a run must
// not die for logging its own divergence.
func (m *metricsLog) write(record map[string]any) error {
	record["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	for k, v := range record {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			record[k] = nil
		}
	}
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
func Run(cfg config.Config, opts RunOptions) (res Result, err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	start := time.Now()
	s, err := newSession(cfg)
	if err != nil {
		return res, err
	}
	feed, err := s.newTrainFeed()
	if err != nil {
		return res, err
	}
	evalLoader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return res, err
	}
	// The loader counts micro-batches; schedules, logs and checkpoints count optimizer steps, each of
	// k = optimizer.accumulate_steps micro-batches.
	k := max(cfg.Optimizer.AccumulateSteps, 1)
	microPerEpoch := feed.stepsPerEpoch()
	if microPerEpoch == 0 {
		return res, fmt.Errorf("data.batch_size %d is larger than the training split (%d examples)",
			cfg.Data.BatchSize, feed.loaders[0].Source().Len())
	}
	perEpoch := float64(microPerEpoch) / float64(k)
	total := cfg.Epochs * microPerEpoch / k
	if cfg.Steps > 0 {
		total = cfg.Steps
	}
	if total == 0 {
		return res, fmt.Errorf("optimizer.accumulate_steps %d exceeds the %d batches of %d epochs: nothing to train",
			k, cfg.Epochs*microPerEpoch, cfg.Epochs)
	}
	if err := cfg.CheckScheduleLength(total, perEpoch); err != nil {
		return res, err
	}

	dir := cfg.Dir()
	ckptDir := filepath.Join(dir, "checkpoints")
	res.Dir = dir
	startStep := 0
	var resumed *checkpoint.Checkpoint // the checkpoint continued from, if any
	var accepted []config.Change       // config changes on resume, all on the allow-list (config.Resumable)
	switch {
	case opts.ResumeFrom != "" || opts.Resume:
		ckpt, err := s.resumePoint(ckptDir, opts.ResumeFrom)
		if err != nil {
			return res, err
		}
		if accepted, err = s.resumeConfig(ckpt); err != nil {
			return res, err
		}
		resumed, startStep = ckpt, ckpt.Header.Step
		s.load(ckpt)
		fmt.Fprintf(out, "resuming %s from %s (step %d)\n", cfg.Name, ckpt.Path, startStep)
		for _, c := range accepted {
			fmt.Fprintf(out, "config change accepted on resume: %s\n", c)
		}
	default:
		if paths, _ := checkpoint.List(ckptDir); len(paths) > 0 {
			return res, fmt.Errorf("run directory %s already holds checkpoints: pass --resume to continue it, "+
				"or choose another run name (--set name=...), or delete the directory", dir)
		}
	}
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		return res, err
	}
	if err := atomicfile.Write(filepath.Join(dir, "config.yaml"), cfg.YAML()); err != nil {
		return res, fmt.Errorf("writing resolved config: %w", err)
	}
	// Records past the starting step were written by an interrupted run and are about to be written
	// again: drop them (a fresh run starts the log anew).
	metricsPath := filepath.Join(dir, "metrics.jsonl")
	dropped, err := truncateMetrics(metricsPath, startStep)
	if err != nil {
		return res, err
	}
	metrics, err := openMetrics(metricsPath)
	if err != nil {
		return res, err
	}
	defer metrics.Close()
	if resumed != nil {
		if err := metrics.write(resumeRecord(resumed, accepted, dropped)); err != nil {
			return res, err
		}
	}
	guard := newHostGuard(cfg.Guard, resumed)

	opt, err := NewOptimizer(cfg.Optimizer)
	if err != nil {
		return res, err
	}
	step, err := s.newTrainStep(opt)
	if err != nil {
		return res, err
	}
	defer step.Finalize()
	if !replicaSimulation {
		// With replicas > 1: batch axis sharded over the mesh, variables replicated (replicas.go).
		if err := s.distribute(step.exec, 2); err != nil {
			return res, err
		}
	}
	useEMA := cfg.EMA.Decay > 0
	optStep := startStep // optimizer steps done

	save := func(at int) (string, error) {
		path, err := checkpoint.Save(ckptDir, s.ctx, checkpoint.Header{
			TrainerVersion: Version, ConfigHash: cfg.Hash(), Net: cfg.Net.Name,
			Step: at, Epoch: at * k / microPerEpoch, Config: string(cfg.YAML()), LRScale: guard.lrScale,
		}, cfg.Checkpoint.Keep)
		if err == nil {
			guard.lastCheckpoint = path
		}
		return path, err
	}
	// keepBest rewrites checkpoints/best.tckpt when the chosen metric improves; a resumed run starts
	// from the score in the existing file.
	bestMetric, bestScore := cfg.BestMetric(), math.Inf(-1)
	bestPath := filepath.Join(ckptDir, checkpoint.BestName)
	if prev, err := checkpoint.Load(bestPath); err == nil && prev.Header.Metric == bestMetric {
		bestScore = prev.Header.Score
	}
	keepBest := func(record map[string]any) error {
		score, ok := record[bestMetric].(float64)
		if bestMetric == "" || !ok || score <= bestScore {
			return nil
		}
		bestScore = score
		fmt.Fprintf(out, "new best %s %.4f at step %d: %s\n", bestMetric, score, optStep, bestPath)
		return checkpoint.SaveFile(bestPath, s.ctx, checkpoint.Header{
			TrainerVersion: Version, ConfigHash: cfg.Hash(), Net: cfg.Net.Name,
			Step: optStep, Epoch: optStep * k / microPerEpoch, Metric: bestMetric, Score: score,
			Config: string(cfg.YAML()), LRScale: guard.lrScale,
		})
	}
	// evalNow scores the live weights (and the EMA shadows) and logs both.
	evalNow := func(label string) error {
		ev, err := s.evaluate(evalLoader)
		if err != nil {
			return err
		}
		res.Eval = ev
		record := map[string]any{"type": "eval", "step": optStep, "epoch": float64(optStep) / perEpoch,
			"top1": ev.Top1, "top5": ev.Top5, "loss": ev.Loss, "examples": ev.Examples}
		line := fmt.Sprintf("%s: eval top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%d images)", label, 100*ev.Top1, 100*ev.Top5, ev.Loss, ev.Examples)
		if useEMA {
			em, err := s.evaluateEMA(evalLoader)
			if err != nil {
				return err
			}
			res.EMAEval = em
			record["ema_top1"], record["ema_top5"], record["ema_loss"] = em.Top1, em.Top5, em.Loss
			line += fmt.Sprintf("; EMA top-1 %.2f%%  top-5 %.2f%%  loss %.4f", 100*em.Top1, 100*em.Top5, em.Loss)
		}
		fmt.Fprintln(out, line)
		if err := metrics.write(record); err != nil {
			return err
		}
		return keepBest(record)
	}
	bar := newProgress(out, opts.Progress, startStep)
	replicasNote := ""
	if cfg.Replicas > 1 {
		replicasNote = fmt.Sprintf(" (%d replicas of %d)", cfg.Replicas, cfg.ReplicaBatch())
	}
	fmt.Fprintf(out, "training %s (%s) on %s: %d steps, %.4g per epoch, batch %d%s x %d, backend %s\n",
		cfg.Name, cfg.Net.Name, cfg.Data.Source, total, perEpoch, cfg.Data.BatchSize, replicasNote, k, s.backend.Name())

	var lossSum, correctSum float64
	var logCount, microCount int
	logStart := time.Now()
	micro := startStep * k
	lastEval := -1
	barEpoch := max(int(math.Round(perEpoch)), 1) // the bar shows epochs to two decimals
	for optStep < total {
		it := feed.iterate(micro/microPerEpoch, micro%microPerEpoch)
		for shards, ok := it.next(); ok && optStep < total; shards, ok = it.next() {
			j := micro % k // position in the accumulation group
			lr := schedule.LearningRate(cfg, optStep, total, perEpoch) * guard.lrScale
			// A group with a non-finite micro-batch is not applied (guard.nonfinite skip/reduce_lr).
			sc := stepScalars{LR: lr, Host: opt.HostScalars(optStep + 1), Apply: j == k-1 && !guard.groupBad}
			if j > 0 {
				sc.Keep = 1
			}
			if useEMA {
				sc.EMADecay, sc.EMAFresh = schedule.EMADecay(cfg.EMA, optStep), s.emaFresh
			}
			images, labels := make([]*tensors.Tensor, len(shards)), make([]*tensors.Tensor, len(shards))
			for r, b := range shards {
				if testHookImages != nil {
					testHookImages(optStep+1, j, b.Images) // tests inject non-finite pixels (guard_test.go)
				}
				images[r] = imagesTensor(feed.loaders[r], b)
				labels[r] = targetsTensor(b) // soft targets [batch, classes] under mixup/cutmix
			}
			loss, correct, err := step.runShards(images, labels, sc)
			for r := range shards {
				images[r].FinalizeAll()
				labels[r].FinalizeAll()
			}
			if err != nil {
				it.close()
				return res, fmt.Errorf("train step %d: %w", optStep, err)
			}
			micro++
			if nf, finite := step.guard.lastNonFinite(); !finite {
				line, record, err := guard.onNonFinite(optStep+1, loss, nf)
				if err != nil {
					it.close()
					return res, err
				}
				bar.done()
				fmt.Fprintln(out, line)
				if err := metrics.write(record); err != nil {
					it.close()
					return res, err
				}
			} else {
				lossSum += loss
				correctSum += correct
				microCount++
			}
			if j < k-1 {
				continue
			}
			optStep++
			if !guard.endStep() {
				s.emaFresh = false // the shadows were initialised by this step
			}
			logCount++
			elapsed := time.Since(logStart).Seconds()
			ips := float64(microCount*cfg.Data.BatchSize) / elapsed
			avgLoss := lossSum / float64(microCount)
			// A window of skipped steps only has its nonfinite records.
			logNow := (logCount >= cfg.Log.EverySteps || optStep == total) && microCount > 0
			if opts.Progress && !logNow {
				bar.update(optStep, total, barEpoch, avgLoss, lr, ips) // a terminal bar moves every step
			}
			if logNow {
				acc := correctSum / float64(microCount*cfg.Data.BatchSize)
				record := map[string]any{"type": "train", "step": optStep, "epoch": float64(optStep) / perEpoch,
					"loss": avgLoss, "accuracy": acc, "lr": lr, "images_per_sec": ips}
				if useEMA {
					record["ema_decay"] = sc.EMADecay
				}
				if err := metrics.write(record); err != nil {
					it.close()
					return res, err
				}
				bar.update(optStep, total, barEpoch, avgLoss, lr, ips)
				lossSum, correctSum, logCount, microCount, logStart = 0, 0, 0, 0, time.Now()
			}
			if cfg.Checkpoint.EverySteps > 0 && optStep%cfg.Checkpoint.EverySteps == 0 && optStep < total {
				if _, err := save(optStep); err != nil {
					it.close()
					return res, err
				}
			}
			if stopRequested(opts.Stop) && optStep < total {
				it.close()
				bar.done()
				if res.Checkpoint, err = save(optStep); err != nil {
					return res, err
				}
				res.Step, res.Interrupted, res.Elapsed = optStep, true, time.Since(start)
				fmt.Fprintf(out, "interrupted after step %d of %d; checkpoint %s\nresume with: trainer run CONFIG --resume\n",
					optStep, total, res.Checkpoint)
				return res, nil
			}
		}
		it.close()
		if err := it.err(); err != nil {
			return res, fmt.Errorf("train data: %w", err)
		}
		if epochs := micro / microPerEpoch; micro%microPerEpoch == 0 && cfg.Eval.EveryEpochs > 0 && epochs%cfg.Eval.EveryEpochs == 0 {
			bar.done()
			if err := evalNow(fmt.Sprintf("epoch %d", epochs)); err != nil {
				return res, err
			}
			lastEval = optStep
		}
	}
	bar.done()
	if lastEval != optStep {
		if err := evalNow(fmt.Sprintf("final eval at step %d", optStep)); err != nil {
			return res, err
		}
	}
	res.Checkpoint, err = save(optStep)
	if err != nil {
		return res, err
	}
	res.Step = optStep
	res.Elapsed = time.Since(start)
	fmt.Fprintf(out, "done in %s; checkpoint %s\n", res.Elapsed.Round(time.Second), res.Checkpoint)
	return res, nil
}

// stopRequested reports whether stop has been closed, without waiting.
func stopRequested(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// resumePoint loads the checkpoint to continue from and checks it belongs to this net.
func (s *session) resumePoint(ckptDir, from string) (*checkpoint.Checkpoint, error) {
	var ckpt *checkpoint.Checkpoint
	var err error
	if from != "" {
		ckpt, err = checkpoint.Load(from)
	} else {
		var ok bool
		ckpt, ok, err = checkpoint.Latest(ckptDir)
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
func (s *session) load(ckpt *checkpoint.Checkpoint) {
	s.ctx.SetLoader(ckpt)
	s.loaded = true
	s.emaFresh = true
	for name := range ckpt.Tensors {
		if strings.HasPrefix(name, emaScope+"/") {
			s.emaFresh = false
			break
		}
	}
}

// Evaluate loads a checkpoint into cfg's net and scores it on the eval split: its live weights, or
// with ema its EMA shadows (weights and BatchNorm statistics).
func Evaluate(cfg config.Config, checkpointPath string, ema bool) (EvalResult, error) {
	s, err := newSession(cfg)
	if err != nil {
		return EvalResult{}, err
	}
	ckpt, err := s.resumePoint("", checkpointPath)
	if err != nil {
		return EvalResult{}, err
	}
	if ema {
		shadows := 0
		for name := range ckpt.Tensors {
			if strings.HasPrefix(name, emaScope+"/") {
				shadows++
			}
		}
		if shadows == 0 {
			return EvalResult{}, fmt.Errorf("checkpoint %s holds no EMA shadows (the run had ema.decay 0)", checkpointPath)
		}
		s.ctx.SetLoader(emaLoader{ckpt})
		s.loaded = true
	} else {
		s.load(ckpt)
	}
	loader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return EvalResult{}, err
	}
	return s.evaluate(loader)
}

// emaLoader serves a checkpoint's EMA shadow in place of each model variable that has one.
type emaLoader struct{ *checkpoint.Checkpoint }

// LoadVariable implements context.Loader.
func (l emaLoader) LoadVariable(ctx *context.Context, scope, name string) (*tensors.Tensor, bool) {
	if t, ok := l.Tensors[context.JoinScope(emaScope+scope, name)]; ok {
		return t, true
	}
	return l.Checkpoint.LoadVariable(ctx, scope, name)
}
