package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestNetsJSON(t *testing.T) {
	out, _, err := runCLI(t, "nets", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var nets []struct {
		Name         string `json:"name"`
		Parameters   int    `json:"parameters"`
		InputShape   [3]int `json:"input_shape"`
		ForwardFLOPs int64  `json:"forward_flops"`
	}
	if err := json.Unmarshal([]byte(out), &nets); err != nil {
		t.Fatalf("nets --json is not JSON: %v\n%s", err, out)
	}
	byName := map[string]int{}
	for _, n := range nets {
		byName[n.Name] = n.Parameters
		if n.ForwardFLOPs <= 0 || n.Parameters <= 0 {
			t.Errorf("%s: flops %d parameters %d", n.Name, n.ForwardFLOPs, n.Parameters)
		}
	}
	// The small nets' counts are PyTorch's for the same layers; the ImageNet nets' are the reference
	// implementations' at 1000 classes (torchvision, timm).
	want := map[string]int{
		"linear": 7850, "mnist_cnn": 1199882, "mlp": 784*512 + 512 + 512*256 + 256 + 256*10 + 10,
		"resnet34": 21797672, "resnet50": 25557032, "mobilenet_v2": 3504872, "efficientnet_b0": 5288548,
		"convnext_tiny": 28589128, "vit_tiny": 5717416,
	}
	for name, params := range want {
		if byName[name] != params {
			t.Errorf("%s: %d parameters, want %d", name, byName[name], params)
		}
	}
}

func TestRunEvalAndResumeThroughTheCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tiny.yaml")
	body := "net:\n  name: linear\nsteps: 4\ndata:\n  batch_size: 32\n  eval_batch_size: 2500\ncheckpoint:\n  every_steps: 2\nlog:\n  every_steps: 2\nrun_dir: " + filepath.Join(dir, "runs") + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "run", cfg, "--set", "optimizer.lr=0.02", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "final eval") || !strings.Contains(out, "img/s") {
		t.Errorf("run output lacks the progress or the eval:\n%s", out)
	}
	resolved, err := os.ReadFile(filepath.Join(dir, "runs", "tiny", "config.yaml"))
	if err != nil || !strings.Contains(string(resolved), "lr: 0.02") {
		t.Errorf("resolved config should record the override: %v\n%s", err, resolved)
	}
	ckpt := filepath.Join(dir, "runs", "tiny", "checkpoints", "ckpt-000000004.tckpt")
	out, _, err = runCLI(t, "eval", cfg, "--checkpoint", ckpt)
	if err != nil || !strings.Contains(out, "top-1") || !strings.Contains(out, "10000 images") {
		t.Errorf("eval: %v\n%s", err, out)
	}
	// Resuming a finished run with more steps continues from step 4 (the same lr: changing it on resume
	// is refused, trainer/resume.go).
	out, _, err = runCLI(t, "run", cfg, "--resume", "--set", "optimizer.lr=0.02", "--set", "steps=6", "--no-progress")
	if err != nil || !strings.Contains(out, "step 4") || !strings.Contains(out, "6/6") {
		t.Errorf("resume: %v\n%s", err, out)
	}
}

func TestBadInputsAreRefused(t *testing.T) {
	cases := [][]string{
		{"run"},
		{"run", "/nonexistent/x.yaml"},
		{"run", "../../configs/mnist_linear.yaml", "--set", "optimizer.lr=-1"},
		{"run", "../../configs/mnist_linear.yaml", "--set", "bogus.key=1"},
		{"eval", "../../configs/mnist_linear.yaml"},
		{"devices", "--backend", "bogus"},
		{"frobnicate"},
	}
	for _, args := range cases {
		if _, _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	_, _, err := runCLI(t, "run", "../../configs/mnist_linear.yaml", "--set", "optimizer.lr=-1")
	if err == nil || !strings.Contains(err.Error(), "optimizer.lr") || !strings.Contains(err.Error(), "mnist_linear.yaml") {
		t.Errorf("out-of-range lr: %v", err)
	}
}

func TestDevicesDescribesTheGoBackend(t *testing.T) {
	out, _, err := runCLI(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "devices:        1") || !strings.Contains(out, "go") {
		t.Errorf("devices output:\n%s", out)
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", t.TempDir())
	out, _, err = runCLI(t, "devices", "--backend", "xla:cpu")
	if err == nil || !strings.Contains(out, os.Getenv("PJRT_PLUGIN_LIBRARY_PATH")) {
		t.Errorf("xla:cpu without a plugin should fail naming the searched directory: %v\n%s", err, out)
	}
}

// TestResumeCommandIsTheRunsOwn: the resume hint repeats the run's config path and flags, quoted for a
// shell where needed.
func TestResumeCommandIsTheRunsOwn(t *testing.T) {
	got := resumeCommand("recipes/my run.yaml", []string{"epochs=1", "name=it's"}, "xla:cpu", true)
	want := `trainer run 'recipes/my run.yaml' --smoke --backend xla:cpu --set epochs=1 --set 'name=it'\''s' --resume`
	if got != want {
		t.Errorf("resumeCommand = %s\nwant %s", got, want)
	}
}

// TestPrecisionNote: bfloat16 on the pure-Go backend (one device or several) gets the line that says it
// is slower there; float32, and bfloat16 on an XLA backend, get none.
func TestPrecisionNote(t *testing.T) {
	for _, c := range []struct {
		precision, backend string
		note               bool
	}{
		{"bfloat16", "go", true},
		{"bfloat16", "go:devices=2", true},
		{"float32", "go", false},
		{"bfloat16", "xla:cuda", false},
		{"bfloat16", "xla:cpu", false},
	} {
		var cfg config.Config
		cfg.Net.Precision, cfg.Backend = c.precision, c.backend
		got := precisionNote(cfg)
		if (got != "") != c.note || (c.note && !strings.Contains(got, "use float32")) {
			t.Errorf("%s on %s: note %q, want a note: %v", c.precision, c.backend, got, c.note)
		}
	}
}
