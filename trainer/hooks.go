package trainer

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/internal/echo"
	"github.com/trainer/trainer/stats"
)

// The loop's hooks (loop.go), in the order a run attaches them: the guard (guard.go), progress,
// metrics log, checkpoint every N steps, signal stop, eval (with the best checkpoint), final checkpoint.

// progressHook shows the run on the terminal (trainer/progress.go): a bar redrawn every step, or one
// plain line per log record when the output is not a terminal; a spinner while the step compiles and
// while eval runs; and the lines the other hooks print, each after ending the bar's live line.
type progressHook struct {
	bar    *progress
	redraw bool
	batch  int
}

func newProgressHook(out io.Writer, redraw bool, st *loopState) *progressHook {
	images := st.cfg.Data.BatchSize * max(st.cfg.Optimizer.AccumulateSteps, 1)
	return &progressHook{bar: newProgress(out, redraw, st.step, st.total, st.perEpoch, progressImagesPerStep(images)),
		redraw: redraw, batch: st.cfg.Data.BatchSize}
}

// say prints one line.
func (p *progressHook) say(format string, args ...any) {
	fmt.Fprintf(p.bar, format+"\n", args...)
}

// phase names what the run does until the next step or line (compiling, evaluating).
func (p *progressHook) phase(msg string) { p.bar.Phase(msg) }

// atStart shows the compile phase: the first step of a process compiles the train step (minutes on
// first use of a large net on an accelerator).
func (p *progressHook) atStart(*loopState) error {
	p.phase("compiling train step…")
	return nil
}

func (p *progressHook) afterStep(st *loopState) error {
	if p.redraw || st.logDue {
		p.bar.Update(st.step, st.window.meanLoss(), st.lr, st.window.imagesPerSec(p.batch))
	}
	return nil
}

func (p *progressHook) atEnd(*loopState) error {
	p.bar.Done()
	return nil
}

// logHook writes a train record to metrics.jsonl at the end of each log window and starts the next.
type logHook struct {
	metrics   *metricsLog
	batchSize int
	// skipped, when the feed can say, counts the bad records skipped so far (data.on_bad_record:
	// skip): each train record carries the count, and the terminal hears when it grows.
	skipped     func() int64
	term        *progressHook
	lastSkipped int64
}

func newLogHook(metrics *metricsLog, cfg config.Config, f feed, term *progressHook) *logHook {
	h := &logHook{metrics: metrics, batchSize: cfg.Data.BatchSize, term: term}
	counter, ok := f.(interface{ skippedRecords() int64 })
	if ok && cfg.Data.OnBadRecord == config.BadRecordSkip {
		h.skipped = counter.skippedRecords
	}
	return h
}

func (h *logHook) afterStep(st *loopState) error {
	if !st.logDue {
		return nil
	}
	w := st.window
	record := map[string]any{"type": "train", "step": st.step, "epoch": st.epoch(), "loss": w.meanLoss(),
		"accuracy": w.correct / float64(w.batches*h.batchSize), "lr": st.lr, "images_per_sec": w.imagesPerSec(h.batchSize)}
	if st.cfg.EMA.Decay > 0 {
		record["ema_decay"] = st.emaDecay
	}
	if h.skipped != nil {
		n := h.skipped()
		record["skipped_records"] = n
		if n > h.lastSkipped {
			h.term.say("step %d: %d bad records skipped so far (data.on_bad_record: skip)", st.step, n)
			h.lastSkipped = n
		}
	}
	if err := h.metrics.write(record); err != nil {
		return err
	}
	st.window = window{start: time.Now()}
	return nil
}

// checkpointHook writes a checkpoint every checkpoint.every_steps optimizer steps (the final one is
// finalCheckpoint's).
type checkpointHook struct {
	s   *session
	dir string
	// from is the checkpoint the run continues, whose tensors every checkpoint it writes must carry.
	from *checkpoint.Checkpoint
	// writes counts the checkpoints written, periodic and final.
	writes int
}

// header describes the state at optimizer step st.step.
func (h *checkpointHook) header(st *loopState) checkpoint.Header {
	cfg := h.s.cfg
	text := string(cfg.YAML()) // cfg.Hash is this text's checkpoint.ConfigHash: render it once
	return checkpoint.Header{TrainerVersion: Version, ConfigHash: checkpoint.ConfigHash(text), Net: cfg.Net.Label(), NetRevision: h.s.net.Spec.Revision, Step: st.step,
		Epoch: st.step * st.k / st.batchesPerEpoch, Config: text, LRScale: st.lrScale}
}

