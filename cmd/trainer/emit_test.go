package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/backend/pjrtplugin"
)

func TestCmdEmit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "step.mlir")
	var stdout, stderr bytes.Buffer
	err := cmdEmit([]string{"mnist_cnn", "--batch", "16", "--optimizer", "adamw", "--precision", "bf16", "--replicas", "2",
		"--set", "data_parallel.mode=auto", "--out", out}, &stdout, &stderr)
	if !pjrtplugin.EmitAvailable {
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
	// The default spmd mode: one replica's program on its 8 images, its all-reduces in the text (8
	// gradients, the loss, the correct count), the summary per device (its images and labels, the
	// three scalars, its replica index).
	stderr.Reset()
	if err := cmdEmit([]string{"mnist_cnn", "--batch", "16", "--optimizer", "adamw", "--replicas", "2", "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("emit spmd: %v\n%s", err, stderr.String())
	}
	if text, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stablehlo.num_replicas = 2", "%arg0: tensor<8x28x28x1xui8>", `"stablehlo.all_reduce"`,
		"replica_groups = dense<[[0, 1]]>"} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("emitted spmd module lacks %q", want)
		}
	}
	if want := "one replica's program (spmd, 10 all-reduces): per step the host sends each device 6 inputs (its shard of 8"; !strings.Contains(stderr.String(), want) {
		t.Errorf("spmd summary lacks %q:\n%s", want, stderr.String())
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
