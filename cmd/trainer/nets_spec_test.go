package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trainer/trainer/checkpoint"
)

// TestNetsSpec: `trainer nets --spec FILE` prints the shipped spec's layers with their shapes and
// counts; its totals are the registered mnist_fast's (the spec writes that net out), as `trainer nets`
// reports them from the built graph; --size reshapes it; a bad spec is one error naming the file,
// layer and field.
func TestNetsSpec(t *testing.T) {
	const spec = "../../configs/nets/mnist_spec.yaml"
	out, _, err := runCLI(t, "nets", "--spec", spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LAYER", "conv1", "[14, 14, 16]", "flatten10", "[3136]", "dense11", "31,370",
		"total: 54,778 parameters, 1,188,544 MACs (2.38 forward MFLOPs) per example\ninput 28x28x1, 10 classes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("nets --spec output lacks %q:\n%s", want, out)
		}
	}
	js, _, err := runCLI(t, "nets", "--spec", spec, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var table specTable
	if err := json.Unmarshal([]byte(js), &table); err != nil {
		t.Fatalf("nets --spec --json: %v\n%s", err, js)
	}
	reg, _, err := runCLI(t, "nets", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var nets []struct {
		Name         string `json:"name"`
		Parameters   int64  `json:"parameters"`
		ForwardFLOPs int64  `json:"forward_flops"`
	}
	if err := json.Unmarshal([]byte(reg), &nets); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range nets {
		if n.Name == "mnist_fast" {
			found = true
			if table.Parameters != n.Parameters || table.ForwardFLOPs != n.ForwardFLOPs {
				t.Errorf("spec: %d parameters, %d FLOPs; registered mnist_fast: %d, %d", table.Parameters, table.ForwardFLOPs, n.Parameters, n.ForwardFLOPs)
			}
		}
	}
	if !found || len(table.Layers) != 12 || table.Layers[11].Kind != "dense" || table.NumClasses != 10 {
		t.Errorf("mnist_fast listed %v; spec table %+v", found, table)
	}
	var sum int64
	for _, l := range table.Layers {
		sum += l.Parameters
	}
	if sum != table.Parameters {
		t.Errorf("layers' parameters add up to %d, the total says %d", sum, table.Parameters)
	}
	big, _, err := runCLI(t, "nets", "--spec", spec, "--size", "56", "--num-classes", "3")
	if err != nil || !strings.Contains(big, "[28, 28, 16]") || !strings.Contains(big, "input 56x56x1, 3 classes") {
		t.Errorf("--size 56 --num-classes 3: %v\n%s", err, big)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("- input: {size: 28, channels: 1, classes: 10}\n- residual:\n    layers:\n      - conv: {filters: 8, kernel: 3}\n- flatten\n- dense: {units: classes}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "nets", "--spec", bad)
	if err == nil || !strings.Contains(err.Error(), bad+": layer 1 (residual): projection: none, but the body maps [28, 28, 1] to [28, 28, 8]") {
		t.Errorf("a residual that changes the width: %v", err)
	}
	if _, _, err := runCLI(t, "nets", "--size", "32"); err == nil || !strings.Contains(err.Error(), "need --spec") {
		t.Errorf("--size without --spec: %v", err)
	}
}

// TestSpecNetExportImportRoundTrip: a spec net's checkpoint (a smoke run of configs/mnist_spec.yaml)
// exports as a state_dict under the layers' names and imports back to the same weights.
func TestSpecNetExportImportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	recipe := "../../configs/mnist_spec.yaml"
	if _, _, err := runCLI(t, "run", recipe, "--smoke", "--set", "run_dir="+dir, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "mnist_spec_smoke", "checkpoints", "ckpt-000000003.tckpt")
	st := filepath.Join(dir, "spec.safetensors")
	out, _, err := runCLI(t, "export", recipe, "--checkpoint", ckpt, "--out", st, "--num-classes", "2")
	if err != nil || !strings.Contains(out, "17 variables of netspec") {
		t.Fatalf("export: %v\n%s", err, out)
	}
	back := filepath.Join(dir, "back.tckpt")
	if _, _, err := runCLI(t, "import", recipe, st, "--out", back, "--num-classes", "2"); err != nil {
		t.Fatal(err)
	}
	a, errA := checkpoint.Load(ckpt)
	b, errB := checkpoint.Load(back)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for _, name := range []string{"conv1/weight", "batchnorm8/running_var", "dense11/bias"} {
		var found bool
		for key, ta := range a.Tensors {
			if !strings.HasSuffix(key, name) {
				continue
			}
			found = true
			tb, ok := b.Tensors[key]
			if !ok || fmt.Sprint(ta.Value()) != fmt.Sprint(tb.Value()) {
				t.Errorf("%s: exported and imported weights differ (present %v)", key, ok)
			}
		}
		if !found {
			t.Errorf("the checkpoint has no tensor named like %s", name)
		}
	}
}

// TestNetsTableFits80Columns: `trainer nets` fits 80 columns with thousands separators in the counts;
// --wide adds the descriptions.
func TestNetsTableFits80Columns(t *testing.T) {
	out, _, err := runCLI(t, "nets")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("a line of %d columns: %q", len([]rune(line)), line)
		}
	}
	if !regexp.MustCompile(`(?m)^resnet50 +25,557,032  224x224x3 +1,000 +8,178\.4$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^linear +7,850  28x28x1 +10 +0\.02$`).MatchString(out) {
		t.Errorf("nets rows:\n%s", out)
	}
	wide, _, err := runCLI(t, "nets", "--wide")
	if err != nil || !strings.Contains(wide, "DESCRIPTION") || !strings.Contains(wide, "torchvision resnet50: 7x7/2 stem") {
		t.Errorf("nets --wide: %v\n%s", err, wide)
	}
}
