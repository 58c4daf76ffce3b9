package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/plot"
)

func TestPlotRunWritesThreePNGs(t *testing.T) {
	dir := t.TempDir()
	log := `{"type":"train","step":10,"epoch":0.5,"loss":1.5,"accuracy":0.5,"lr":0.1}
{"type":"eval","step":20,"epoch":1,"top1":0.8,"loss":0.7,"ema_top1":0.75}
`
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := cmdPlot([]string{"run", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	for _, name := range []string{"loss.png", "lr.png", "accuracy.png"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(data)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("stdout %q does not list %s", stdout.String(), name)
		}
	}
	if err := cmdPlot([]string{"histogram"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "schedule or run") {
		t.Errorf("unknown plot: %v", err)
	}
	out := t.TempDir()
	if err := cmdPlot([]string{"run", dir, "--out", out, "--log-loss=false", "--smooth", "0"}, &stdout, &stderr); err != nil {
		t.Errorf("linear loss, no smoothing: %v", err)
	}
	for _, smooth := range []string{"1", "NaN"} {
		if err := cmdPlot([]string{"run", dir, "--smooth", smooth}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--smooth") {
			t.Errorf("--smooth %s: %v, want an error naming the flag", smooth, err)
		}
	}
	// A torn last line (an append cut short) is drawn around, with a note on stderr.
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(log+`{"type":"train","st`), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if err := cmdPlot([]string{"run", dir}, &stdout, &stderr); err != nil || !strings.Contains(stderr.String(), "line 3: ignored a torn last line") {
		t.Errorf("torn last line: %v, stderr %q", err, stderr.String())
	}
	empty := t.TempDir()
	if err := cmdPlot([]string{"run", empty}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), filepath.Join(empty, "metrics.jsonl")) {
		t.Errorf("a directory without metrics.jsonl: %v, want an error naming the file", err)
	}
}

// TestScheduleOfPeaksAtTheEndOfWarmup: the schedule drawn is the loop's, its lr line peaking where the
// warmup ends and the EMA decay warming up from 0.1.
func TestScheduleOfPeaksAtTheEndOfWarmup(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name = "plot"
	cfg.Optimizer.LR = 0.1
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupSteps: 50}
	cfg.EMA = config.EMAConfig{Decay: 0.999, Warmup: true}
	const total = 300
	s := scheduleOf(cfg, total, 30)
	if len(s.LR) != total || len(s.EMADecay) != total {
		t.Fatalf("%d lr and %d decay values, want %d", len(s.LR), len(s.EMADecay), total)
	}
	if got := s.EMADecay[0]; got != 0.1 {
		t.Errorf("EMA decay at step 0: %g, want 0.1", got)
	}
	charts := plot.ScheduleCharts(s)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want lr and EMA decay", len(charts))
	}
	var line *plotter.Line
	for _, p := range charts[0].Plotters {
		if l, ok := p.(*plotter.Line); ok {
			line = l
		}
	}
	peak := 0
	for i, p := range line.XYs {
		if p.Y > line.XYs[peak].Y {
			peak = i
		}
	}
	if x := line.XYs[peak].X; x != 49 {
		t.Errorf("lr line peaks at step %g, want the end of warmup at 49", x)
	}
	cfg.EMA = config.EMAConfig{}
	if s := scheduleOf(cfg, total, 30); s.EMADecay != nil {
		t.Error("a run without EMA has an EMA-decay series")
	}
}

