package trainer

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainstep"
)

// metricsRecords reads a run's metrics.jsonl.
func metricsRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("metrics.jsonl line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func recordsOfType(records []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range records {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

func loadCkpt(t *testing.T, dir string, step int) *checkpoint.Checkpoint {
	t.Helper()
	c, err := checkpoint.Load(filepath.Join(dir, "checkpoints", checkpoint.FileName(step)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// differingTensors lists the names of tensors that differ between two checkpoints.
func differingTensors(a, b *checkpoint.Checkpoint) []string {
	var out []string
	for name, ta := range a.Tensors {
		if tb, ok := b.Tensors[name]; !ok || !equalBytes(ta, tb) {
			out = append(out, name)
		}
	}
	return out
}

func allFinite(t *testing.T, c *checkpoint.Checkpoint) {
	t.Helper()
	for name, tt := range c.Tensors {
		if tt.DType().String() != "Float32" {
			continue
		}
		for _, v := range tensors.MustCopyFlatData[float32](tt) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s holds %v", name, v)
			}
		}
	}
}

// TestGuardStopNamesStepTensorAndCheckpoint: by default a non-finite step ends the run with an error
// naming the step, the first parameter whose gradient is non-finite and the last checkpoint written.
func TestGuardStopNamesStepTensorAndCheckpoint(t *testing.T) {
	cfg := smallRun(t, "stop")
	cfg.Checkpoint.EverySteps = 5
	_, err := runPoisoned(t, cfg, RunOptions{Out: io.Discard}, 7, 0)
	if err == nil {
		t.Fatal("a NaN batch at step 7 did not stop the run")
	}
	msg := err.Error()
	for _, want := range []string{"non-finite guard: ", "step 7:", "loss NaN", "first non-finite gradient: /model/",
		filepath.Join(cfg.Dir(), "checkpoints", checkpoint.FileName(5)), "guard.nonfinite: stop"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if paths, _ := checkpoint.List(filepath.Join(cfg.Dir(), "checkpoints")); len(paths) != 1 {
		t.Errorf("checkpoints after the stop: %v, want only step 5's", paths)
	}
}

// TestGuardStopOnHugeLR: a recipe that diverges (lr 1e38 overflows the weights after one step) stops at
// step 2, before any checkpoint, and says so.
func TestGuardStopOnHugeLR(t *testing.T) {
	cfg := smallRun(t, "huge")
	cfg.Optimizer.LR = 1e38
	cfg.Schedule = config.ScheduleConfig{Name: "constant"}
	_, err := Run(cfg, RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "step 2:") || !strings.Contains(err.Error(), "none written yet") ||
		!strings.Contains(err.Error(), "/model/") {
		t.Fatalf("lr 1e38: %v; want a stop at step 2 naming a /model/ tensor and no checkpoint", err)
	}
}

// TestGuardSkipLeavesStateUnchanged: with guard.nonfinite=skip the poisoned step changes nothing —
// weights, optimizer slots, EMA shadows, RNG: the checkpoints before and after it are identical —
// and the run goes on, logging the skip. With accumulation the whole group is skipped.
func TestGuardSkipLeavesStateUnchanged(t *testing.T) {
	for _, k := range []int{1, 2} {
		t.Run(map[int]string{1: "plain", 2: "accumulate2"}[k], func(t *testing.T) {
			cfg := smallRun(t, "skip")
			cfg.Steps = 8
			cfg.Guard.NonFinite = config.GuardSkip
			cfg.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
			cfg.Optimizer.AccumulateSteps = k
			cfg.Data.BatchSize = 64 / k
			cfg.Checkpoint = config.CheckpointConfig{EverySteps: 1, Keep: 20}
			if err := recipe.Validate(cfg); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			res, err := runPoisoned(t, cfg, RunOptions{Out: &out}, 5, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.Step != 8 {
				t.Fatalf("ran %d steps, want 8", res.Step)
			}
			// Under accumulation the group's good micro-batch still lands in the gradient sums, which
			// the next group's first micro-batch resets; nothing else may move.
			for _, name := range differingTensors(loadCkpt(t, res.Dir, 4), loadCkpt(t, res.Dir, 5)) {
				if k == 1 || !strings.HasPrefix(name, trainstep.AccumulatorScope+"/") {
					t.Errorf("the skipped step 5 changed %s", name)
				}
			}
			if d := differingTensors(loadCkpt(t, res.Dir, 5), loadCkpt(t, res.Dir, 6)); len(d) == 0 {
				t.Error("step 6 changed nothing: the run did not continue after the skip")
			}
			allFinite(t, loadCkpt(t, res.Dir, 8))
			skips := recordsOfType(metricsRecords(t, res.Dir), "nonfinite")
			if len(skips) != 1 || skips[0]["step"] != 5.0 || skips[0]["action"] != "skip" ||
				!strings.HasPrefix(skips[0]["tensor"].(string), "/model/") || skips[0]["loss_finite"] != false {
				t.Errorf("nonfinite records %v; want one skip at step 5 naming a /model/ tensor", skips)
			}
			if !strings.Contains(out.String(), "step 5: loss NaN") || !strings.Contains(out.String(), "step skipped") {
				t.Errorf("terminal output lacks the skip:\n%s", out.String())
			}
		})
	}
}

// TestGuardSkipGivesUpWhenEveryStepIsNonFinite: skipping cannot repair broken weights; after
// maxSkippedInARow skipped steps the run stops.
func TestGuardSkipGivesUpWhenEveryStepIsNonFinite(t *testing.T) {
	cfg := smallRun(t, "hopeless")
	cfg.Optimizer.LR = 1e38
	cfg.Schedule = config.ScheduleConfig{Name: "constant"}
	cfg.Guard.NonFinite = config.GuardSkip
	_, err := Run(cfg, RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "in a row") || !strings.Contains(err.Error(), "step 12:") {
		t.Fatalf("lr 1e38 with skip: %v; want a stop at step 12 after %d skipped in a row", err, maxSkippedInARow)
	}
}

// TestGuardReduceLRHalvesAndResumes: reduce_lr skips the step and halves the lr for the rest of the
// run; the factor is in the checkpoints, so a resumed run keeps it and ends bit-identical.
func TestGuardReduceLRHalvesAndResumes(t *testing.T) {
	run := func(name string) config.Config {
		cfg := smallRun(t, name)
		cfg.Schedule = config.ScheduleConfig{Name: "constant"}
		cfg.Guard.NonFinite = config.GuardReduceLR
		cfg.Checkpoint = config.CheckpointConfig{EverySteps: 10, Keep: 5}
		return cfg
	}
	a := run("a")
	resA, err := runPoisoned(t, a, RunOptions{Out: io.Discard}, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lrs []float64
	for _, r := range recordsOfType(metricsRecords(t, resA.Dir), "train") {
		lrs = append(lrs, r["lr"].(float64))
	}
	// Records at steps 5, 10, 15, 20, 24; the lr of step 3 onwards is halved.
	if len(lrs) != 5 || lrs[0] != 0.025 || lrs[4] != 0.025 {
		t.Errorf("train records' lr %v; want 0.025 (0.05 halved at step 3) throughout", lrs)
	}
	if c := loadCkpt(t, resA.Dir, 10); c.Header.LRScale != 0.5 {
		t.Errorf("checkpoint of step 10 has lr_scale %g, want 0.5", c.Header.LRScale)
	}

	b := run("b")
	if _, err := runPoisoned(t, b, RunOptions{Out: io.Discard}, 3, 0); err != nil {
		t.Fatal(err)
	}
	ckptDir := filepath.Join(b.Dir(), "checkpoints")
	for _, s := range []int{24, 20} {
		if err := os.Remove(filepath.Join(ckptDir, checkpoint.FileName(s))); err != nil {
			t.Fatal(err)
		}
	}
	resB, err := runPoisoned(t, b, RunOptions{Out: io.Discard, Resume: true}, 3, 0) // from step 10
	if err != nil {
		t.Fatal(err)
	}
	if d := differingTensors(loadCkpt(t, resA.Dir, 24), loadCkpt(t, resB.Dir, 24)); len(d) != 0 {
		t.Errorf("resumed after a reduce_lr: %v differ from the uninterrupted run", d)
	}
}
