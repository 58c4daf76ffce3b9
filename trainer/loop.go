package trainer

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
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
	// SyncEveryStep makes the loop read every micro-batch's results as soon as it has run and take the
	// next batch from the feed only then, as the loop did before it ran ahead of the device: a run
	// gives the same bits either way (trainer/async_test.go compares them).
	SyncEveryStep bool
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

// stepRunner runs (micro-)steps on micro-batches given as one shard per replica without reading
// anything back, and hands over their results in order when the loop drains it: the compiled
// trainstep.Step in a run (its carry keeps the results and the guard's decisions on the device).
type stepRunner interface {
	StartCarry(lrScale float64, emaFresh bool)
	Dispatch(images, labels []*tensors.Tensor, sc trainstep.Scalars) error
	Drain() []trainstep.Result
}

// Run trains cfg's net on cfg's data, evaluating after every eval.every_epochs epochs and writing
// runs/<name>/{config.yaml, metrics.jsonl, checkpoints/}.
func Run(cfg config.Config, opts RunOptions) (Result, error) {
	return run(cfg, opts, nil)
}

// run is Run with the training feed passed through wrap when it is set: the tests watch or damage the
// real feed that way instead of switching production code.
func run(cfg config.Config, opts RunOptions, wrap func(feed) feed) (Result, error) {
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
	f, err := s.newTrainFeed()
	if err != nil {
		return Result{}, err
	}
	var fd feed = f
	if wrap != nil {
		fd = wrap(f)
	}
	return s.train(opts, step, fd, start)
}

// The loop runs ahead of the device (docs/reliability.md, "The asynchronous loop"): it dispatches
// micro-batch after micro-batch without reading anything back, while its prefetcher decodes the next
// batch and moves it to the device. The step keeps every execution's results and the guard's decisions
// on the device (trainstep's carry); the loop drains them — one transfer — at each log interval, before
// every checkpoint or eval, at an epoch's and the run's end, on a stop, and at least every drainEvery,
// then replays them in order through the hooks, which therefore see each step exactly as if it had been
// read the moment it ran: a non-finite step is reported as the step it was.

// drainEvery bounds the time between two drains, so the progress line and a stop request are not
// held up for a whole log interval of slow steps (a variable for tests that need drains where they
// say).
var drainEvery = time.Second

// loopState is where the run is, which the loop advances and its hooks read; the few fields hooks
// write say so.
type loopState struct {
	cfg             config.Config
	step, total     int     // optimizer steps done, and the run's
	micro           int     // micro-batches done (their results replayed): k per optimizer step
	dispatched      int     // micro-batches handed to the step, whose results may not be read yet
	k               int     // micro-batches per optimizer step (optimizer.accumulate_steps)
	batchesPerEpoch int     // micro-batches per epoch
	perEpoch        float64 // optimizer steps per epoch (fractional under accumulation)
	lr, emaDecay    float64 // of the last micro-batch
	// window holds the train metrics since the last log record (the log hook restarts it); logDue says
	// the optimizer step just done ends it.
	window window
	logDue bool
	// emaFresh makes the EMA shadows start from the weights at the next step; the first applied
	// optimizer step clears it. The step's carry makes the same decision on the device; this is the
	// host's account of it, as of the micro-batch replayed last.
	emaFresh bool
	// Written by the guard hook, as of the micro-batch replayed last (the step's carry took the same
	// decisions on the device when it ran): holdBack says the optimizer step in flight is withheld, one
	// of its micro-batches having been non-finite (skipped says the step just done was withheld);
	// lrScale is reduce_lr's factor on the schedule.
	holdBack, skipped bool
	lrScale           float64
	// lastCheckpoint is the newest checkpoint written (by the checkpoint hook), or resumed from.
	lastCheckpoint string
	// stop, set by the signal hook, ends the run after the optimizer steps dispatched.
	stop bool
	// pending holds what the host chose for each micro-batch dispatched and not yet replayed;
	// lastDrain and drainedSteps say when the loop last drained and how many optimizer steps were
	// dispatched then.
	pending      []dispatched
	lastDrain    time.Time
	drainedSteps int
}

// dispatched is the host's side of one micro-batch the step ran: its schedule's lr (before
// reduce_lr's factor, which the step applies) and EMA decay.
type dispatched struct{ lr, emaDecay float64 }

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
	// stateHook says whether it needs the device state as it is after optimizer step step (a
	// checkpoint of it, or a stop): the loop drains there, so the hook's afterStep sees that state.
	stateHook interface {
		wantsState(st *loopState, step int) bool
	}
	// endHook runs once the loop has ended, by the run's end or a stop.
	endHook interface{ atEnd(st *loopState) error }
)

