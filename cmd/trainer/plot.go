package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/trainer/trainer/trainer"
)

// newPlotCommand declares `trainer plot schedule|run` and their flags.
func newPlotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plot",
		Short: "Draw a recipe's schedule or a run's metrics as PNGs",
		RunE:  requireSubcommand,
	}
	schedule := &cobra.Command{
		Use:   "schedule CONFIG",
		Short: "Draw the learning rate and EMA decay over a whole run of a recipe",
		Args:  cobra.ExactArgs(1),
	}
	scheduleOut := schedule.Flags().String("out", "", "output `FILE.png` (default NAME_schedule.png)")
	sets := schedule.Flags().StringArray("set", nil, setFlagUsage)
	schedule.RunE = func(cmd *cobra.Command, positional []string) error {
		return plotMain("schedule", positional, scheduleOut, *sets, cmd.OutOrStdout())
	}
	runPlot := &cobra.Command{
		Use:   "run DIR",
		Short: "Draw the loss, lr and accuracy of a run from DIR/metrics.jsonl",
		Args:  cobra.ExactArgs(1),
	}
	runOut := runPlot.Flags().String("out", "", "output directory `DIR` (default the run's)")
	runPlot.RunE = func(cmd *cobra.Command, positional []string) error {
		return plotMain("run", positional, runOut, nil, cmd.OutOrStdout())
	}
	cmd.AddCommand(schedule, runPlot)
	return cmd
}

// plotMain draws PNGs: `plot schedule CONFIG` (lr and EMA decay over the run, as the loop computes them)
// and `plot run DIR` (loss, lr and accuracy from DIR/metrics.jsonl).
func plotMain(what string, positional []string, out *string, sets []string, stdout io.Writer) error {
	switch what {
	case "schedule":
		cfg, err := loadConfig(positional[0], sets, "")
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
		if err := trainer.WritePNGFile(path, trainer.ScheduleCharts(cfg, total, perEpoch)...); err != nil {
			return fmt.Errorf("plot schedule: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %d optimizer steps (%.4g per epoch), peak lr %g, last lr %g\n",
			path, total, perEpoch, cfg.PeakLR(), trainer.LearningRate(cfg, total-1, total, perEpoch))
		return nil
	case "run":
		charts, err := trainer.RunCharts(positional[0])
		if err != nil {
			return fmt.Errorf("plot run: %w", err)
		}
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
			if err := trainer.WritePNGFile(path, charts[name]); err != nil {
				return fmt.Errorf("plot run: %w", err)
			}
			fmt.Fprintln(stdout, path)
		}
		return nil
	}
	return fmt.Errorf("plot: unknown plot %q; expected schedule or run", what)
}