// complete refuses to write a checkpoint of step that would drop a tensor of the checkpoint the run
// continues (one the context never loaded): no write may lose state.
func (h *checkpointHook) complete(step int) error {
	if h.from == nil || imported(h.from) {
		return nil
	}
	var dropped []string
	for name := range h.from.Tensors {
		scope, base := context.SplitScope(name)
		if h.s.ctx.InspectVariableIfLoaded(scope, base) == nil {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	slices.Sort(dropped)
	return fmt.Errorf("checkpoint of step %d not written: it would drop %d tensors of %s, which the run continues: %s",
		step, len(dropped), h.from.Path, echo.List(dropped, 10))
}

// save writes the checkpoint of st.step and records it as the last one.
func (h *checkpointHook) save(st *loopState) error {
	if err := h.complete(st.step); err != nil {
		return err
	}
	path, err := checkpoint.Save(h.dir, h.s.ctx, h.header(st), h.s.cfg.Checkpoint.Keep)
	if err != nil {
		return err
	}
	h.writes++
	st.lastCheckpoint = path
	return nil
}

// wantsState implements stateHook: the checkpoint of step is written from the state after it.
func (h *checkpointHook) wantsState(st *loopState, step int) bool {
	every := h.s.cfg.Checkpoint.EverySteps
	return every > 0 && step%every == 0 && step < st.total
}

func (h *checkpointHook) afterStep(st *loopState) error {
	if h.wantsState(st, st.step) {
		return h.save(st)
	}
	return nil
}

// final is the hook that checkpoints the state the run ends with (stopped or done), after the
// final eval.
func (h *checkpointHook) final() finalCheckpoint { return finalCheckpoint{periodic: h} }

// finalCheckpoint holds the periodic hook by name, not embedded: embedding would promote its
// afterStep and wantsState, and the loop would fire them twice, writing each periodic checkpoint twice.
type finalCheckpoint struct{ periodic *checkpointHook }

func (h finalCheckpoint) atEnd(st *loopState) error { return h.periodic.save(st) }

// signalHook asks the loop to stop after the optimizer step in flight once stop is closed.
type signalHook struct{ stop <-chan struct{} }

// wantsState implements stateHook: a stop checkpoints the state after the steps dispatched.
func (h signalHook) wantsState(*loopState, int) bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

func (h signalHook) afterStep(st *loopState) error {
	select {
	case <-h.stop:
		st.stop = st.step < st.total
	default:
	}
	return nil
}

// evalHook scores the live weights (and the EMA shadows) every eval.every_epochs epochs and at the
// end, logs both and hands the record to the best checkpoint.
type evalHook struct {
	s             *session
	loader        *data.Loader
	metrics       *metricsLog
	term          *progressHook
	best          *bestHook
	last, lastEMA EvalResult
	lastEval      int // the optimizer step of the last eval
}

func (h *evalHook) afterEpoch(st *loopState) error {
	every := h.s.cfg.Eval.EveryEpochs
	if epochs := st.micro / st.batchesPerEpoch; every > 0 && epochs%every == 0 {
		return h.eval(st, fmt.Sprintf("epoch %d", epochs))
	}
	return nil
}

func (h *evalHook) atEnd(st *loopState) error {
	if st.stop || h.lastEval == st.step {
		return nil
	}
	return h.eval(st, fmt.Sprintf("final eval at step %d", st.step))
}

func (h *evalHook) eval(st *loopState, label string) error {
	h.term.phase("evaluating…")
	skippedBefore := h.loader.Skipped()
	ev, err := h.s.evaluate(h.loader)
	if err != nil {
		return err
	}
	h.last, h.lastEval = ev, st.step
	record := map[string]any{"type": "eval", "step": st.step, "epoch": st.epoch(),
		"top1": ev.Top1, "top5": ev.Top5, "loss": ev.Loss, "examples": ev.Examples,
		"top1_lo": ev.Top1Lo, "top1_hi": ev.Top1Hi}
	if skipped := h.loader.Skipped() - skippedBefore; skipped > 0 {
		record["skipped_records"] = skipped // left out of the score (data.on_bad_record: skip)
	}
	// One short line per scored set of weights, so an 80-column terminal does not wrap them.
	// The bracket is top-1's 95% Wilson interval: a gap inside it may be noise.
	line := fmt.Sprintf("%s: top-1 %s  top-5 %.2f%%  loss %.4f (%d images)", label, stats.Interval(ev.Correct, ev.Examples), 100*ev.Top5, ev.Loss, ev.Examples)
	if h.s.cfg.EMA.Decay > 0 {
		em, err := h.s.evaluateEMA(h.loader)
		if err != nil {
			return err
		}
		h.lastEMA = em
		record["ema_top1"], record["ema_top5"], record["ema_loss"] = em.Top1, em.Top5, em.Loss
		record["ema_top1_lo"], record["ema_top1_hi"] = em.Top1Lo, em.Top1Hi
		line += fmt.Sprintf("\n%s: EMA top-1 %s  top-5 %.2f%%  loss %.4f", label, stats.Interval(em.Correct, em.Examples), 100*em.Top5, em.Loss)
	}
	h.term.say("%s", line)
	if err := h.metrics.write(record); err != nil {
		return err
	}
	return h.best.afterEval(st, record)
}

// bestHook rewrites checkpoints/best.tckpt when the chosen metric improves; a resumed run starts from
// the score in the existing file.
type bestHook struct {
	ckpts  *checkpointHook
	metric string
	score  float64
	path   string
	term   *progressHook
}

func newBestHook(ckpts *checkpointHook, term *progressHook) *bestHook {
	b := &bestHook{ckpts: ckpts, metric: ckpts.s.cfg.BestMetric(), score: math.Inf(-1),
		path: filepath.Join(ckpts.dir, checkpoint.BestName), term: term}
	if prev, err := checkpoint.Load(b.path); err == nil && prev.Header.Metric == b.metric {
		b.score = prev.Header.Score
	}
	return b
}

func (b *bestHook) afterEval(st *loopState, record map[string]any) error {
	score, ok := record[b.metric].(float64)
	if b.metric == "" || !ok || score <= b.score {
		return nil
	}
	b.score = score
	b.term.say("new best %s %.4f at step %d: %s", b.metric, score, st.step, b.path)
	header := b.ckpts.header(st)
	header.Metric, header.Score = b.metric, score
	if err := b.ckpts.complete(st.step); err != nil {
		return err
	}
	return checkpoint.SaveFile(b.path, b.ckpts.s.ctx, header)
}
