package trainer

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
)

// TestResumeRefusesACheckpointWithAnExtraTensor: a checkpoint holding a tensor the run's step does
// not keep is refused on resume before anything trains or is written (before: accepted, then every
// checkpoint write refused after training); the run directory is left as it was.
func TestResumeRefusesACheckpointWithAnExtraTensor(t *testing.T) {
	cfg := constantRun(t, "extra", 10)
	cfg.Steps = 5
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := checkpoint.Load(res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	for name, value := range ckpt.Tensors {
		scope, base := context.SplitScope(name)
		ctx.InAbsPath(scope).VariableWithValue(base, value)
	}
	ctx.InAbsPath("/model/stowaway").VariableWithValue("w", []float32{1, 2})
	if err := checkpoint.SaveFile(res.Checkpoint, ctx, ckpt.Header); err != nil {
		t.Fatal(err)
	}
	before := runFiles(t, res.Dir)
	cfg.Steps = 10
	_, err = Run(cfg, RunOptions{Out: io.Discard, Resume: true})
	if err == nil || !strings.Contains(err.Error(), "/model/stowaway/w") || !strings.Contains(err.Error(), res.Checkpoint) ||
		!strings.Contains(err.Error(), "does not keep") {
		t.Errorf("resume from a checkpoint with an extra tensor: %v; want it refused naming the file and the tensor", err)
	}
	if after := runFiles(t, res.Dir); !maps.Equal(before, after) {
		t.Error("a refused resume changed the run directory")
	}
}

// TestStepsPastTheCheckpointRangeAreRefusedAtStart: a run of more optimizer steps than a checkpoint
// can record is refused before its run directory is made (before: it trained, then died at the first
// checkpoint past step 999,999,999).
func TestStepsPastTheCheckpointRangeAreRefusedAtStart(t *testing.T) {
	cfg := constantRun(t, "long", checkpoint.MaxStep+1)
	_, err := Run(cfg, RunOptions{Out: io.Discard})
	// The recipe's bound (config.MaxSteps, which a test holds equal to checkpoint.MaxStep) refuses it;
	// schedule.Length applies the same bound to a count that epochs make.
	if err == nil || !strings.Contains(err.Error(), "1000000000") || !strings.Contains(err.Error(), "999999999") {
		t.Errorf("steps %d: %v; want it refused naming the range", cfg.Steps, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir())); err == nil {
		t.Errorf("the refused run made %s", cfg.Dir())
	}
}
