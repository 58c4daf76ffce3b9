package trainer

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

// TestMNISTSpecRecipeLearns: the NetSpec example recipe (configs/mnist_spec.yaml, its net a list of
// layers in configs/nets/) trains on real MNIST: over 60 steps of 64 images the training loss falls by
// more than half and the final eval is far above chance; the run records the spec inline and its
// checkpoint names the net and the spec's layers.
func TestMNISTSpecRecipeLearns(t *testing.T) {
	cfg, err := recipe.Load("../configs/mnist_spec.yaml", []string{
		"run_dir=" + t.TempDir(), "steps=60", "data.batch_size=64", "log.every_steps=15",
		// The recipe's one-cycle warmup is epochs long; this short run uses a constant lr.
		"schedule.name=constant", "schedule.warmup_epochs=0", "schedule.warmup_start_lr=0", "optimizer.lr=0.05",
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 60 || res.Eval.Examples != 10000 {
		t.Fatalf("ran %d steps, evaluated %d images; want 60 and all 10000", res.Step, res.Eval.Examples)
	}
	if res.Eval.Top1 < 0.85 {
		t.Errorf("after 60 steps: test top-1 %.3f, want >= 0.85 (chance is 0.10)", res.Eval.Top1)
	}
	f, err := os.Open(filepath.Join(res.Dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var losses []float64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var rec struct {
			Type string  `json:"type"`
			Loss float64 `json:"loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err == nil && rec.Type == "train" {
			losses = append(losses, rec.Loss)
		}
	}
	if len(losses) != 4 || !(losses[3] < losses[0]/2) {
		t.Errorf("training losses (per 15 steps) %v: want 4 records, the last below half the first", losses)
	}
	t.Logf("losses per 15 steps %v, test top-1 %.4f", losses, res.Eval.Top1)
	stored, err := os.ReadFile(filepath.Join(res.Dir, "config.yaml"))
	if err != nil || !strings.Contains(string(stored), "- input:") || strings.Contains(string(stored), "spec_file") {
		t.Errorf("the run's config.yaml should hold the spec inline: %v\n%s", err, stored)
	}
	ckpt, err := checkpoint.Load(res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if ckpt.Header.Net != config.SpecNetLabel {
		t.Errorf("checkpoint header names net %q, want %q", ckpt.Header.Net, config.SpecNetLabel)
	}
	var names []string
	for name := range ckpt.Tensors {
		names = append(names, name)
	}
	if joined := strings.Join(names, " "); !strings.Contains(joined, "conv7/weight") || !strings.Contains(joined, "batchnorm8/running_var") {
		t.Errorf("checkpoint tensors %v: want the spec's layer names (conv7/weight, batchnorm8/running_var)", names)
	}
}
