package trainer

import (
	"fmt"
	"io"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/trainer/trainer/config"
)

// Plan is what a run of a config would do, worked out without training or writing anything: its
// length, the data it reads, its schedule's warmup, when it evaluates and checkpoints, and an
// estimate of its training time from a few steps timed on the chosen backend.
type Plan struct {
	Total      int     // optimizer steps
	PerEpoch   float64 // optimizer steps per epoch
	TrainFrom  string  // where the training split's size came from (the split itself, a known size)
	Eval       string  // the eval split
	Warmup     int     // warmup steps the schedule runs (config.ScheduleConfig.RunWarmup)
	WarmupNote string  // set when the run shortens the recipe's warmup
	// Timing of TimedSteps optimizer steps fed by the recipe's own data, after the first (which
	// compiles the step and is CompileS).
	TimedSteps int
	CompileS   float64
	StepS      float64 // seconds per optimizer step
}

// ETA is the estimated training time: the compile, then every optimizer step at the timed rate
// (evaluations and checkpoints not counted).
func (p Plan) ETA() time.Duration {
	return time.Duration((p.CompileS + float64(p.Total)*p.StepS) * float64(time.Second))
}

// PlanRun works out cfg's Plan, timing timedSteps optimizer steps (after the compiling one) of the
// real loop on cfg's backend and data; timedSteps 0 times nothing. Nothing is written.
func PlanRun(cfg config.Config, timedSteps int) (Plan, error) {
	total, perEpoch, from, err := ScheduleLength(cfg, 0)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Total: total, PerEpoch: perEpoch, TrainFrom: from, Warmup: cfg.Schedule.RunWarmup(perEpoch, total),
		WarmupNote: cfg.Schedule.WarmupNote(perEpoch, total), TimedSteps: timedSteps}
	if _, eval := cfg.Data.DataPaths(); eval != "" {
		p.Eval = eval
	} else {
		p.Eval = cfg.Data.Source + "'s test split"
	}
	if timedSteps <= 0 {
		return p, nil
	}
	s, err := newSession(cfg)
	if err != nil {
		return p, err
	}
	defer s.backend.Finalize()
	step, err := s.newStep()
	if err != nil {
		return p, err
	}
	defer step.Finalize()
	feed, err := s.newTrainFeed()
	if err != nil {
		return p, err
	}
	run, err := timeLoop(s, step, feed, timedSteps, false)
	if err != nil {
		return p, err
	}
	p.CompileS = (run.timing.firstWait + run.timing.firstDispatch).Seconds()
	p.StepS = run.timed.Seconds() / float64(timedSteps)
	return p, nil
}

// Print writes the plan of cfg's run, which would write dir, in lines that fit 80 columns (paths
// aside).
func (p Plan) Print(w io.Writer, cfg config.Config, dir string) {
	k := max(cfg.Optimizer.AccumulateSteps, 1)
	fmt.Fprintf(w, "plan of %s (%s) on backend %s; nothing is trained or written\n", cfg.Name, cfg.Net.Label(), cfg.Backend)
	fmt.Fprintf(w, "  %s optimizer steps: %.4g epochs of %.4g, batch %d x %d\n", humanize.Comma(int64(p.Total)),
		float64(p.Total)/p.PerEpoch, p.PerEpoch, cfg.Data.BatchSize, k)
	fmt.Fprintf(w, "  train data: %s images an epoch, %s\n  eval data: %s\n",
		humanize.Comma(int64(p.PerEpoch*float64(k*cfg.Data.BatchSize)+0.5)), p.TrainFrom, p.Eval)
	fmt.Fprintf(w, "  lr: %s schedule, peak %.4g, warmup %d steps\n", cfg.Schedule.Name, cfg.PeakLR(), p.Warmup)
	if p.WarmupNote != "" {
		fmt.Fprintln(w, p.WarmupNote)
	}
	eval := "at the end"
	if e := cfg.Eval.EveryEpochs; e > 0 {
		eval = fmt.Sprintf("every %d epoch(s) and at the end", e)
	}
	ckpt := "at the end"
	if e := cfg.Checkpoint.EverySteps; e > 0 {
		ckpt = fmt.Sprintf("every %s steps (%d kept) and at the end", humanize.Comma(int64(e)), cfg.Checkpoint.Keep)
	}
	best := cfg.BestMetric()
	if best != "" {
		ckpt += ", best.tckpt on " + best
	}
	fmt.Fprintf(w, "  eval %s\n  checkpoints %s\n", eval, ckpt)
	fmt.Fprintf(w, "  run directory %s\n", dir)
	if p.TimedSteps > 0 {
		compile := time.Duration(p.CompileS * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(w, "  timed on %s: compile %s, then %.3g ms per step over %d steps\n", cfg.Backend, compile,
			1000*p.StepS, p.TimedSteps)
		fmt.Fprintf(w, "  estimated training time: %s (evaluations and checkpoints not counted)\n",
			p.ETA().Round(time.Second))
	}
}