// loop drives the step over the feed: micro-batches, optimizer steps, epochs.
type loop struct {
	step  stepRunner
	feed  feed
	hooks []any
	// toDevice moves a batch to the devices its shards feed, on the prefetcher's goroutine; nil leaves
	// the transfer to the step.
	toDevice func(shards) error
	// sync reads every micro-batch's results at once and takes batches from the feed without
	// prefetching (RunOptions.SyncEveryStep).
	sync bool
	// timing, when set, adds up where the loop's time goes (trainer bench --data shards).
	timing *loopTiming
}

// loopTiming is where the loop's wall time went: waiting for the feed's next batch, in the step's
// dispatch (the whole execution where the backend runs it synchronously), and draining results.
type loopTiming struct {
	feedWait, dispatch, drain time.Duration
	// The first micro-batch's wait and dispatch, also in the sums: the pipeline's start and, for a
	// step not compiled yet, the compilation.
	firstWait, firstDispatch time.Duration
	micro                    int // micro-batches dispatched
}

// add adds the time since since to the duration pick selects (and, for the first micro-batch, to
// the one first selects).
func (t *loopTiming) add(pick func(*loopTiming) (sum, first *time.Duration), since time.Time) {
	if t == nil {
		return
	}
	d := time.Since(since)
	sum, first := pick(t)
	*sum += d
	if t.micro == 0 && first != nil {
		*first += d
	}
}

func feedWait(t *loopTiming) (sum, first *time.Duration)     { return &t.feedWait, &t.firstWait }
func dispatchTime(t *loopTiming) (sum, first *time.Duration) { return &t.dispatch, &t.firstDispatch }
func drainTime(t *loopTiming) (sum, first *time.Duration)    { return &t.drain, nil }

// run trains from st's position to the run's end, or until a hook stops it, then runs the end hooks.
func (l *loop) run(st *loopState) error {
	if err := fire(l.hooks, func(h startHook) error { return h.atStart(st) }); err != nil {
		return err
	}
	l.step.StartCarry(st.lrScale, st.emaFresh)
	st.lastDrain, st.drainedSteps, st.dispatched = time.Now(), st.step, st.micro
	for st.step < st.total && !st.stop {
		if err := l.epoch(st); err != nil {
			return err
		}
	}
	return fire(l.hooks, func(h endHook) error { return h.atEnd(st) })
}

