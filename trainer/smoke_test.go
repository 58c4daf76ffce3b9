package trainer

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// configFiles lists the repository's recipes.
func configFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs found under ../configs: %v", err)
	}
	return files
}

// TestEveryConfigRunsInSmokeMode runs every recipe in configs/ through the smoke overrides on the pure-Go
// backend: 3 optimizer steps, a checkpoint at step 2, the final eval and checkpoint, then a resume from
// step 2 that repeats step 3. A config that stops loading, validating, building or training fails here.
func TestEveryConfigRunsInSmokeMode(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "smoke-data")
	if err := WriteSmokeData(dataDir); err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	for _, path := range configFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			cfg, _, err := recipe.LoadSmoke(path, []string{"run_dir=" + runDir}, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			// The smoke run's schedule fits it: 2 micro-batches per epoch of the generated data.
			perEpoch := float64(config.SmokeClasses*config.SmokeTrainPerClass/config.SmokeBatch) / float64(cfg.Optimizer.AccumulateSteps)
			if err := cfg.CheckScheduleLength(config.SmokeSteps, perEpoch); err != nil {
				t.Error(err)
			}
			res, err := Run(cfg, RunOptions{Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if res.Step != config.SmokeSteps {
				t.Errorf("ran %d optimizer steps, want %d", res.Step, config.SmokeSteps)
			}
			if want := config.SmokeClasses * config.SmokeEvalPerClass; res.Eval.Examples != want {
				t.Errorf("eval scored %d images, want every one of the %d", res.Eval.Examples, want)
			}
			if math.IsNaN(res.Eval.Loss) || res.Eval.Loss <= 0 {
				t.Errorf("eval loss %v, want a positive number", res.Eval.Loss)
			}
			mid := filepath.Join(cfg.Dir(), "checkpoints", checkpoint.FileName(config.SmokeCheckpointStep))
			if _, err := os.Stat(mid); err != nil {
				t.Fatalf("no checkpoint at step %d: %v", config.SmokeCheckpointStep, err)
			}
			var out bytes.Buffer
			resumed, err := Run(cfg, RunOptions{Out: &out, ResumeFrom: mid})
			if err != nil {
				t.Fatalf("resume from %s: %v", mid, err)
			}
			if !strings.Contains(out.String(), "(step 2)") || resumed.Step != config.SmokeSteps {
				t.Errorf("resume ran to step %d (want %d); output:\n%s", resumed.Step, config.SmokeSteps, out.String())
			}
			t.Logf("%s: loss %.3f, %v", name, res.Eval.Loss, time.Since(start).Round(time.Millisecond))
		})
	}
}
