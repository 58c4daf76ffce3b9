package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/plot"
	"github.com/trainer/trainer/schedule"
	"github.com/trainer/trainer/trainer"
)

// newPlotCommand declares `trainer plot schedule|run` and their flags.
func newPlotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plot",
		Short: "Draw a recipe's schedule or a run's metrics as PNGs",
		RunE:  requireSubcommand,
	}
	scheduleCmd := &cobra.Command{
		Use:   "schedule CONFIG",
		Short: "Draw a recipe's learning rate and EMA decay over its run",
		Args:  cobra.ExactArgs(1),
	}
	var sf plotScheduleFlags
	scheduleCmd.Flags().StringVar(&sf.Out, "out", "", "output `FILE.png` (default RUN_DIR/NAME_schedule.png, beside the run)")
	scheduleCmd.Flags().StringArrayVar(&sf.Set, "set", nil, setFlagUsage)
	scheduleCmd.Flags().IntVar(&sf.TrainExamples, "train-examples", 0, "the training split's size `N` (default: the split's own, or, without the data, the known size of data.dataset)")
	scheduleCmd.RunE = func(cmd *cobra.Command, positional []string) error {
		return plotScheduleMain(sf, positional, cmd.OutOrStdout())
	}
	runPlot := &cobra.Command{
		Use:   "run DIR",
		Short: "Draw a run's loss, lr and accuracy from its metrics.jsonl",
		Args:  cobra.ExactArgs(1),
	}
	var rf plotRunFlags
	runPlot.Flags().StringVar(&rf.Out, "out", "", "output directory `DIR` (default the run's)")
	runPlot.Flags().BoolVar(&rf.LogLoss, "log-loss", true, "draw the loss on a log axis (--log-loss=false: linear, from 0)")
	runPlot.Flags().Float64Var(&rf.Smooth, "smooth", 0.6, "weight `W` in [0, 1) of the train curves' exponential smoothing, drawn over the faded raw curve; 0: raw only")
	runPlot.RunE = func(cmd *cobra.Command, positional []string) error {
		return plotRunMain(rf, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd.AddCommand(scheduleCmd, runPlot)
	return cmd
}

// plotScheduleFlags are `trainer plot schedule`'s flags, one field per flag.
type plotScheduleFlags struct {
	Out           string   // --out
	Set           []string // --set
	TrainExamples int      // --train-examples
}

// plotScheduleMain draws `plot schedule CONFIG`: the lr and EMA decay over the run, as the loop computes them.
func plotScheduleMain(f plotScheduleFlags, positional []string, stdout io.Writer) error {
	if f.TrainExamples < 0 {
		return fmt.Errorf("plot schedule: --train-examples %d, expected >= 1 (0: the split's own size)", f.TrainExamples)
	}
	cfg, err := loadConfig(positional[0], f.Set, "", nil)
	if err != nil {
		return err
	}
	total, perEpoch, from, err := trainer.ScheduleLength(cfg, f.TrainExamples)
	if err != nil {
		return fmt.Errorf("plot schedule: %w", err)
	}
	path := f.Out
	if path == "" {
		// Beside the run's directory, not in it: planning a run must not create or change a run.
		path = filepath.Join(cfg.RunDir, cfg.Name+"_schedule.png")
		if err := os.MkdirAll(cfg.RunDir, 0o755); err != nil {
			return fmt.Errorf("plot schedule: %w", err)
		}
	}
	if err := plot.WritePNGFile(path, plot.ScheduleCharts(scheduleOf(cfg, total, perEpoch))...); err != nil {
		return fmt.Errorf("plot schedule: %w", err)
	}
	if note := cfg.Schedule.WarmupNote(perEpoch, total); note != "" {
		fmt.Fprintln(stdout, note)
	}
	fmt.Fprintf(stdout, "%s: %d optimizer steps (%.4g per epoch, from %s), peak lr %.4g, last lr %.4g\n",
		path, total, perEpoch, from, cfg.PeakLR(), schedule.LearningRate(cfg, total-1, total, perEpoch))
	return nil
}

// plotRunFlags are `trainer plot run`'s flags, one field per flag.
type plotRunFlags struct {
	Out     string  // --out
	LogLoss bool    // --log-loss
	Smooth  float64 // --smooth
}

// plotRunMain draws `plot run DIR`: loss, lr and accuracy from DIR/metrics.jsonl.
func plotRunMain(f plotRunFlags, positional []string, stdout, stderr io.Writer) error {
	runDir := positional[0]
	if !(f.Smooth >= 0 && f.Smooth < 1) { // NaN fails it too
		return fmt.Errorf("plot run: --smooth %g, expected a weight in [0, 1)", f.Smooth)
	}
	metrics, err := plot.ReadMetrics(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		return fmt.Errorf("plot run: %w", err)
	}
	for _, note := range metrics.Notes {
		fmt.Fprintf(stderr, "plot run: %s\n", note)
	}
	charts := plot.RunCharts(metrics, plot.RunOptions{Name: filepath.Base(runDir), LogLoss: f.LogLoss, Smooth: f.Smooth,
		TrainLoss: trainLossLabel(filepath.Join(runDir, "config.yaml"))})
	dir := f.Out
	if dir == "" {
		dir = runDir
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

// trainLossLabel names the train loss of the run whose resolved config is at path: "train", or, when
// the run trained on softened targets (label smoothing, mixup or cutmix), a label that says so, since
// that loss then lies above the eval loss on hard labels. A config it cannot read says "train".
func trainLossLabel(path string) string {
	cfg, err := config.Load(path, nil)
	if err != nil {
		return "train"
	}
	var soft []string
	if ls := cfg.Loss.LabelSmoothing; ls > 0 {
		soft = append(soft, fmt.Sprintf("label-smoothed %g", ls))
	}
	if cfg.Data.Augment.Mixing() {
		soft = append(soft, "mixup/cutmix")
	}
	if len(soft) == 0 {
		return "train"
	}
	return "train (" + strings.Join(soft, ", ") + " targets)"
}

// maxSchedulePoints bounds the steps `plot schedule` evaluates: a longer run is sampled, which a panel
// a few thousand pixels wide cannot tell from every step (a run of 10^9 steps held three 8 GB series).
const maxSchedulePoints = 1 << 20

// scheduleSteps are the optimizer steps scheduleOf evaluates: every step of a run of at most
// maxSchedulePoints, else that many evenly spread from the first to the last, with the last warmup
// step and the first after it, where the schedule turns.
func scheduleSteps(total, warmup int) []int {
	if total <= maxSchedulePoints {
		steps := make([]int, total)
		for t := range steps {
			steps[t] = t
		}
		return steps
	}
	steps := make([]int, 0, maxSchedulePoints+2)
	for i := range maxSchedulePoints {
		steps = append(steps, int(float64(i)*float64(total-1)/float64(maxSchedulePoints-1)))
	}
	for _, t := range []int{warmup - 1, warmup} {
		if t > 0 && t < total {
			steps = append(steps, t)
		}
	}
	slices.Sort(steps)
	return slices.Compact(steps)
}

// scheduleOf is the learning rate and (with ema.decay) the EMA decay at the optimizer steps of the run
// scheduleSteps picks, exactly as the loop computes them.
func scheduleOf(cfg config.Config, total int, perEpoch float64) plot.Schedule {
	steps := scheduleSteps(total, cfg.Schedule.RunWarmup(perEpoch, total))
	s := plot.Schedule{
		LRTitle:       fmt.Sprintf("%s: learning rate (%s schedule, peak %g)", cfg.Name, cfg.Schedule.Name, cfg.PeakLR()),
		StepsPerEpoch: perEpoch,
		Total:         total,
		Steps:         make([]float64, len(steps)),
		LR:            make([]float64, len(steps)),
	}
	for i, t := range steps {
		s.Steps[i] = float64(t)
		s.LR[i] = schedule.LearningRate(cfg, t, total, perEpoch)
	}
	if cfg.EMA.Decay > 0 {
		s.EMATitle = fmt.Sprintf("%s: EMA decay (%g", cfg.Name, cfg.EMA.Decay)
		if cfg.EMA.Warmup {
			s.EMATitle += ", warmup (1+t)/(10+t)"
		}
		s.EMATitle += ")"
		s.EMADecay = make([]float64, len(steps))
		for i, t := range steps {
			s.EMADecay[i] = schedule.EMADecay(cfg.EMA, t)
		}
	}
	return s
}
