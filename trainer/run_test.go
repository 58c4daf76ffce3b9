package trainer

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/stats"
)

// smallRun is a few steps of softmax regression on real MNIST: enough to learn, cheap enough for CI.
func smallRun(t *testing.T, name string) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Name = name
	cfg.RunDir = t.TempDir()
	cfg.Net.Name = "linear"
	cfg.Steps = 24
	cfg.Data.BatchSize = 64
	cfg.Data.EvalBatchSize = 2000
	cfg.Optimizer.LR = 0.05
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupEpochs: 0.002}
	cfg.Checkpoint = config.CheckpointConfig{EverySteps: 10, Keep: 5}
	cfg.Log.EverySteps = 5
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRunLearnsAndResumesExactly(t *testing.T) {
	// Uninterrupted run.
	a := smallRun(t, "a")
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if resA.Step != 24 {
		t.Fatalf("ran %d steps, want 24", resA.Step)
	}
	if resA.Eval.Examples != 10000 {
		t.Errorf("eval saw %d images, want all 10000", resA.Eval.Examples)
	}
	if resA.Eval.Top1 < 0.80 || resA.Eval.Top5 < resA.Eval.Top1 {
		t.Errorf("after 24 steps: top-1 %.3f, top-5 %.3f; want top-1 >= 0.80 and top-5 >= top-1", resA.Eval.Top1, resA.Eval.Top5)
	}
	for _, f := range []string{"config.yaml", "metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(resA.Dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	log, _ := os.ReadFile(filepath.Join(resA.Dir, "metrics.jsonl"))
	if n := strings.Count(string(log), `"type":"train"`); n != 5 {
		t.Errorf("metrics.jsonl has %d train records, want 5 (every 5 of 24 steps, and the last)", n)
	}
	if !strings.Contains(string(log), `"type":"eval"`) {
		t.Error("metrics.jsonl has no eval record")
	}

	// The same run, stopped after the checkpoint of step 20 (mid-epoch), then resumed.
	b := smallRun(t, "b")
	if _, err := Run(b, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ckptDir := filepath.Join(b.Dir(), "checkpoints")
	if err := os.Remove(filepath.Join(ckptDir, checkpoint.FileName(24))); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(b, RunOptions{Out: io.Discard}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("re-running into a directory with checkpoints should ask for --resume, got %v", err)
	}
	resB, err := Run(b, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	ckA, ckB := loadBoth(t, resA.Checkpoint, resB.Checkpoint)
	if len(ckA.Tensors) != len(ckB.Tensors) || len(ckA.Tensors) < 4 {
		t.Fatalf("checkpoints hold %d and %d tensors; want the same, weights, biases and their momenta", len(ckA.Tensors), len(ckB.Tensors))
	}
	for name, ta := range ckA.Tensors {
		tb, ok := ckB.Tensors[name]
		if !ok {
			t.Fatalf("resumed checkpoint lacks %s", name)
		}
		va, vb := tensors.MustCopyFlatData[float32](ta), tensors.MustCopyFlatData[float32](tb)
		if !slices.Equal(va, vb) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}

	// Evaluating the checkpoint reproduces the run's final score.
	ev, err := Evaluate(a, resA.Checkpoint, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev != resA.Eval {
		t.Errorf("eval of the checkpoint = %+v, the run reported %+v", ev, resA.Eval)
	}
}

func TestResumeRefusesAnotherNetsCheckpoint(t *testing.T) {
	cfg := smallRun(t, "c")
	cfg.Steps = 2
	cfg.Schedule = config.ScheduleConfig{Name: "constant"} // smallRun's warmup is longer than two steps
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Net.Name = "mlp"
	_, err = Run(other, RunOptions{Out: io.Discard, ResumeFrom: res.Checkpoint})
	if err == nil || !strings.Contains(err.Error(), res.Checkpoint) || !strings.Contains(err.Error(), "linear") {
		t.Fatalf("resuming an mlp from a linear checkpoint: %v", err)
	}
}

// TestBestCheckpointKeepsTheBestEval: the eval score lands in checkpoints/best.tckpt with its metric,
// and --resume keeps picking the newest periodic checkpoint, never the best one.
func TestBestCheckpointKeepsTheBestEval(t *testing.T) {
	cfg := smallRun(t, "best")
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ckptDir := filepath.Join(res.Dir, "checkpoints")
	best, err := checkpoint.Load(filepath.Join(ckptDir, checkpoint.BestName))
	if err != nil {
		t.Fatal(err)
	}
	if best.Header.Metric != "top1" || best.Header.Score != res.Eval.Top1 || best.Header.Step != res.Step {
		t.Errorf("best checkpoint header %+v; want metric top1, score %g, step %d", best.Header, res.Eval.Top1, res.Step)
	}
	latest, ok, err := checkpoint.Latest(ckptDir)
	if err != nil || !ok || filepath.Base(latest.Path) == checkpoint.BestName {
		t.Errorf("latest checkpoint %v (%v, %v): want a ckpt-* file", latest, ok, err)
	}
	bad := cfg
	bad.Checkpoint.Best = "ema_top1"
	if err := recipe.Validate(bad); err == nil || !strings.Contains(err.Error(), "ema.decay") {
		t.Errorf("checkpoint.best=ema_top1 without EMA: %v", err)
	}
}

// TestEvaluateEMAShadowsOfACheckpoint: `trainer eval --ema` scores the checkpoint's EMA shadows and
// reproduces the run's own EMA eval, the live weights reproduce the live eval, and the best checkpoint
// is chosen on the EMA score.
func TestEvaluateEMAShadowsOfACheckpoint(t *testing.T) {
	cfg := smallRun(t, "ema")
	cfg.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	live, err := Evaluate(cfg, res.Checkpoint, false, "")
	if err != nil {
		t.Fatal(err)
	}
	ema, err := Evaluate(cfg, res.Checkpoint, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if live != res.Eval || ema != res.EMAEval || ema == live {
		t.Errorf("eval of the checkpoint: live %+v (run %+v), EMA %+v (run %+v); want each equal to the run's and different from each other",
			live, res.Eval, ema, res.EMAEval)
	}
	// The per-image files of both evals hold every image, their right answers are the scores' hits,
	// and pairing them counts each eval's hits again.
	livePath, emaPath := filepath.Join(t.TempDir(), "live.perimage"), filepath.Join(t.TempDir(), "ema.perimage")
	if again, err := Evaluate(cfg, res.Checkpoint, false, livePath); err != nil || again != live {
		t.Fatalf("eval with --per-image: %+v, %v; want %+v", again, err, live)
	}
	if again, err := Evaluate(cfg, res.Checkpoint, true, emaPath); err != nil || again != ema {
		t.Fatalf("EMA eval with --per-image: %+v, %v; want %+v", again, err, ema)
	}
	paired, err := stats.ComparePerImage(livePath, emaPath)
	if err != nil {
		t.Fatal(err)
	}
	if paired.Images != live.Examples || paired.RightA() != live.Correct || paired.RightB() != ema.Correct ||
		float64(live.Correct)/float64(live.Examples) != live.Top1 {
		t.Errorf("paired %+v; live %d/%d right (top-1 %v), EMA %d right", paired, live.Correct, live.Examples, live.Top1, ema.Correct)
	}
	if lo, hi := stats.Wilson(live.Correct, live.Examples, stats.Z95); live.Top1Lo != lo || live.Top1Hi != hi || !(lo < live.Top1 && live.Top1 < hi) {
		t.Errorf("live top-1 %v with interval [%v, %v], want [%v, %v] around it", live.Top1, live.Top1Lo, live.Top1Hi, lo, hi)
	}
	best, err := checkpoint.Load(filepath.Join(res.Dir, "checkpoints", checkpoint.BestName))
	if err != nil || best.Header.Metric != "ema_top1" || best.Header.Score != res.EMAEval.Top1 {
		t.Errorf("best checkpoint %+v, %v: want metric ema_top1 scored %g", best, err, res.EMAEval.Top1)
	}
	noEMA := smallRun(t, "plain")
	plain, err := Run(noEMA, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Evaluate(noEMA, plain.Checkpoint, true, ""); err == nil || !strings.Contains(err.Error(), "no EMA shadows") {
		t.Errorf("--ema on a checkpoint without shadows: %v", err)
	}
}

// TestStopCheckpointsAndResumes: a stop request ends the run after the step in flight with a checkpoint
// of that step, and --resume from it finishes bit-identical to an uninterrupted run.
func TestStopCheckpointsAndResumes(t *testing.T) {
	whole := smallRun(t, "whole")
	resWhole, err := Run(whole, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	cut := smallRun(t, "cut")
	stop := make(chan struct{})
	close(stop)
	var out strings.Builder
	res, err := Run(cut, RunOptions{Out: &out, Stop: stop})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Step != 1 || !strings.Contains(out.String(), "--resume") {
		t.Fatalf("stopped run: interrupted %v at step %d, output %q; want step 1 and how to resume", res.Interrupted, res.Step, out.String())
	}
	ckpt, err := checkpoint.Load(res.Checkpoint)
	if err != nil || ckpt.Header.Step != 1 {
		t.Fatalf("stop checkpoint %v: %v", res.Checkpoint, err)
	}
	resumed, err := Run(cut, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	a, errA := checkpoint.Load(resWhole.Checkpoint)
	b, errB := checkpoint.Load(resumed.Checkpoint)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for name, ta := range a.Tensors {
		if tb, ok := b.Tensors[name]; !ok || !equalBytes(ta, tb) {
			t.Errorf("%s differs after stop and resume", name)
		}
	}
}