func TestPlotScheduleOfARecipe(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.png")
	var stdout, stderr bytes.Buffer
	err := cmdPlot([]string{"schedule", "../../configs/mnist_cnn_adamw_ema.yaml", "--out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	// 60000 images / 64 = 937 steps per epoch, 2 epochs.
	if !strings.Contains(stdout.String(), "1874 optimizer steps") {
		t.Errorf("stdout %q, want 1874 optimizer steps", stdout.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dy() != 2*plot.PanelHeightPx {
		t.Errorf("schedule PNG is %v, want two %d-px panels (lr and EMA decay)", img.Bounds(), plot.PanelHeightPx)
	}
}

// TestPlotScheduleWithoutData: every shipped recipe plots its schedule with its data absent, sizing the
// training split from the dataset it names (ImageNet 1,281,167, Imagenette 9,469, CIFAR-10 50,000
// images); --train-examples sets the size when the dataset is not a known one; a split that is present
// (here packed Imagenette-like shards) is sized from its own shard index.
func TestPlotScheduleWithoutData(t *testing.T) {
	t.Setenv(config.DataEnv, t.TempDir()) // no dataset there
	recipes, _ := filepath.Glob("../../configs/*.yaml")
	if len(recipes) == 0 {
		t.Fatal("no recipes")
	}
	want := map[string]string{
		"resnet50_sgd.yaml":            "450360 optimizer steps (5004 per epoch, from 1281167 training examples, imagenet's known size", // 90 epochs of 1,281,167 / 256
		"resnet50_sgd_imagenette.yaml": "2920 optimizer steps (73 per epoch, from 9469 training examples, imagenette's",                 // 40 epochs of 9,469 / 128
		"cifar8_sgd.yaml":              "11700 optimizer steps (390 per epoch, from 50000 training examples, cifar10's",                 // 30 epochs of 50,000 / 128
	}
	for _, recipe := range recipes {
		if testing.Short() && want[filepath.Base(recipe)] == "" && !strings.Contains(recipe, "rsb_a3") {
			continue
		}
		var stdout, stderr bytes.Buffer
		out := filepath.Join(t.TempDir(), "s.png")
		if err := cmdPlot([]string{"schedule", recipe, "--out", out}, &stdout, &stderr); err != nil {
			t.Errorf("%s: %v", filepath.Base(recipe), err)
			continue
		}
		if w := want[filepath.Base(recipe)]; w != "" && !strings.Contains(stdout.String(), w) {
			t.Errorf("%s: %q, want %q", filepath.Base(recipe), stdout.String(), w)
		}
	}
	var stdout, stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "s.png")
	unknown := []string{"schedule", "../../configs/resnet50_sgd_imagenette.yaml", "--out", out, "--set", "data.dataset=\"\""}
	if err := cmdPlot(unknown, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--train-examples") {
		t.Errorf("an unknown dataset without data: %v, want an error naming --train-examples", err)
	}
	if err := cmdPlot(append(unknown, "--train-examples", "1280"), &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "400 optimizer steps (10 per epoch") {
		t.Errorf("--train-examples 1280: %v, %q", err, stdout.String())
	}
	// Shards present: 6 images of 2 classes, batch 2.
	tree := t.TempDir()
	writeTree(t, tree)
	if err := cmdData([]string{"pack", tree, filepath.Join(os.Getenv(config.DataEnv), "imagenette")}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	present := []string{"schedule", "../../configs/resnet50_sgd_imagenette.yaml", "--out", out, "--set", "data.batch_size=2", "--set", "net.num_classes=2"}
	if err := cmdPlot(present, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "120 optimizer steps (3 per epoch, from the training split") {
		t.Errorf("shards present: %v, %q", err, stdout.String())
	}
}

// TestPlotScheduleWritesBesideTheRun: without --out the schedule goes to RUN_DIR/NAME_schedule.png,
// not into the working directory nor into the run's own directory, and the printed rates are rounded
// to 4 significant digits.
func TestPlotScheduleWritesBesideTheRun(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	var stdout, stderr bytes.Buffer
	recipe, _ := filepath.Abs("../../configs/mnist_fast.yaml")
	if err := cmdPlot([]string{"schedule", recipe, "--set", "run_dir=" + runs, "--set", "epochs=3"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	want := filepath.Join(runs, "mnist_fast_schedule.png")
	if _, err := os.Stat(want); err != nil || !strings.HasPrefix(stdout.String(), want+": ") {
		t.Errorf("want %s written and named: %v\n%s", want, err, stdout.String())
	}
	if _, err := os.Stat(filepath.Join(runs, "mnist_fast")); err == nil {
		t.Errorf("plotting a schedule created the run directory")
	}
	m := regexp.MustCompile(`last lr (\S+)\n`).FindStringSubmatch(stdout.String())
	if m == nil || len(strings.TrimLeft(strings.Split(strings.Replace(m[1], ".", "", 1), "e")[0], "0")) > 4 {
		t.Errorf("last lr not rounded to 4 significant digits: %q", stdout.String())
	}
}

// TestTrainLossLabelSaysWhenTargetsAreSoft: the loss plot's train curve is named for what it is: a
// label-smoothed loss (mnist_fast) lies above the eval loss by design; a plain one is "train".
func TestTrainLossLabelSaysWhenTargetsAreSoft(t *testing.T) {
	dir := t.TempDir()
	for recipe, want := range map[string]string{
		"mnist_fast.yaml": "train (label-smoothed 0.1 targets)",
		"mnist_cnn.yaml":  "train",
	} {
		cfg, err := config.Load(filepath.Join("../../configs", recipe), nil)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, recipe)
		if err := os.WriteFile(path, cfg.YAML(), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := trainLossLabel(path); got != want {
			t.Errorf("%s: %q, want %q", recipe, got, want)
		}
	}
	if got := trainLossLabel(filepath.Join(dir, "missing.yaml")); got != "train" {
		t.Errorf("no config: %q", got)
	}
}

// TestPlotScheduleOfLongRunsIsBounded: a run of 10^8 steps (steps=1e8 was OOM-killed holding every
// step) is drawn from at most maxSchedulePoints samples that keep its first and last step and the
// warmup's turn; epochs=1e15 (a makeslice panic) and a split of 99,999,999,999,999 examples are errors
// naming the bound.
func TestPlotScheduleOfLongRunsIsBounded(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name = "long"
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupSteps: 1001}
	const total = 100_000_000
	s := scheduleOf(cfg, total, 1000)
	if len(s.Steps) > maxSchedulePoints+2 || len(s.LR) != len(s.Steps) || s.Total != total {
		t.Fatalf("%d steps, %d lr values, total %d; want at most %d samples, one lr each, total %d", len(s.Steps), len(s.LR), s.Total, maxSchedulePoints+2, total)
	}
	if s.Steps[0] != 0 || s.Steps[len(s.Steps)-1] != total-1 {
		t.Errorf("samples from step %g to %g, want 0 to %d", s.Steps[0], s.Steps[len(s.Steps)-1], total-1)
	}
	peak := slices.Index(s.Steps, 1000)
	if peak < 0 || s.LR[peak] != cfg.PeakLR() {
		t.Errorf("the warmup's last step 1000 sampled at %d, lr there %v; want it sampled at the peak %g", peak, s.LR[max(peak, 0)], cfg.PeakLR())
	}
	if charts := plot.ScheduleCharts(s); charts[0].Plot.X.Max != total {
		t.Errorf("x axis ends at %g, want the run's %d steps", charts[0].Plot.X.Max, total)
	}
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{{"--set", "epochs=1e15"}, {"--train-examples", "99999999999999"}} {
		err := cmdPlot(append([]string{"schedule", "../../configs/mnist_cnn_adamw_ema.yaml", "--out", filepath.Join(t.TempDir(), "s.png")}, args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "epochs") || !strings.Contains(err.Error(), "999999999") {
			t.Errorf("plot schedule %v: %v, want an error naming epochs and the bound", args, err)
		}
	}
}
