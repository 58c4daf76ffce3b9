package trainer

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// TestResumeRefusesRecipeChanges: a resumed run whose config differs in a key that changes training
// is refused, every such key listed with both values, and nothing is written to the run.
func TestResumeRefusesRecipeChanges(t *testing.T) {
	cfg := smallRun(t, "recipe")
	cfg.Steps = 10
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	logBefore, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl"))
	changed := cfg
	changed.Optimizer.LR = 0.1
	changed.Data.BatchSize = 32
	changed.Steps = 20 // allowed, and not listed
	_, err = Run(changed, RunOptions{Out: io.Discard, Resume: true})
	if err == nil {
		t.Fatal("resumed with another lr and batch size")
	}
	msg := err.Error()
	for _, want := range []string{res.Checkpoint, "optimizer.lr: 0.05 -> 0.1", "data.batch_size: 64 -> 32",
		"keys that may change on resume:", "epochs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "steps: 10 -> 20") {
		t.Errorf("error %q lists an allowed change among the refused ones", msg)
	}
	logAfter, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl"))
	if string(logAfter) != string(logBefore) {
		t.Error("a refused resume changed metrics.jsonl")
	}
}

// TestResumeAcceptsAllowedChangesAndLogsThem: extending a run and changing its log and checkpoint
// intervals is accepted, said on the terminal and recorded in metrics.jsonl.
func TestResumeAcceptsAllowedChangesAndLogsThem(t *testing.T) {
	cfg := smallRun(t, "extend")
	cfg.Steps = 10
	if _, err := Run(cfg, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	longer := cfg
	longer.Steps = 14
	longer.Log.EverySteps = 2
	longer.Checkpoint.Keep = 2
	var out strings.Builder
	res, err := Run(longer, RunOptions{Out: &out, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 14 {
		t.Fatalf("extended run ended at step %d, want 14", res.Step)
	}
	for _, want := range []string{"config change accepted on resume: steps: 10 -> 14",
		"config change accepted on resume: log.every_steps: 5 -> 2", "checkpoint.keep: 5 -> 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out.String())
		}
	}
	resumes := recordsOfType(metricsRecords(t, res.Dir), "resume")
	if len(resumes) != 1 {
		t.Fatalf("%d resume records, want 1", len(resumes))
	}
	changed, _ := resumes[0]["changed"].(map[string]any)
	steps, _ := changed["steps"].(map[string]any)
	if resumes[0]["step"] != 10.0 || len(changed) != 3 || steps["from"] != 10.0 || steps["to"] != 14.0 {
		t.Errorf("resume record %v; want step 10 and changed {steps 10->14, log.every_steps, checkpoint.keep}", resumes[0])
	}
	// The new checkpoints carry the new config, so a further resume compares against it.
	last, err := checkpoint.Load(res.Checkpoint)
	if err != nil || last.Header.Config != string(longer.YAML()) {
		t.Errorf("checkpoint config %v: want the resumed run's", err)
	}
}

// TestResumeTruncatesMetricsLog: records an interrupted run wrote past its checkpoint (and a torn last
// line) are dropped on resume, earlier resume records stay, and the log ends as the uninterrupted run's.
func TestResumeTruncatesMetricsLog(t *testing.T) {
	whole := smallRun(t, "whole")
	whole.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 10}
	resW, err := Run(whole, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	cut := smallRun(t, "cut")
	cut.Checkpoint = whole.Checkpoint
	if _, err := Run(cut, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ckptDir := filepath.Join(cut.Dir(), "checkpoints")
	logPath := filepath.Join(cut.Dir(), "metrics.jsonl")
	// Crash after step 24's records but before its checkpoint (and step 20's), mid-write of a line.
	for _, s := range []int{24, 20} {
		if err := os.Remove(filepath.Join(ckptDir, checkpoint.FileName(s))); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"type":"train","step":2`)
	f.Close()
	if _, err := Run(cut, RunOptions{Out: io.Discard, Resume: true}); err != nil { // from 15
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ckptDir, checkpoint.FileName(24))); err != nil {
		t.Fatal(err)
	}
	res, err := Run(cut, RunOptions{Out: io.Discard, Resume: true}) // from 20
	if err != nil {
		t.Fatal(err)
	}
	records := metricsRecords(t, res.Dir)
	resumes := recordsOfType(records, "resume")
	if len(resumes) != 2 || resumes[0]["step"] != 15.0 || resumes[1]["step"] != 20.0 {
		t.Fatalf("resume records %v; want steps 15 and 20", resumes)
	}
	// The first resume dropped steps 20 and 24's train records, the eval at 24 and the torn line.
	if resumes[0]["dropped_records"] != 4.0 || resumes[1]["dropped_records"] != 2.0 {
		t.Errorf("dropped records %v and %v; want 4 (train 20, 24, eval 24, torn line) and 2 (train 24, eval 24)",
			resumes[0]["dropped_records"], resumes[1]["dropped_records"])
	}
	want := recordsOfType(metricsRecords(t, resW.Dir), "train")
	got := recordsOfType(records, "train")
	if len(got) != len(want) {
		t.Fatalf("%d train records after two resumes, want %d", len(got), len(want))
	}
	for i := range want {
		for _, key := range []string{"step", "loss", "accuracy", "lr"} {
			if got[i][key] != want[i][key] {
				t.Errorf("train record %d: %s = %v, the uninterrupted run logged %v", i, key, got[i][key], want[i][key])
			}
		}
	}
	if n := len(recordsOfType(records, "eval")); n != 1 {
		t.Errorf("%d eval records, want 1", n)
	}
}

// TestCheckpointConfigFallsBackToRunConfig: a checkpoint without an embedded config (an older one) is
// compared with the run directory's config.yaml when that is the config it was written with, and a
// run checkpoint whose config is nowhere is refused rather than resumed blind.
func TestCheckpointConfigFallsBackToRunConfig(t *testing.T) {
	cfg := smallRun(t, "old")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), cfg.YAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	ckpt := &checkpoint.Checkpoint{Path: filepath.Join(dir, "checkpoints", checkpoint.FileName(10)),
		Header: checkpoint.Header{Step: 10, ConfigHash: cfg.Hash()}}
	got, source, ok, err := checkpointConfig(ckpt)
	if err != nil || !ok || source != filepath.Join(dir, "config.yaml") || string(got.YAML()) != string(cfg.YAML()) {
		t.Fatalf("config from config.yaml: ok %v, source %q, err %v", ok, source, err)
	}
	changed := cfg
	changed.Optimizer.Momentum = 0.5
	s := &session{cfg: changed}
	if _, err := s.resumeConfig(ckpt); err == nil || !strings.Contains(err.Error(), "optimizer.momentum") {
		t.Errorf("changed momentum against config.yaml: %v", err)
	}
	ckpt.Header.ConfigHash = "0123456789abcdef" // config.yaml is not the config that wrote it
	if _, err := s.resumeConfig(ckpt); err == nil || !strings.Contains(err.Error(), "cannot be checked") {
		t.Errorf("checkpoint whose config is lost: %v", err)
	}
	ckpt.Header.Step = 0 // an imported checkpoint: fine-tuning from it starts a new recipe
	if changes, err := s.resumeConfig(ckpt); err != nil || changes != nil {
		t.Errorf("imported checkpoint: %v, %v", changes, err)
	}
}

// constantRun is smallRun with a constant lr, so a run of n steps continued to m is the run of m steps.
func constantRun(t *testing.T, name string, steps int) config.Config {
	t.Helper()
	cfg := smallRun(t, name)
	cfg.Steps = steps
	cfg.Schedule = config.ScheduleConfig{Name: "constant"}
	cfg.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 5}
	return cfg
}

// runFiles reads every file under dir but the lock file, by path relative to dir.
func runFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == LockName {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestResumingAFinishedRunChangesNothing: --resume on a run that has reached its end says so and writes
// nothing (its final checkpoint keeps the optimizer state), and continuing it with more steps is
// bit-identical to the longer run done at once.
func TestResumingAFinishedRunChangesNothing(t *testing.T) {
	cfg := constantRun(t, "done", 10)
	if _, err := Run(cfg, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	before := runFiles(t, cfg.Dir())
	var out strings.Builder
	res, err := Run(cfg, RunOptions{Out: &out, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "run done already finished at step 10 (of 10); nothing to do — raise epochs/steps with --set to continue"
	if !res.AlreadyFinished || res.Step != 10 || !strings.Contains(out.String(), want) {
		t.Errorf("resume of a finished run: %+v, output %q; want %q", res, out.String(), want)
	}
	after := runFiles(t, cfg.Dir())
	if len(after) != len(before) {
		t.Errorf("files %d before, %d after the no-op resume", len(before), len(after))
	}
	for name, data := range before {
		if after[name] != data {
			t.Errorf("%s changed on resuming a finished run", name)
		}
	}
	longer := cfg
	longer.Steps = 20
	continued, err := Run(longer, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Run(constantRun(t, "whole", 20), RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoints(t, whole.Checkpoint, continued.Checkpoint, 4)
}

// rewriteWithout rewrites the checkpoint at path without the tensors drop selects (a checkpoint of an
// older trainer, or one damaged by hand), with a valid header and checksum.
func rewriteWithout(t *testing.T, path string, drop func(name string) bool) {
	t.Helper()
	ckpt, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	for name, value := range ckpt.Tensors {
		if !drop(name) {
			scope, base := context.SplitScope(name)
			ctx.InAbsPath(scope).VariableWithValue(base, value)
		}
	}
	if err := checkpoint.SaveFile(path, ctx, ckpt.Header); err != nil {
		t.Fatal(err)
	}
}

// TestIncompleteCheckpointIsRefused: a checkpoint that lacks optimizer slots or the EMA shadows the
// config keeps is refused on resume, naming the file and each missing tensor by its checkpoint name;
// so is one without a model tensor, on resume and on eval (before: a GoMLX error naming neither).
func TestIncompleteCheckpointIsRefused(t *testing.T) {
	cfg := constantRun(t, "partial", 10)
	cfg.EMA = config.EMAConfig{Decay: 0.9}
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(res.Checkpoint); err != nil {
		t.Fatal(err)
	}
	mid := filepath.Join(res.Dir, "checkpoints", checkpoint.FileName(5))
	const slot, shadow, weight = "/optimizer/model/fc/bias/velocity", "/ema/model/fc/bias", "/model/fc/bias"
	ckpt, err := checkpoint.Load(mid)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{slot, shadow, weight} {
		if _, ok := ckpt.Tensors[name]; !ok {
			t.Fatalf("the run's checkpoint has no %s; it holds %d tensors", name, len(ckpt.Tensors))
		}
	}
	logBefore, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl"))
	rewriteWithout(t, mid, func(name string) bool { return name == slot || name == shadow })
	_, err = Run(cfg, RunOptions{Out: io.Discard, Resume: true})
	if err == nil || !strings.Contains(err.Error(), mid) || !strings.Contains(err.Error(), slot) ||
		!strings.Contains(err.Error(), shadow) || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("resume from a checkpoint without a slot and a shadow: %v; want an error naming %s, %s and %s", err, mid, slot, shadow)
	}
	if logAfter, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl")); !bytes.Equal(logBefore, logAfter) {
		t.Error("a refused resume changed metrics.jsonl")
	}
	rewriteWithout(t, mid, func(name string) bool { return name == weight })
	if _, err := Run(cfg, RunOptions{Out: io.Discard, Resume: true}); err == nil ||
		!strings.Contains(err.Error(), mid) || !strings.Contains(err.Error(), weight) {
		t.Errorf("resume from a checkpoint without %s: %v", weight, err)
	}
	if _, err := Evaluate(cfg, mid, false, ""); err == nil || !strings.Contains(err.Error(), mid) || !strings.Contains(err.Error(), weight) {
		t.Errorf("eval of a checkpoint without %s: %v", weight, err)
	}
}

// TestCheckpointWritesNeverDropState: a checkpoint that would lack a tensor of the checkpoint the run
// continues (one its context never loaded) is not written.
func TestCheckpointWritesNeverDropState(t *testing.T) {
	s := &session{ctx: context.New()}
	s.ctx.In("model").VariableWithValue("w", []float32{1})
	value := tensors.FromValue([]float32{0})
	from := &checkpoint.Checkpoint{Path: "runs/x/checkpoints/ckpt-000000005.tckpt",
		Header:  checkpoint.Header{Step: 5, Config: "name: x\n"},
		Tensors: map[string]*tensors.Tensor{"/model/w": value, "/optimizer/model/w/velocity": value}}
	h := &checkpointHook{s: s, dir: t.TempDir(), from: from}
	err := h.complete(7)
	if err == nil || !strings.Contains(err.Error(), "/optimizer/model/w/velocity") || !strings.Contains(err.Error(), from.Path) {
		t.Errorf("a write without the continued checkpoint's velocity: %v", err)
	}
	s.ctx.InAbsPath("/optimizer/model/w").VariableWithValue("velocity", []float32{0})
	if err := h.complete(7); err != nil {
		t.Errorf("with every tensor: %v", err)
	}
}

// TestResumeContinuesWithTheRunsOwnConfig: a run started with --set steps=10 from a recipe of 20 steps
// resumes as a 10-step run (finished), not silently extended to the recipe's 20; --set steps=14 extends
// it; and a recipe since edited in a key a resume may not change is refused.
func TestResumeContinuesWithTheRunsOwnConfig(t *testing.T) {
	dir := t.TempDir()
	recipePath := filepath.Join(dir, "recipe.yaml")
	body := "name: own\nrun_dir: " + filepath.Join(dir, "runs") + "\nnet:\n  name: linear\nsteps: 20\n" +
		"schedule:\n  name: constant\noptimizer:\n  lr: 0.05\ndata:\n  batch_size: 64\n  eval_batch_size: 2000\n" +
		"checkpoint:\n  every_steps: 5\n"
	if err := os.WriteFile(recipePath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	started, err := recipe.Load(recipePath, []string{"steps=10"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(started, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	plain, err := recipe.Load(recipePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, notes, err := ResumeConfig(recipePath, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Steps != 10 || len(notes) != 1 || !strings.Contains(notes[0], "steps") || !strings.Contains(notes[0], "--set steps=20") {
		t.Errorf("resume without --set: steps %d, notes %q; want the run's 10 and a note on the recipe's 20", cfg.Steps, notes)
	}
	if res, err := Run(cfg, RunOptions{Out: io.Discard, Resume: true}); err != nil || !res.AlreadyFinished {
		t.Errorf("resume of the finished 10-step run: %+v, %v", res, err)
	}
	extended, err := recipe.Load(recipePath, []string{"steps=14"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = ResumeConfig(recipePath, extended, []string{"steps=14"}); err != nil || cfg.Steps != 14 {
		t.Fatalf("resume with --set steps=14: steps %d, %v", cfg.Steps, err)
	}
	if res, err := Run(cfg, RunOptions{Out: io.Discard, Resume: true}); err != nil || res.Step != 14 {
		t.Errorf("extended resume: step %d, %v", res.Step, err)
	}
	if err := os.WriteFile(recipePath, []byte(strings.Replace(body, "lr: 0.05", "lr: 0.1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	edited, err := recipe.Load(recipePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ResumeConfig(recipePath, edited, nil); err == nil || !strings.Contains(err.Error(), "optimizer.lr: 0.05 in the run, 0.1 in the recipe") {
		t.Errorf("resume after the recipe's lr was edited: %v", err)
	}
}
