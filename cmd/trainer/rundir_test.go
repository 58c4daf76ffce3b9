package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepeatedRunsGetFreshDirectories: running the same command twice trains the second run in
// runs/NAME-2 (said at the start) and leaves every file of the first as it was; --resume continues the
// newest (NAME-2), and the resume hint of a numbered run names it.
func TestRepeatedRunsGetFreshDirectories(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "again.yaml")
	runs := filepath.Join(dir, "runs")
	body := "net:\n  name: linear\nsteps: 2\ndata:\n  batch_size: 16\neval:\n  every_epochs: 0\nrun_dir: " + runs + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	snapshot := func(root string) map[string]string {
		files := map[string]string{}
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				data, _ := os.ReadFile(p)
				files[p] = string(data)
			}
			return nil
		})
		return files
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(args, &out, &errOut); err != nil {
			t.Fatalf("trainer %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	cli("run", cfg, "--no-progress")
	first := snapshot(filepath.Join(runs, "again"))
	if len(first) == 0 {
		t.Fatal("the first run wrote nothing")
	}
	out := cli("run", cfg, "--no-progress")
	want := filepath.Join(runs, "again") + " holds an earlier run; this one writes " + filepath.Join(runs, "again-2")
	if !strings.Contains(out, want) || !strings.Contains(out, "run directory "+filepath.Join(runs, "again-2")) {
		t.Errorf("second run's output lacks %q:\n%s", want, out)
	}
	after := snapshot(filepath.Join(runs, "again"))
	if len(after) != len(first) {
		t.Errorf("the first run's directory had %d files, now %d", len(first), len(after))
	}
	for p, data := range first {
		if after[p] != data {
			t.Errorf("the second run changed %s", p)
		}
	}
	if ckpts, _ := filepath.Glob(filepath.Join(runs, "again-2", "checkpoints", "ckpt-*.tckpt")); len(ckpts) == 0 {
		t.Errorf("the second run wrote no checkpoint in again-2")
	}
	out = cli("run", cfg, "--no-progress", "--resume", "--set", "steps=3")
	if !strings.Contains(out, "resuming the newest run of again: "+filepath.Join(runs, "again-2")) ||
		!strings.Contains(out, "(step 2)") {
		t.Errorf("--resume did not continue again-2 from step 2:\n%s", out)
	}
	if got := runSets([]string{"steps=3"}, "again", "again-2"); strings.Join(got, " ") != "steps=3 name=again-2" {
		t.Errorf("a numbered run's resume flags: %v", got)
	}
}

// TestGoRunBinaryDetected: the binary `go run` builds is recognised by its place in the go-build
// cache, so the commands the run prints start with `go run ./cmd/trainer`; an installed one is not.
func TestGoRunBinaryDetected(t *testing.T) {
	for path, want := range map[string]bool{
		"/tmp/go-build2930489711/b001/exe/trainer":    true,
		"/home/u/.cache/go-build123/b001/exe/trainer": true,
		"/home/u/go/bin/trainer":                      false,
		"/tmp/go-build2930489711/b001/trainer.test":   false,
		"/opt/exe/trainer":                            false,
	} {
		if got := isGoRunBinary(path); got != want {
			t.Errorf("isGoRunBinary(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestQuickTryShortensTheWarmup: a --set steps shorter than the recipe's warmup trains, warming up over
// a tenth of the run, and says so in one line.
func TestQuickTryShortensTheWarmup(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "warm.yaml")
	body := "net:\n  name: linear\nepochs: 2\nschedule:\n  warmup_epochs: 0.5\ndata:\n  batch_size: 16\neval:\n  every_epochs: 0\n" +
		"run_dir: " + filepath.Join(dir, "runs") + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"run", cfg, "--no-progress", "--set", "steps=20"}, &out, &errOut); err != nil {
		t.Fatalf("a 20-step try of a recipe with a 1875-step warmup: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"note: schedule.warmup_epochs 0.5 is 1875 steps, not shorter than this 20-step run:\n  warming up over 2 steps",
		// The header, one fact per line for an 80-column terminal.
		"\ntraining warm (linear) on mnist\n  20 steps, 3750 per epoch, batch 16 x 1\n  backend SimpleGo (go); run directory ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPlanTrainsAndWritesNothing: `run --plan` prints the run's length, data, schedule, evals,
// checkpoints, the directory it would write and an estimate from timed steps, and creates nothing.
func TestPlanTrainsAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "p.yaml")
	runs := filepath.Join(dir, "runs")
	body := "net:\n  name: linear\nepochs: 2\nschedule:\n  warmup_epochs: 0.5\ndata:\n  batch_size: 100\n" +
		"checkpoint:\n  every_steps: 200\n  keep: 2\nrun_dir: " + runs + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"run", cfg, "--plan"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"plan of p (linear) on backend go; nothing is trained or written\n",
		"  1,200 optimizer steps: 2 epochs of 600, batch 100 x 1\n",
		"  train data: 60,000 images an epoch, the training split, mnist\n",
		"  lr: constant schedule, peak 0.1, warmup 300 steps\n",
		"  eval every 1 epoch(s) and at the end\n  checkpoints every 200 steps (2 kept) and at the end, best.tckpt on top1\n",
		"  run directory " + filepath.Join(runs, "p") + "\n",
		"  timed on go: compile ", " ms per step over 10 steps\n", "  estimated training time: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(runs); err == nil {
		t.Errorf("--plan created %s", runs)
	}
	if err := run([]string{"run", cfg, "--plan", "--resume"}, &out, &errOut); err == nil {
		t.Error("--plan with --resume: want an error")
	}
}
