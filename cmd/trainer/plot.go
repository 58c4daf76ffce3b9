package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/trainer/trainer/schedule"
	"github.com/trainer/trainer/trainer"
)

// cmdPlot draws PNGs: `plot schedule CONFIG` (lr and EMA decay over the run, as the loop computes them)
// and `plot run DIR` (loss, lr and accuracy from DIR/metrics.jsonl).
func cmdPlot(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("plot: expected `plot schedule CONFIG [--out FILE.png]` or `plot run DIR [--out DIR]`")
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
		if err := trainer.WritePNGFile(path, trainer.ScheduleCharts(cfg, total, perEpoch)...); err != nil {
			return fmt.Errorf("plot schedule: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %d optimizer steps (%.4g per epoch), peak lr %g, last lr %g\n",
			path, total, perEpoch, cfg.PeakLR(), schedule.LearningRate(cfg, total-1, total, perEpoch))
		return nil
	case "run":
		positional, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(positional) != 1 {
			return fmt.Errorf("plot run: expected one run directory, got %d arguments", len(positional))
		}
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
