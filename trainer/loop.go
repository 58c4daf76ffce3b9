package trainer

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/schedule"
	"github.com/trainer/trainer/trainstep"
)

// Version is written into checkpoints and run logs.
const Version = "0.1.0"

// RunOptions are the per-invocation choices that are not part of the recipe.
type RunOptions struct {
	Resume     bool      // continue from the newest checkpoint in the run directory
	ResumeFrom string    // continue from this checkpoint file
	Out        io.Writer // progress and summaries; nil means os.Stdout
	Progress   bool      // redraw one progress line (for terminals) instead of printing log lines
	// Stop, when closed (the CLI closes it on SIGINT/SIGTERM), ends the run after the optimizer step in
	// flight: a checkpoint is written and Result.Interrupted is set.
	Stop <-chan struct{}
	// ResumeCommand is the command line that continues this run, printed when it is interrupted; empty
	// means a generic one.
	ResumeCommand string
}

func (o RunOptions) resumeCommand() string {
	if o.ResumeCommand != "" {
		return o.ResumeCommand
	}
	return "trainer run CONFIG --resume"
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
	// AlreadyFinished says a resumed run had already reached its end: nothing was trained or written.
	AlreadyFinished bool
}

// stepRunner runs one (micro-)step on a micro-batch given as one shard per replica: the compiled
// trainstep.Step in a run; tests wrap it.
type stepRunner interface {
	RunShards(images, labels []*tensors.Tensor, sc trainstep.Scalars) (trainstep.Result, error)
}

// Run trains cfg's net on cfg's data, evaluating after every eval.every_epochs epochs and writing
// runs/<name>/{config.yaml, metrics.jsonl, checkpoints/}.
func Run(cfg config.Config, opts RunOptions) (Result, error) {
	start := time.Now()
	s, err := newSession(cfg)
	if err != nil {
		return Result{}, err
	}
	step, err := s.newStep()
	if err != nil {
		return Result{}, err
	}
	defer step.Finalize()
	feed, err := s.newTrainFeed()
	if err != nil {
		return Result{}, err
	}
	return s.train(opts, step, feed, start)
}

// loopState is where the run is, which the loop advances and its hooks read; the few fields hooks
// write say so.
type loopState struct {
	cfg             config.Config
	step, total     int     // optimizer steps done, and the run's
	micro           int     // micro-batches done: k per optimizer step
	k               int     // micro-batches per optimizer step (optimizer.accumulate_steps)
	batchesPerEpoch int     // micro-batches per epoch
	perEpoch        float64 // optimizer steps per epoch (fractional under accumulation)
	lr, emaDecay    float64 // of the last micro-batch
	// window holds the train metrics since the last log record (the log hook restarts it); logDue says
	// the optimizer step just done ends it.
	window window
	logDue bool
	// emaFresh makes the EMA shadows start from the weights at the next step; the first applied
	// optimizer step clears it.
	emaFresh bool
	// Written by the guard hook: holdBack withholds the update of the optimizer step in flight, one of
	// its micro-batches having been non-finite (skipped says the step just done was withheld);
	// lrScale is reduce_lr's factor on the schedule.
	holdBack, skipped bool
	lrScale           float64
	// lastCheckpoint is the newest checkpoint written (by the checkpoint hook), or resumed from.
	lastCheckpoint string
	// stop, set by the signal hook, ends the run after the optimizer step in flight.
	stop bool
}

// epoch is the number of epochs done.
func (st *loopState) epoch() float64 { return float64(st.step) / st.perEpoch }

// window is the train metrics of the optimizer steps since the last log record.
type window struct {
	loss, correct float64   // sums over the finite micro-batches
	batches       int       // finite micro-batches
	steps         int       // optimizer steps, skipped ones included
	start, end    time.Time // end: the end of the last optimizer step
}

func (w window) meanLoss() float64 { return w.loss / float64(w.batches) }

func (w window) imagesPerSec(batchSize int) float64 {
	return float64(w.batches*batchSize) / w.end.Sub(w.start).Seconds()
}

