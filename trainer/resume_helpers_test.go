package trainer

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// rerunFrom runs cfg to the end, deletes its checkpoint of step last (so the newest left is an
// earlier, mid-run one) and resumes: the resumed run's result.
func rerunFrom(t *testing.T, cfg Config, last int) Result {
	t.Helper()
	if _, err := Run(cfg, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cfg.Dir(), "checkpoints", checkpointName(last))); err != nil {
		t.Fatal(err)
	}
	res, err := Run(cfg, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// loadBoth loads two checkpoints, failing the test if either does not load.
func loadBoth(t *testing.T, a, b string) (*Checkpoint, *Checkpoint) {
	t.Helper()
	ckA, err := LoadCheckpoint(a)
	if err != nil {
		t.Fatal(err)
	}
	ckB, err := LoadCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	return ckA, ckB
}
