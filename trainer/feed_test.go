package trainer

import (
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// feedTol bounds the relative difference between a run on R devices and the one-loader run on one:
// the same float32 step, its sums (the gradient all-reduce, BatchNorm's moments) taken in another
// order, over 5 steps (measured at most 1.1e-5; the test logs it). The learning rate is kept at 0.01:
// at 0.05 this small net on these flat synthetic images amplifies a rounding-level difference that
// flips one max-pool or ReLU decision into 1e-3 to 0.2 by step 5 (measured for R = 4), which says
// nothing about the data path; trainstep's float64 certificate shows the step equal to 1e-12.
const feedTol = 1e-4

// With replicas R the loop feeds R loaders in lockstep, each a share of the global batch, to the step
// on R devices of the pure-Go backend (backend go opens with one device per replica): the real
// multi-device path, the per-device program all-reducing gradients, losses, counts and (sync BN) the
// BatchNorm moments. Through BatchNorm, augmentation, EMA and a mid-epoch resume, the run must be the
// one-loader run on one device to float32 rounding: losses, evals (every eval image counted once) and
// every checkpoint tensor. The
// resumed R-device run must be the uninterrupted one bit for bit (the state is the same, and so is
// the order of every sum).
func TestReplicaFeedIsTheGlobalBatch(t *testing.T) {
	root := t.TempDir()
	imagenetteTree(t, root, 3, 8, 2) // 24 train images: 3 global batches of 8 per epoch
	runConfig := func(name string, replicas int) config.Config {
		dn := config.Switch("false")
		if replicas == 4 {
			dn = "true" // uint8 shards, normalised on each device: the same floats (TestDeviceNormalizeIsBitIdentical)
		}
		c := deviceNormConfig(t, name, t.TempDir(), root, dn)
		c.Data.BatchSize, c.Replicas = 8, replicas
		c.Steps = 5 // step 5 is mid-epoch 1
		c.Optimizer.LR = 0.01
		if err := recipe.Validate(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	one, err := Run(runConfig("one", 1), RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{2, 4} {
		var out strings.Builder
		cfg := runConfig("replicas", r)
		got, err := Run(cfg, RunOptions{Out: &out})
		if err != nil {
			t.Fatalf("%d replicas: %v", r, err)
		}
		for _, want := range []string{
			fmt.Sprintf("data parallel (spmd, sync BN): %d replicas of %d on go:devices=%d (one device per replica)\n", r, 8/r, r),
			fmt.Sprintf("  replica %d: cpu device %d of %d, in-process", r-1, r-1, r),
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%d replicas: the start does not name the devices (%q):\n%s", r, want, out.String())
			}
		}
		a, b := trainLosses(t, one.Dir), trainLosses(t, got.Dir)
		if len(a) != 5 || len(b) != 5 {
			t.Fatalf("%d replicas: %d and %d train records", r, len(a), len(b))
		}
		worst := relDiff(b, a)
		if worst > feedTol {
			t.Errorf("%d replicas: train losses %v, one loader %v", r, b, a)
		}
		if got.Eval.Examples != 6 || got.EMAEval.Examples != 6 { // 3 classes × 2: every eval image once
			t.Errorf("%d replicas: eval counted %d and %d images, want the split's 6", r, got.Eval.Examples, got.EMAEval.Examples)
		}
		if got.Eval.Top1 != one.Eval.Top1 || got.EMAEval.Top1 != one.EMAEval.Top1 ||
			relDiff([]float64{got.Eval.Loss, got.EMAEval.Loss}, []float64{one.Eval.Loss, one.EMAEval.Loss}) > feedTol {
			t.Errorf("%d replicas: eval %+v / EMA %+v, one loader %+v / %+v", r, got.Eval, got.EMAEval, one.Eval, one.EMAEval)
		}
		ckpt := closeCheckpoints(t, got.Checkpoint, one.Checkpoint, 20, feedTol)
		t.Logf("%d replicas vs one device: losses differ by %.2g, checkpoint tensors by %.2g (relative)", r, worst, ckpt)
		if r == 2 {
			resumed := rerunFrom(t, runConfig("resumed", r), 5) // resumes at step 4, mid-epoch 1
			sameCheckpoints(t, got.Checkpoint, resumed.Checkpoint, 20)
		}
	}
}

// relDiff is the largest |a−b|/max(|b|, 1e-3) over two equally long lists.
func relDiff(a, b []float64) float64 {
	worst := 0.0
	for i := range a {
		worst = max(worst, math.Abs(a[i]-b[i])/math.Max(math.Abs(b[i]), 1e-3))
	}
	return worst
}

// closeCheckpoints fails unless the two checkpoints hold the same tensors, at least minTensors, whose
// float32 values agree to tol relative to each tensor's largest magnitude; it returns the worst.
func closeCheckpoints(t *testing.T, a, b string, minTensors int, tol float64) float64 {
	t.Helper()
	ckA, ckB := loadBoth(t, a, b)
	if len(ckA.Tensors) < minTensors || len(ckA.Tensors) != len(ckB.Tensors) {
		t.Fatalf("checkpoints hold %d and %d tensors", len(ckA.Tensors), len(ckB.Tensors))
	}
	worst := 0.0
	for name, ta := range ckA.Tensors {
		tb, ok := ckB.Tensors[name]
		if !ok {
			t.Fatalf("%s lacks %s", b, name)
		}
		if ta.DType().String() != "Float32" {
			continue
		}
		va, vb := tensors.MustCopyFlatData[float32](ta), tensors.MustCopyFlatData[float32](tb)
		scale := 0.0
		for _, v := range vb {
			scale = max(scale, math.Abs(float64(v)))
		}
		diff := 0.0
		for i := range va {
			diff = max(diff, math.Abs(float64(va[i])-float64(vb[i]))/math.Max(scale, 1e-6))
		}
		if diff > tol {
			t.Errorf("%s differs by %.3g (relative to its largest value %.3g)", name, diff, scale)
		}
		worst = max(worst, diff)
	}
	return worst
}

// A training run keeps a P spare for its foreign calls only on the xla backends and for the JPEG
// sources: the decode workers plus the step.
func TestFeedForeignCallers(t *testing.T) {
	for _, c := range []struct {
		backend, source string
		workers, want   int
	}{
		{"xla:cuda", "imagefolder", 16, 17}, {"xla:cpu", "shards", 2, 3}, {"xla", "imagefolder", 1, 2},
		{"go", "imagefolder", 2, 0}, {"", "shards", 2, 0}, {"go:devices=2", "imagefolder", 2, 0},
		{"xla:cuda", "cifar10", 16, 0}, {"xla:cuda", "mnist", 16, 0}, {"nonsense", "imagefolder", 2, 0},
	} {
		if got := feedForeignCallers(c.backend, c.source, c.workers); got != c.want {
			t.Errorf("backend %q, source %q, %d workers: %d goroutines in foreign calls, want %d", c.backend, c.source, c.workers, got, c.want)
		}
	}
}
