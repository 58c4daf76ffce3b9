package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
	"github.com/trainer/trainer/trainstep"
)

// benchReport is `trainer bench --json`'s output.
type benchReport struct {
	Net       string    `json:"net"`
	Backend   string    `json:"backend"`
	Batch     int       `json:"batch"`
	Size      int       `json:"size"`
	Threads   int       `json:"threads"`
	Precision string    `json:"precision"`
	Data      string    `json:"data"`  // "device": one batch sent once and reused; "host": sent every step.
	Input     string    `json:"input"` // "float32" images, or "uint8" pixels normalised in the graph.
	CompileS  float64   `json:"compile_s"`
	StepsMS   []float64 `json:"steps_ms"`
	MedianMS  float64   `json:"median_ms"`
	ImagesPS  float64   `json:"images_per_s"`
	GFLOPs    float64   `json:"gflop_per_step"` // 3 × the forward's 2·MACs (forward, input and weight gradients).
	GFLOPPerS float64   `json:"gflop_per_s"`
	// Bytes copied host→device and device→host per timed step (median), and the size of the trained
	// variables: residency holds when the per-step bytes are far below the variables' (pjrt.TransferCounter).
	ToDeviceBytes int64 `json:"to_device_bytes_per_step"`
	ToHostBytes   int64 `json:"to_host_bytes_per_step"`
	VariableBytes int64 `json:"variable_bytes"`
}

