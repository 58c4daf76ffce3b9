package trainer

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
)

// rerunFrom runs cfg to the end, deletes its checkpoint of step last (so the newest left is an
// earlier, mid-run one) and resumes: the resumed run's result.
func rerunFrom(t *testing.T, cfg config.Config, last int) Result {
	t.Helper()
	return rerunWith(t, Run, cfg, last)
}

// rerunWith is rerunFrom with run in place of Run.
func rerunWith(t *testing.T, run func(config.Config, RunOptions) (Result, error), cfg config.Config, last int) Result {
	t.Helper()
	if _, err := run(cfg, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cfg.Dir(), "checkpoints", checkpoint.FileName(last))); err != nil {
		t.Fatal(err)
	}
	res, err := run(cfg, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// loadBoth loads two checkpoints, failing the test if either does not load.
func loadBoth(t *testing.T, a, b string) (*checkpoint.Checkpoint, *checkpoint.Checkpoint) {
	t.Helper()
	ckA, err := checkpoint.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	ckB, err := checkpoint.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return ckA, ckB
}

// sameCheckpoints fails unless the two checkpoints hold the same tensors, at least minTensors of
// them, with the same float32 values bit for bit.
func sameCheckpoints(t *testing.T, a, b string, minTensors int) {
	t.Helper()
	ckA, ckB := loadBoth(t, a, b)
	if len(ckA.Tensors) < minTensors || len(ckA.Tensors) != len(ckB.Tensors) {
		t.Fatalf("checkpoints hold %d and %d tensors", len(ckA.Tensors), len(ckB.Tensors))
	}
	for name, ta := range ckA.Tensors {
		tb, ok := ckB.Tensors[name]
		if !ok {
			t.Fatalf("%s lacks %s", b, name)
		}
		if ta.DType().String() == "Float32" && !slices.Equal(tensors.MustCopyFlatData[float32](ta), tensors.MustCopyFlatData[float32](tb)) {
			t.Errorf("%s differs", name)
		}
	}
}