// epoch runs the epoch st.micro is in, from there to its end, the run's end or a stop.
func (l *loop) epoch(st *loopState) error {
	var it feedIterator = l.feed.iterate(st.micro/st.batchesPerEpoch, st.micro%st.batchesPerEpoch)
	if !l.sync {
		it = prefetch(it, l.toDevice, st.total*st.k-st.dispatched)
	}
	defer it.close()
	for st.dispatched < st.total*st.k && !st.stop {
		wait := time.Now()
		batch, ok := it.next()
		l.timing.add(feedWait, wait)
		if !ok {
			break
		}
		if err := l.dispatch(st, batch); err != nil {
			return err
		}
		if l.drainDue(st) {
			if err := l.drain(st); err != nil {
				return err
			}
		}
	}
	if err := l.drain(st); err != nil { // the epoch's or the run's end, or a stop
		return err
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

// dispatch hands one micro-batch to the step with the host's scalars for it, reading nothing back.
// Whether its group is applied, reduce_lr's factor and the EMA shadows' fresh start are the step's
// carry's to decide, from the results before it.
func (l *loop) dispatch(st *loopState, batch shards) error {
	j, t := st.dispatched%st.k, st.dispatched/st.k // position in the accumulation group; optimizer step
	sc := scalarsFor(st.cfg, t, j, st.k, st.total, st.perEpoch)
	d := dispatched{lr: sc.LR, emaDecay: sc.EMADecay}
	start := time.Now()
	err := l.step.Dispatch(batch.images, batch.labels, sc)
	l.timing.add(dispatchTime, start)
	batch.finalize()
	if err != nil {
		return fmt.Errorf("train step %d: %w", t, err)
	}
	st.dispatched++
	st.pending = append(st.pending, d)
	if l.timing != nil {
		l.timing.micro++
	}
	return nil
}

// scalarsFor is what the host sends with micro-batch j (of k) of optimizer step t (0-based) of a run
// of total steps: the schedule's lr and EMA decay, the update's number, and whether the micro-batch
// starts (Keep 0) or ends (Apply) its group. Scalars.EMAFresh stays false: the step's carry decides.
func scalarsFor(cfg config.Config, t, j, k, total int, perEpoch float64) trainstep.Scalars {
	sc := trainstep.Scalars{LR: schedule.LearningRate(cfg, t, total, perEpoch), Update: t + 1, Apply: j == k-1}
	if j > 0 {
		sc.Keep = 1
	}
	if cfg.EMA.Decay > 0 {
		sc.EMADecay = schedule.EMADecay(cfg.EMA, t)
	}
	return sc
}

// drainDue says whether to read the results now: after every micro-batch in sync mode; else only at
// the end of an optimizer step, and there at a log interval, when a hook needs the state after it, or
// drainEvery after the last drain.
func (l *loop) drainDue(st *loopState) bool {
	if l.sync {
		return true
	}
	if st.dispatched%st.k != 0 {
		return false
	}
	steps := st.dispatched / st.k
	if steps-st.drainedSteps >= st.cfg.Log.EverySteps || time.Since(st.lastDrain) >= drainEvery {
		return true
	}
	for _, h := range l.hooks {
		if h, ok := h.(stateHook); ok && h.wantsState(st, steps) {
			return true
		}
	}
	return false
}

// drain reads the results of the micro-batches dispatched since the last drain and replays them.
func (l *loop) drain(st *loopState) error {
	if len(st.pending) == 0 {
		return nil
	}
	start := time.Now()
	results := l.step.Drain()
	l.timing.add(drainTime, start)
	pending := st.pending
	st.pending = nil
	st.lastDrain, st.drainedSteps = time.Now(), st.dispatched/st.k
	if len(results) != len(pending) {
		return fmt.Errorf("train step %d: %d results for %d micro-batches dispatched", st.step, len(results), len(pending))
	}
	for i, res := range results {
		if err := l.replay(st, pending[i], res); err != nil {
			return err
		}
	}
	// A stop noticed while replaying ends the run after the steps already dispatched, unless they
	// were the run's last.
	st.stop = st.stop && st.step < st.total
	return nil
}

// replay takes one micro-batch's results as the loop would have had them right after it ran and,
// when it is the last of its optimizer step, ends that step.
func (l *loop) replay(st *loopState, d dispatched, res trainstep.Result) error {
	j := st.micro % st.k // position in the accumulation group
	st.lr, st.emaDecay = d.lr*st.lrScale, d.emaDecay
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

// fire calls every hook that handles the event H, in order, up to the first error, which it prefixes
// with the hook's name so that a failed run says which part of the loop stopped it.
func fire[H any](hooks []any, call func(H) error) error {
	for _, h := range hooks {
		if hh, ok := h.(H); ok {
			if err := call(hh); err != nil {
				return fmt.Errorf("%s: %w", hookName(h), err)
			}
		}
	}
	return nil
}

// hookName is what an error of hook h is prefixed with.
func hookName(h any) string {
	switch h.(type) {
	case *guardHook:
		return "non-finite guard"
	case *progressHook:
		return "progress"
	case *logHook:
		return "metrics log"
	case *boardHook:
		return "tensorboard"
	case *checkpointHook:
		return "checkpoint"
	case finalCheckpoint:
		return "final checkpoint"
	case signalHook:
		return "signal"
	case *evalHook:
		return "eval"
	}
	return fmt.Sprintf("hook %T", h)
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
	total, perEpoch, err := schedule.Length(cfg, batches)
	if err != nil {
		return res, err
	}
	if total == 0 {
		return res, fmt.Errorf("optimizer.accumulate_steps %d exceeds the %d batches of %d epochs: nothing to train",
			k, cfg.Epochs*batches, cfg.Epochs)
	}
	if err := cfg.CheckScheduleLength(total, perEpoch); err != nil {
		return res, err
	}
	if note := cfg.Schedule.WarmupNote(perEpoch, total); note != "" {
		fmt.Fprintln(out, note)
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
	}, toDevice: s.toDevice, sync: opts.SyncEveryStep}
	replicasNote := ""
	if cfg.Replicas > 1 {
		replicasNote = fmt.Sprintf(" (%d replicas of %d)", cfg.Replicas, cfg.ReplicaBatch())
	}
	// One fact per line, so that the header fits a terminal of 80 columns (paths aside).
	fmt.Fprintf(out, "training %s (%s) on %s\n  %d steps, %.4g per epoch, batch %d%s x %d\n",
		cfg.Name, cfg.Net.Label(), cfg.Data.Source, total, perEpoch, cfg.Data.BatchSize, replicasNote, k)
	fmt.Fprintf(out, "  backend %s; run directory %s\n  metrics log %s\n", s.backend.Name(), res.Dir, rd.metrics.path)
	s.printDevices(out)
	if src := cfg.Data.Source; src == "imagefolder" || src == "shards" {
		fmt.Fprintln(out, data.JPEGDecoderNote()) // which decoder feeds the run, and how to get the fast one
	}

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
