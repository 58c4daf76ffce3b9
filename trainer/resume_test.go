package trainer

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
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
