package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	out, _, err = runCLI(t, "eval", cfg, "--checkpoint", ckpt, "--per-image", filepath.Join(dir, "4.perimage"))
	if err != nil || !strings.Contains(out, "top-1") || !strings.Contains(out, "10000 images") {
		t.Errorf("eval: %v\n%s", err, out)
	}
	// Each eval prints top-1 with its Wilson interval; compare pairs the two per-image files and prints
	// the same two scores, the four counts and McNemar's p.
	out2, _, err := runCLI(t, "eval", cfg, "--checkpoint", filepath.Join(dir, "runs", "tiny", "checkpoints", "ckpt-000000002.tckpt"),
		"--per-image", filepath.Join(dir, "2.perimage"))
	if err != nil {
		t.Fatal(err)
	}
	top1 := regexp.MustCompile(`top-1 (\d+\.\d\d% \[\d+\.\d\d, \d+\.\d\d\])`)
	cmp, _, err := runCLI(t, "compare", filepath.Join(dir, "4.perimage"), filepath.Join(dir, "2.perimage"))
	scores := top1.FindAllStringSubmatch(cmp, -1)
	if err != nil || len(scores) != 2 || top1.FindStringSubmatch(out) == nil || top1.FindStringSubmatch(out2) == nil ||
		scores[0][1] != top1.FindStringSubmatch(out)[1] || scores[1][1] != top1.FindStringSubmatch(out2)[1] {
		t.Fatalf("compare: %v\n%s\nevals:\n%s%s", err, cmp, out, out2)
	}
	counts := regexp.MustCompile(`10000 images: both right (\d+), only A (\d+), only B (\d+), both wrong (\d+)`).FindStringSubmatch(cmp)
	sum := 0
	for _, c := range counts[1:] {
		n, _ := strconv.Atoi(c)
		sum += n
	}
	if sum != 10000 || !strings.Contains(cmp, "McNemar exact p = ") {
		t.Errorf("compare's counts %v do not add up to 10000 images:\n%s", counts, cmp)
	}
	if _, _, err := runCLI(t, "compare", filepath.Join(dir, "4.perimage"), cfg); err == nil || !strings.Contains(err.Error(), "not a per-image result file") {
		t.Errorf("compare with a YAML file: %v", err)
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