// Hooks react to the loop's events; each implements the methods of the events it needs, and an error
// ends the run. The loop calls them in the order they were given.
type (
	// nonFiniteHook is told of a micro-batch whose loss or gradients were not finite.
	nonFiniteHook interface {
		onNonFinite(st *loopState, res trainstep.Result) error
	}
	// stepHook runs after every optimizer step.
	stepHook interface{ afterStep(st *loopState) error }
	// epochHook runs when an epoch's last micro-batch is done.
	epochHook interface{ afterEpoch(st *loopState) error }
	// startHook runs once before the first micro-batch.
	startHook interface{ atStart(st *loopState) error }
	// endHook runs once the loop has ended, by the run's end or a stop.
	endHook interface{ atEnd(st *loopState) error }
)

// loop drives the step over the feed: micro-batches, optimizer steps, epochs.
type loop struct {
	step  stepRunner
	feed  feed
	hooks []any
}

// run trains from st's position to the run's end, or until a hook stops it, then runs the end hooks.
func (l *loop) run(st *loopState) error {
	if err := fire(l.hooks, func(h startHook) error { return h.atStart(st) }); err != nil {
		return err
	}
	for st.step < st.total && !st.stop {
		if err := l.epoch(st); err != nil {
			return err
		}
	}
	return fire(l.hooks, func(h endHook) error { return h.atEnd(st) })
}

// epoch runs the epoch st.micro is in, from there to its end, the run's end or a stop.
func (l *loop) epoch(st *loopState) error {
	it := l.feed.iterate(st.micro/st.batchesPerEpoch, st.micro%st.batchesPerEpoch)
	defer it.close()
	for st.step < st.total && !st.stop {
		batch, ok := it.next()
		if !ok {
			break
		}
		if err := l.microStep(st, batch); err != nil {
			return err
		}
	}
	if st.stop {
		return nil
	}
	it.close()
	if err := it.err(); err != nil {
		return fmt.Errorf("train data: %w", err)
	}
	if st.micro%st.batchesPerEpoch != 0 {
		return nil // the run ended inside the epoch
	}
	return fire(l.hooks, func(h epochHook) error { return h.afterEpoch(st) })
}

// microStep runs one micro-batch and, when it is the last of its optimizer step, ends that step.
func (l *loop) microStep(st *loopState, batch shards) error {
	j := st.micro % st.k // position in the accumulation group
	st.lr = schedule.LearningRate(st.cfg, st.step, st.total, st.perEpoch) * st.lrScale
	// A group with a non-finite micro-batch is not applied (guard.nonfinite skip/reduce_lr).
	sc := trainstep.Scalars{LR: st.lr, Update: st.step + 1, Apply: j == st.k-1 && !st.holdBack}
	if j > 0 {
		sc.Keep = 1
	}
	if st.cfg.EMA.Decay > 0 {
		st.emaDecay = schedule.EMADecay(st.cfg.EMA, st.step)
		sc.EMADecay, sc.EMAFresh = st.emaDecay, st.emaFresh
	}
	res, err := l.step.RunShards(batch.images, batch.labels, sc)
	batch.finalize()
	if err != nil {
		return fmt.Errorf("train step %d: %w", st.step, err)
	}
	st.micro++
	if res.NonFinite.Any() {
		if err := fire(l.hooks, func(h nonFiniteHook) error { return h.onNonFinite(st, res) }); err != nil {
			return err
		}
	} else {
		st.window.loss += res.Loss
		st.window.correct += res.Correct
		st.window.batches++
	}
	if j < st.k-1 {
		return nil
	}
	st.step++
	st.skipped, st.holdBack = st.holdBack, false
	if !st.skipped {
		st.emaFresh = false // the shadows were initialised by this step
	}
	st.window.steps++
	st.window.end = time.Now()
	// A window of skipped steps only has its nonfinite records.
	st.logDue = (st.window.steps >= st.cfg.Log.EverySteps || st.step == st.total) && st.window.batches > 0
	return fire(l.hooks, func(h stepHook) error { return h.afterStep(st) })
}