// cmdBench times one train step (forward, softmax cross-entropy, backward, SGD momentum 0.9) of a
// registered net on random data: `trainer bench --net NAME --batch N --size S [--steps K]
// [--precision bf16] [--data device|host] [--input uint8]`. A timed step ends when its loss is on the host. The
// PyTorch peer is scripts/cpu-peer.sh, the JAX one scripts/jax_peer.py; docs/benchmarks.md has them.
func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netName := fs.String("net", "mnist_cnn", "registered net (trainer nets)")
	batch := fs.Int("batch", 128, "batch size")
	size := fs.Int("size", 0, "square input resolution (0: the net's default)")
	steps := fs.Int("steps", 5, "timed steps (after one untimed step that compiles)")
	width := fs.Float64("width", 1, "width multiplier of the net")
	backendName := fs.String("backend", "go", "backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of the timed steps to this file")
	precision := fs.String("precision", "float32", "compute precision: float32, or bf16 (bfloat16 compute, float32 master weights)")
	dataPlace := fs.String("data", "device", "device: one synthetic batch sent once and reused (no input transfer); host: sent every step")
	input := fs.String("input", "float32", "float32: normalised images; uint8: pixels the graph normalises first (data.device_normalize)")
	asJSON := fs.Bool("json", false, "print JSON")
	positional, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 0 {
		return fmt.Errorf("bench: unexpected arguments %q", positional)
	}
	if *batch < 1 || *steps < 1 || *size < 0 || *width <= 0 {
		return errors.New("bench: --batch and --steps must be >= 1, --size >= 0, --width > 0")
	}
	switch *precision {
	case "float32", "f32":
		*precision = "float32"
	case "bf16", "bfloat16":
		*precision = "bfloat16"
	default:
		return fmt.Errorf("bench: --precision %q: expected float32 or bf16", *precision)
	}
	if *dataPlace != "device" && *dataPlace != "host" {
		return fmt.Errorf("bench: --data %q: expected device or host", *dataPlace)
	}
	if *input != "float32" && *input != "uint8" {
		return fmt.Errorf("bench: --input %q: expected float32 or uint8", *input)
	}
	spec, err := graphs.Get(*netName)
	if err != nil {
		return err
	}
	h, w, c := spec.InputShape[0], spec.InputShape[1], spec.InputShape[2]
	if *size > 0 {
		h, w = *size, *size
	}
	opened, err := pjrt.Open(*backendName)
	if err != nil {
		return err
	}
	defer opened.Finalize()
	backend := pjrt.CountTransfers(opened)

	var table []float32 // ImageNet's normalisation, for --input uint8
	if *input == "uint8" {
		mean, std := make([]float32, c), make([]float32, c)
		for i := range c {
			mean[i], std[i] = float32(data.ImageNetMean[i%3]), float32(data.ImageNetStd[i%3])
		}
		if table, err = data.NormalizeTable(mean, std, c); err != nil {
			return err
		}
	}
	stats := &graphs.Stats{}
	opts := graphs.Options{ImageSize: h, Width: *width, Seed: 1, Stats: stats, Precision: *precision}
	classes := spec.NumClasses
	ctx := context.New()
	opt := trainstep.SGD{Momentum: 0.9}
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, images, labels, lr *Node) *Node {
		g := images.Graph()
		ctx.SetTraining(g, true)
		stats.MACs = 0 // Count one build (the graph may be traced more than once).
		if images.DType() == dtypes.Uint8 {
			images = trainstep.NormalizePixels(images, table)
		}
		logits := spec.Build(ctx.In(graphs.ModelScope), images, true, opts)
		loss := trainstep.SoftmaxCrossEntropy(logits, labels, 0)
		var vars []*context.Variable
		ctx.EnumerateVariables(func(v *context.Variable) {
			if v.Trainable && v.InUseByGraph(g) {
				vars = append(vars, v)
			}
		})
		nodes := make([]*Node, len(vars))
		for i, v := range vars {
			nodes[i] = v.ValueGraph(g)
		}
		grads := Gradient(loss, nodes...)
		opt.Update(ctx, vars, grads, make([]bool, len(vars)), lr)
		return loss
	})
	if err != nil {
		return err
	}
	defer exec.Finalize()

	rng := rand.New(rand.NewPCG(1, 2))
	pixels := make([]float32, *batch*h*w*c)
	for i := range pixels {
		pixels[i] = rng.Float32()*2 - 1
	}
	bytePixels := make([]uint8, len(pixels))
	for i := range bytePixels {
		bytePixels[i] = uint8(rng.IntN(256))
	}
	newImages := func() *tensors.Tensor {
		if *input == "uint8" {
			return tensors.FromFlatDataAndDimensions(bytePixels, *batch, h, w, c)
		}
		return tensors.FromFlatDataAndDimensions(pixels, *batch, h, w, c)
	}
	labels := make([]int32, *batch)
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
	}
	x := newImages()
	y := tensors.FromFlatDataAndDimensions(labels, *batch)
	step := func() (time.Duration, error) {
		if *dataPlace == "host" {
			x = newImages()
			y = tensors.FromFlatDataAndDimensions(labels, *batch)
		}
		start := time.Now()
		outs, err := exec.Exec(x, y, float32(0.01))
		if err != nil {
			return 0, err
		}
		loss := tensors.ToScalar[float32](outs[0]) // Waits for the step: execution may be asynchronous.
		elapsed := time.Since(start)
		if outs[0].DType() != dtypes.Float32 || loss != loss {
			return 0, fmt.Errorf("bench: loss is %v", loss)
		}
		for _, o := range outs {
			o.FinalizeAll()
		}
		return elapsed, nil
	}
	compileStart := time.Now()
	if _, err := step(); err != nil { // Compiles.
		return err
	}
	compileS := time.Since(compileStart).Seconds()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep := benchReport{Net: *netName, Backend: backend.Description(), Batch: *batch, Size: h, Threads: runtime.GOMAXPROCS(0),
		Precision: *precision, Data: *dataPlace, Input: *input, CompileS: compileS}
	ctx.EnumerateVariables(func(v *context.Variable) { rep.VariableBytes += int64(v.Shape().Memory()) })
	var times []float64
	var toDevice, toHost []int64
	for range *steps {
		in0, out0 := backend.Transferred()
		d, err := step()
		if err != nil {
			return err
		}
		in1, out1 := backend.Transferred()
		times = append(times, d.Seconds()*1000)
		toDevice, toHost = append(toDevice, in1-in0), append(toHost, out1-out0)
	}
	slices.Sort(toDevice)
	slices.Sort(toHost)
	rep.ToDeviceBytes, rep.ToHostBytes = toDevice[len(toDevice)/2], toHost[len(toHost)/2]
	rep.StepsMS = slices.Clone(times)
	slices.Sort(times)
	rep.MedianMS = times[len(times)/2]
	rep.ImagesPS = float64(*batch) / (rep.MedianMS / 1000)
	rep.GFLOPs = 3 * 2 * float64(stats.MACs) * float64(*batch) / 1e9
	rep.GFLOPPerS = rep.GFLOPs / (rep.MedianMS / 1000)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s batch=%d size=%d %s threads=%d: median %.1f ms/step (min %.1f, max %.1f over %d), %.0f images/s, %.2f GFLOP/step, %.1f GFLOP/s\n",
		rep.Net, rep.Batch, rep.Size, rep.Precision, rep.Threads, rep.MedianMS, times[0], times[len(times)-1], len(times),
		rep.ImagesPS, rep.GFLOPs, rep.GFLOPPerS)
	fmt.Fprintf(stdout, "per step: %d bytes to the device, %d to the host (data on %s; variables %d bytes); first step with compile %.1f s\nbackend: %s\n",
		rep.ToDeviceBytes, rep.ToHostBytes, rep.Data, rep.VariableBytes, rep.CompileS, rep.Backend)
	return nil
}
