package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagshipRecipeThroughTheCLI: `trainer run configs/effnet_b0_rmsprop.yaml` without ImageNet stops
// naming the path and how to pack it; with --smoke it trains, evaluates, checkpoints, and resumes.
func TestFlagshipRecipeThroughTheCLI(t *testing.T) {
	recipe := filepath.Join("..", "..", "configs", "effnet_b0_rmsprop.yaml")
	runs := t.TempDir()
	missing := filepath.Join(runs, "no-imagenet")
	_, _, err := runCLI(t, "run", recipe, "--set", "run_dir="+runs, "--set", "data.dir="+missing, "--no-progress")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(missing, "train")) || !strings.Contains(err.Error(), "trainer data pack") {
		t.Fatalf("without the dataset: got %v, want the missing path and how to pack one", err)
	}

	out, _, err := runCLI(t, "run", recipe, "--smoke", "--set", "run_dir="+runs, "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"smoke mode: --set name=effnet_b0_rmsprop_smoke", "--set net.width=0.0625",
		"training effnet_b0_rmsprop_smoke (efficientnet_b0) on imagefolder\n  3 steps", "EMA top-1", "done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("smoke run output lacks %q:\n%s", want, out)
		}
	}
	ckpts, _ := filepath.Glob(filepath.Join(runs, "effnet_b0_rmsprop_smoke", "checkpoints", "ckpt-*.tckpt"))
	if len(ckpts) != 2 {
		t.Errorf("smoke run left %d checkpoints, want 2 (step 2 and the final step 3): %v", len(ckpts), ckpts)
	}
	if _, err := os.Stat(filepath.Join(runs, "smoke-data", "val", "class1")); err != nil {
		t.Errorf("smoke data not generated under run_dir: %v", err)
	}

	// --set after --smoke wins over the smoke set; --resume continues the smoke run.
	out, _, err = runCLI(t, "run", recipe, "--smoke", "--set", "run_dir="+runs, "--set", "steps=4", "--resume", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(step 3)") || !strings.Contains(out, "4 steps") {
		t.Errorf("resumed smoke run should continue from step 3 to 4:\n%s", out)
	}
}