// fire calls every hook that handles the event H, in order, up to the first error.
func fire[H any](hooks []any, call func(H) error) error {
	for _, h := range hooks {
		if h, ok := h.(H); ok {
			if err := call(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// train runs the loop of the session's config with step over feed: it sets up or resumes the run
// directory, attaches the hooks and reports the result. start is when the run began.
func (s *session) train(opts RunOptions, step stepRunner, feed feed, start time.Time) (res Result, err error) {
	cfg := s.cfg
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	evalLoader, err := s.loader("test", cfg.Data.EvalBatchSize, false)
	if err != nil {
		return res, err
	}
	// The loader counts micro-batches; schedules, logs and checkpoints count optimizer steps, each of
	// k = optimizer.accumulate_steps micro-batches.
	k, batches := max(cfg.Optimizer.AccumulateSteps, 1), feed.batchesPerEpoch()
	total, perEpoch := schedule.Length(cfg, batches)
	if total == 0 {
		return res, fmt.Errorf("optimizer.accumulate_steps %d exceeds the %d batches of %d epochs: nothing to train",
			k, cfg.Epochs*batches, cfg.Epochs)
	}
	if err := cfg.CheckScheduleLength(total, perEpoch); err != nil {
		return res, err
	}
	res.Dir = cfg.Dir()
	rd, err := s.openRunDir(opts, out, total)
	if err != nil {
		return res, err
	}
	defer rd.close()
	if rd.finished {
		return rd.finishedResult(res, total, out), nil
	}

	st := &loopState{cfg: cfg, step: rd.startStep, total: total, micro: rd.startStep * k, k: k, batchesPerEpoch: batches,
		perEpoch: perEpoch, emaFresh: s.emaFresh, lrScale: 1, window: window{start: time.Now()}}
	if rd.resumed != nil {
		st.lastCheckpoint = rd.resumed.Path
		if scale := rd.resumed.Header.LRScale; scale > 0 {
			st.lrScale = scale
		}
	}
	term := newProgressHook(out, opts.Progress, st)
	defer term.bar.Done() // an error return must not leave a phase's spinner running
	ckpts := &checkpointHook{s: s, dir: filepath.Join(res.Dir, "checkpoints"), from: rd.resumed}
	best := newBestHook(ckpts, term)
	eval := &evalHook{s: s, loader: evalLoader, metrics: rd.metrics, term: term, best: best, lastEval: -1}
	l := loop{step: step, feed: feed, hooks: []any{
		newGuardHook(cfg.Guard, rd.metrics, term), // first: the others see a step once its policy is applied
		term, newLogHook(rd.metrics, cfg, feed, term), newBoardHook(cfg, res.Dir, rd.metrics), ckpts, signalHook{opts.Stop},
		eval, ckpts.final(),
	}}
	replicasNote := ""
	if cfg.Replicas > 1 {
		replicasNote = fmt.Sprintf(" (%d replicas of %d)", cfg.Replicas, cfg.ReplicaBatch())
	}
	fmt.Fprintf(out, "training %s (%s) on %s: %d steps, %.4g per epoch, batch %d%s x %d\n",
		cfg.Name, cfg.Net.Name, cfg.Data.Source, total, perEpoch, cfg.Data.BatchSize, replicasNote, k)
	fmt.Fprintf(out, "backend %s; run directory %s\nmetrics log %s\n", s.backend.Name(), res.Dir, rd.metrics.path)
	s.printDevices(out)

	err = l.run(st)
	res.Eval, res.EMAEval = eval.last, eval.lastEMA
	if err != nil {
		return res, err
	}
	res.Step, res.Checkpoint, res.Elapsed = st.step, st.lastCheckpoint, time.Since(start)
	if st.stop {
		res.Interrupted = true
		fmt.Fprintf(out, "interrupted after step %d of %d; checkpoint %s\nresume with: %s\n",
			st.step, total, res.Checkpoint, opts.resumeCommand())
		return res, nil
	}
	fmt.Fprintf(out, "done in %s; checkpoint %s\n", res.Elapsed.Round(time.Second), res.Checkpoint)
	return res, nil
}
