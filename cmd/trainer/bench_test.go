package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// TestBenchCommand runs a tiny bench and checks the report's arithmetic. TRAINER_BENCH_ARGS replaces
// the arguments, to time a real configuration before cmdBench is wired into main
// (TRAINER_BENCH_ARGS="--net mnist_cnn --batch 128 --steps 5" go test ./cmd/trainer -run TestBenchCommand -v).
func TestBenchCommand(t *testing.T) {
	args := []string{"--net", "mlp", "--batch", "4", "--steps", "3", "--json"}
	custom := os.Getenv("TRAINER_BENCH_ARGS")
	if custom != "" {
		args = strings.Fields(custom)
	}
	var out, errOut bytes.Buffer
	if err := cmdBench(args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if custom != "" {
		t.Log(out.String())
		return
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// mlp: 784·512 + 512·256 + 256·10 MACs per example; a step is 3 forwards of 2 FLOPs per MAC.
	wantGFLOPs := 3 * 2 * float64(784*512+512*256+256*10) * 4 / 1e9
	if rep.Net != "mlp" || rep.Batch != 4 || rep.Size != 28 || len(rep.StepsMS) != 3 || rep.MedianMS <= 0 {
		t.Fatalf("report %+v", rep)
	}
	if d := rep.GFLOPs/wantGFLOPs - 1; d > 1e-9 || d < -1e-9 {
		t.Fatalf("GFLOP/step %g, want %g", rep.GFLOPs, wantGFLOPs)
	}
	if d := rep.ImagesPS*rep.MedianMS/1000/4 - 1; d > 1e-9 || d < -1e-9 {
		t.Fatalf("images/s %g inconsistent with %g ms for batch 4", rep.ImagesPS, rep.MedianMS)
	}
	// The step's rate beside the backend's GEMM peak.
	if rep.PeakGFLOPPerS <= 0 || rep.PeakN != benchPeakN || rep.PeakKernel == "" {
		t.Fatalf("no peak in the pure-Go backend's report: %+v", rep)
	}
	if d := rep.PercentOfPeak/(100*rep.GFLOPPerS/rep.PeakGFLOPPerS) - 1; d > 1e-9 || d < -1e-9 {
		t.Fatalf("%% of peak %g inconsistent with %g of %g GFLOP/s", rep.PercentOfPeak, rep.GFLOPPerS, rep.PeakGFLOPPerS)
	}
	out.Reset()
	if err := cmdBench([]string{"--peak", "--json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var peak peakReport
	if err := json.Unmarshal(out.Bytes(), &peak); err != nil || peak.GFLOPPerS <= 0 || peak.N != benchPeakN || peak.Threads < 1 {
		t.Fatalf("bench --peak --json: %v %s", err, out.String())
	}
	if err := cmdBench([]string{"--net", "no_such_net"}, &out, &errOut); err == nil {
		t.Fatal("unknown net accepted")
	}
}

// The bytes a bench step moves: nothing but the lr and the loss with the batch resident; the batch
// every step with --data host, as float32 or, with --input uint8, a quarter of that.
func TestBenchBytesPerStep(t *testing.T) {
	const batch, pixels = 4, 28 * 28
	for _, c := range []struct {
		args   []string
		wantIn int64
	}{
		{nil, 4},
		{[]string{"--data", "host"}, batch*pixels*4 + batch*4 + 4},
		{[]string{"--data", "host", "--input", "uint8"}, batch*pixels + batch*4 + 4},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"--net", "mlp", "--batch", "4", "--steps", "2", "--json"}, c.args...)
		if err := cmdBench(args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errOut.String())
		}
		var rep benchReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.ToDeviceBytes != c.wantIn || rep.ToHostBytes != 4 {
			t.Errorf("%v: %d bytes in, %d out per step; want %d and 4", c.args, rep.ToDeviceBytes, rep.ToHostBytes, c.wantIn)
		}
		if rep.VariableBytes < 100*c.wantIn { // residency: the state is far larger than what moves
			t.Errorf("%v: variables %d bytes", c.args, rep.VariableBytes)
		}
	}
	var out, errOut bytes.Buffer
	if err := cmdBench([]string{"--net", "mlp", "--input", "int8"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--input") {
		t.Errorf("--input int8: %v", err)
	}
}

// bench CONFIG times the recipe's own step: AdamW's bias corrections and the EMA's decay and fresh
// flag cross every step beside the lr (5 scalars, where the peer step of --net sends the lr alone),
// with the recipe's batch unless --batch is given; --set overrides any key, and a CONFIG with --net is
// refused.
func TestBenchRecipe(t *testing.T) {
	const recipe = "../../configs/mnist_cnn_adamw_ema.yaml"
	var out, errOut bytes.Buffer
	args := []string{recipe, "--set", "net.name=mlp", "--batch", "4", "--steps", "2", "--json"}
	if err := cmdBench(args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Config != recipe || rep.Net != "mlp" || rep.Batch != 4 || len(rep.StepsMS) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if rep.ToDeviceBytes != 5*4 || rep.ToHostBytes != 4 {
		t.Errorf("%d bytes in, %d out per step; want 20 (lr, two bias corrections, EMA decay and flag) and 4", rep.ToDeviceBytes, rep.ToHostBytes)
	}
	// mlp's parameters, AdamW's two moments and the EMA shadows: four copies of the weights at least.
	if params := int64(784*512+512+512*256+256+256*10+10) * 4; rep.VariableBytes < 4*params {
		t.Errorf("variables %d bytes, want at least %d (weights, two moments, shadows)", rep.VariableBytes, 4*params)
	}
	if err := cmdBench([]string{recipe, "--net", "mlp"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("CONFIG with --net: %v", err)
	}
}

// TestBenchSizesBounded: bench and data bench refuse a batch, size or step count beyond a run's bounds
// with one error naming the flags, before allocating (--batch 100000000 and --size 100000 ended in Go's
// "fatal error: out of memory").
func TestBenchSizesBounded(t *testing.T) {
	for _, args := range [][]string{{"--net", "mlp", "--batch", "100000000"}, {"--net", "mlp", "--size", "100000"},
		{"--net", "mlp", "--steps", "100000000000"}, {"--net", "mlp", "--width", "NaN"}} {
		err := cmdBench(args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "bench: --batch") || !strings.Contains(err.Error(), "at most") {
			t.Errorf("bench %v: %v, want an error naming the bounds", args, err)
		}
	}
	// Each flag within its bound, the batch's pixel values at the net's input (224 px by default) not.
	for _, args := range [][]string{{"--net", "resnet50", "--batch", "65536"}, {"--net", "mlp", "--batch", "4096", "--size", "1024"}} {
		err := cmdBench(args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "bench: --batch") || !strings.Contains(err.Error(), "pixel values a batch, expected at most 2147483648") {
			t.Errorf("bench %v: %v, want an error naming the batch's pixel values and their bound", args, err)
		}
	}
	dir := t.TempDir() // no data needed: the flags are refused first
	if err := cmdData([]string{"bench", dir, "--batch", "65536", "--size", "1024"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "data bench: --batch 65536 at --size 1024: 206158430208 pixel values") {
		t.Errorf("data bench --batch 65536 --size 1024: %v, want an error naming the batch's pixel values", err)
	}
	for _, args := range [][]string{{"--size", "100000"}, {"--batch", "100000000"}, {"--workers", "100000"}} {
		err := cmdData(append([]string{"bench", dir}, args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "data bench: --size") || !strings.Contains(err.Error(), "at most") {
			t.Errorf("data bench %v: %v, want an error naming the bounds", args, err)
		}
	}
}

// --cpuprofile writes its profile through a temporary file renamed into place at the end, and refuses
// a path that is not a regular file (a device, a directory) before any work, leaving nothing behind.
func TestBenchCPUProfileFile(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{"/dev/null", dir} {
		err := cmdBench([]string{"--net", "mlp", "--batch", "4", "--steps", "1", "--cpuprofile", path}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--cpuprofile") || !strings.Contains(err.Error(), path) {
			t.Errorf("--cpuprofile %s: %v, want an error naming the flag and the path", path, err)
		}
	}
	if err := run([]string{"run", "--cpuprofile", dir, "no-such-recipe.yaml"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("run --cpuprofile DIR: %v, want the profile's path refused first", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused profiles left %d files in %s", len(entries), dir)
	}
	path := dir + "/cpu.pprof"
	if err := cmdBench([]string{"--net", "mlp", "--batch", "4", "--steps", "2", "--cpuprofile", path}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	// A pprof profile is gzip-compressed protobuf.
	if b, err := os.ReadFile(path); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile %s: %v, %d bytes, want a gzip stream", path, err, len(b))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in %s after one profile, want the profile alone", len(entries), dir)
	}
}
