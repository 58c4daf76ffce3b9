package trainer

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// noTimedDrains makes the loop drain only where its rules say (log intervals, checkpoints, epoch
// ends), not also every drainEvery of wall time, for the test's duration.
func noTimedDrains(t *testing.T) {
	old := drainEvery
	drainEvery = time.Hour
	t.Cleanup(func() { drainEvery = old })
}

// TestAsyncLoopIsBitIdenticalToSync: the loop that runs ahead (prefetching, reading the step's
// results only at log intervals, checkpoints and epoch ends, the guard's decisions taken on the
// device) and the loop that reads every micro-batch at once give the same run bit for bit: every
// checkpoint's tensors and header, every record of metrics.jsonl but the measured speed, the evals.
// The recipe has what the device-side decisions must reproduce: accumulation over 2 micro-batches, a
// non-finite second micro-batch at step 4 under reduce_lr (its group withheld, the lr halved from the
// next step on), EMA with a fresh start, BatchNorm, and an eval after every epoch.
func TestAsyncLoopIsBitIdenticalToSync(t *testing.T) {
	noTimedDrains(t)
	root := t.TempDir()
	imagenetteTree(t, root, 3, 8, 2) // 24 train images: 6 micro-batches of 4, 3 optimizer steps an epoch
	runs := map[bool]Result{}
	for _, sync := range []bool{true, false} {
		cfg := deviceNormConfig(t, map[bool]string{true: "sync", false: "async"}[sync], t.TempDir(), root, "false")
		cfg.Optimizer.AccumulateSteps = 2
		cfg.Steps = 8
		cfg.Guard.NonFinite = config.GuardReduceLR
		cfg.Checkpoint = config.CheckpointConfig{EverySteps: 2, Keep: 10}
		cfg.Log.EverySteps = 3
		if err := recipe.Validate(cfg); err != nil {
			t.Fatal(err)
		}
		res, err := runPoisoned(t, cfg, RunOptions{Out: io.Discard, SyncEveryStep: sync}, 4, 1)
		if err != nil {
			t.Fatalf("sync %v: %v", sync, err)
		}
		runs[sync] = res
	}
	syncRun, asyncRun := runs[true], runs[false]
	if syncRun.Step != 8 || asyncRun.Step != 8 || syncRun.Eval != asyncRun.Eval || syncRun.EMAEval != asyncRun.EMAEval {
		t.Errorf("sync: step %d, eval %+v, EMA %+v; async: step %d, eval %+v, EMA %+v", syncRun.Step, syncRun.Eval,
			syncRun.EMAEval, asyncRun.Step, asyncRun.Eval, asyncRun.EMAEval)
	}
	names := func(dir string) []string {
		paths, err := checkpoint.List(filepath.Join(dir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	files := names(syncRun.Dir)
	if len(files) != 4 || !slices.Equal(files, names(asyncRun.Dir)) {
		t.Fatalf("checkpoints: sync %v, async %v", files, names(asyncRun.Dir))
	}
	for _, f := range append(files, checkpoint.BestName) {
		a, err := checkpoint.Load(filepath.Join(syncRun.Dir, "checkpoints", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := checkpoint.Load(filepath.Join(asyncRun.Dir, "checkpoints", f))
		if err != nil {
			t.Fatal(err)
		}
		if d := differingTensors(a, b); len(d) > 0 || len(a.Tensors) != len(b.Tensors) {
			t.Errorf("%s: tensors %v differ", f, d)
		}
		if a.Header.Step != b.Header.Step || a.Header.LRScale != b.Header.LRScale || a.Header.Score != b.Header.Score {
			t.Errorf("%s: headers %+v and %+v", f, a.Header, b.Header)
		}
	}
	if c := loadCkpt(t, syncRun.Dir, 4); c.Header.LRScale != 0.5 {
		t.Errorf("step 4's checkpoint has lr_scale %g: the poisoned step did not halve the lr", c.Header.LRScale)
	}
	records := func(dir string) []map[string]any {
		rs := metricsRecords(t, dir)
		for _, r := range rs {
			delete(r, "images_per_sec") // measured, not computed
			delete(r, "time")
		}
		return rs
	}
	syncRecs, asyncRecs := records(syncRun.Dir), records(asyncRun.Dir)
	if !reflect.DeepEqual(syncRecs, asyncRecs) {
		t.Errorf("metrics.jsonl differs:\nsync  %v\nasync %v", syncRecs, asyncRecs)
	}
	if skips := recordsOfType(syncRecs, "nonfinite"); len(skips) != 1 || skips[0]["step"] != 4.0 || skips[0]["lr_scale"] != 0.5 {
		t.Errorf("nonfinite records %v; want one at step 4 halving the lr", skips)
	}
}

// TestAsyncLoopReportsTheNonFiniteStep: the loop runs ahead of a NaN at step 7 — it has taken the
// batches of steps 8–10 before it reads step 7's results at the checkpoint of step 10 — and still
// stops naming step 7, writes no checkpoint after it, and leaves the last good one named.
func TestAsyncLoopReportsTheNonFiniteStep(t *testing.T) {
	noTimedDrains(t)
	cfg := smallRun(t, "ahead")
	cfg.Checkpoint.EverySteps = 5
	cfg.Log.EverySteps = 5
	var furthest int
	watch := func(f feed) feed {
		poison := poisoned(t, 1, 7, 0)(f)
		return watchedFeed{feed: poison, k: 1, see: func(step, _ int, _ shards) { furthest = max(furthest, step) }}
	}
	_, err := runWith(t, cfg, RunOptions{Out: io.Discard}, watch)
	if err == nil || !strings.Contains(err.Error(), "step 7:") || !strings.Contains(err.Error(), checkpoint.FileName(5)) {
		t.Fatalf("a NaN at step 7: %v; want a stop at step 7 naming step 5's checkpoint", err)
	}
	if furthest < 10 {
		t.Errorf("the loop took batches up to step %d before reading step 7: it waited on the device", furthest)
	}
	paths, _ := checkpoint.List(filepath.Join(cfg.Dir(), "checkpoints"))
	if len(paths) != 1 || filepath.Base(paths[0]) != checkpoint.FileName(5) {
		t.Errorf("checkpoints %v; want step 5's alone", paths)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir(), "checkpoints", checkpoint.FileName(10))); err == nil {
		t.Error("step 10 was checkpointed after a NaN at step 7")
	}
}
