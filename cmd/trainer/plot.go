package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/plot"
	"github.com/trainer/trainer/trainer"
)

// cmdPlot draws PNGs: `plot schedule CONFIG` (lr and EMA decay over the run, as the loop computes them)
// and `plot run DIR` (loss, lr and accuracy from DIR/metrics.jsonl).
func cmdPlot(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("plot: expected `plot schedule CONFIG [--set k=v] [--out FILE.png]` or `plot run DIR [--out DIR] [--log-loss=false] [--smooth W]`")
	}
	what, args := args[0], args[1:]
	fs := flag.NewFlagSet("plot "+what, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "output: a .png file (schedule; default NAME_schedule.png) or a directory (run; default DIR)")
	switch what {
	case "schedule":
		var sets setFlags
		fs.Var(&sets, "set", "override a config key (repeatable)")
		positional, err := parse(fs, args)
		if err != nil {
			return err
		}
		cfg, err := loadConfig(fs, positional, sets, "")
		if err != nil {
			return err
		}
		total, perEpoch, err := trainer.ScheduleLength(cfg)
		if err != nil {
			return err
		}
		path := *out
		if path == "" {
			path = cfg.Name + "_schedule.png"
		}
		if err := plot.WritePNGFile(path, plot.ScheduleCharts(scheduleOf(cfg, total, perEpoch))...); err != nil {
			return fmt.Errorf("plot schedule: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %d optimizer steps (%.4g per epoch), peak lr %g, last lr %g\n",
			path, total, perEpoch, cfg.PeakLR(), trainer.LearningRate(cfg, total-1, total, perEpoch))
		return nil
	case "run":
		logLoss := fs.Bool("log-loss", true, "draw the loss on a log axis (--log-loss=false: linear, from 0)")
		smooth := fs.Float64("smooth", 0.6, "weight in [0, 1) of the train curves' exponential smoothing, drawn over the faded raw curve; 0: raw only")
		positional, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(positional) != 1 {
			return fmt.Errorf("plot run: expected one run directory, got %d arguments", len(positional))
		}
		if *smooth < 0 || *smooth >= 1 {
			return fmt.Errorf("plot run: --smooth %g, expected a weight in [0, 1)", *smooth)
		}
		metrics, err := plot.ReadMetrics(filepath.Join(positional[0], "metrics.jsonl"))
		if err != nil {
			return fmt.Errorf("plot run: %w", err)
		}
		charts := plot.RunCharts(metrics, plot.RunOptions{Name: filepath.Base(positional[0]), LogLoss: *logLoss, Smooth: *smooth})
		dir := *out
		if dir == "" {
			dir = positional[0]
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		names := make([]string, 0, len(charts))
		for name := range charts {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			path := filepath.Join(dir, name)
			if err := plot.WritePNGFile(path, charts[name]...); err != nil {
				return fmt.Errorf("plot run: %w", err)
			}
			fmt.Fprintln(stdout, path)
		}
		return nil
	}
	return fmt.Errorf("plot: unknown plot %q; expected schedule or run", what)
}

// scheduleOf is the learning rate and (with ema.decay) the EMA decay at every optimizer step of the run,
// exactly as the loop computes them.
func scheduleOf(cfg config.Config, total int, perEpoch float64) plot.Schedule {
	s := plot.Schedule{
		LRTitle:       fmt.Sprintf("%s: learning rate (%s schedule, peak %g)", cfg.Name, cfg.Schedule.Name, cfg.PeakLR()),
		StepsPerEpoch: perEpoch,
		LR:            make([]float64, total),
	}
	for t := range total {
		s.LR[t] = trainer.LearningRate(cfg, t, total, perEpoch)
	}
	if cfg.EMA.Decay > 0 {
		s.EMATitle = fmt.Sprintf("%s: EMA decay (%g", cfg.Name, cfg.EMA.Decay)
		if cfg.EMA.Warmup {
			s.EMATitle += ", warmup (1+t)/(10+t)"
		}
		s.EMATitle += ")"
		s.EMADecay = make([]float64, total)
		for t := range total {
			s.EMADecay[t] = trainer.EMADecay(cfg.EMA, t)
		}
	}
	return s
}
