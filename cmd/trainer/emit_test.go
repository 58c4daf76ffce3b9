package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/pjrt"
)

func TestCmdEmit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "step.mlir")
	var stdout, stderr bytes.Buffer
	err := cmdEmit([]string{"mnist_cnn", "--batch", "16", "--optimizer", "adamw", "--precision", "bf16", "--replicas", "2", "--out", out}, &stdout, &stderr)
	if !pjrt.EmitAvailable {
		if err == nil || !strings.Contains(err.Error(), "cgo") {
			t.Fatalf("emit without cgo: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("emit: %v\n%s", err, stderr.String())
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stablehlo.num_partitions = 2", "tensor<16x28x28x1xui8>", "stablehlo.convolution",
		"stablehlo.dot_general", "stablehlo.reduce", "stablehlo.sqrt", "bf16"} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("emitted module lacks %q", want)
		}
	}
	// mnist_cnn: 8 tensors, 1,199,882 parameters, and AdamW's two slots each: 3 × 4 bytes per parameter stay
	// resident; the host sends 16 uint8 images of 28×28 (data.device_normalize is on for xla backends),
	// 16 labels and 3 runtime scalars (12,620 bytes).
	for _, want := range []string{"global batch 16 over 2 replica(s), bfloat16, adamw",
		"24 variables, 14 MiB (14,398,584 bytes), stay on the device", "sends 5 inputs (batch and runtime scalars), 12 KiB (12,620 bytes)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr.String())
		}
	}
	for _, bad := range [][]string{
		{"mnist_cnn", "--out", out, "--precision", "fp8"},
		{"mnist_cnn"},
		{"no_such_net", "--out", out},
		{"mnist_cnn", "--batch", "15", "--replicas", "2", "--out", out},
	} {
		if err := cmdEmit(bad, &stdout, &stderr); err == nil {
			t.Errorf("emit %v succeeded", bad)
		}
	}
}
