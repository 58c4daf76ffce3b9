package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/spf13/cobra"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/schedule"
	"github.com/trainer/trainer/trainstep"
)

const benchDescription = `Times the train step every command compiles (trainstep) on synthetic data, and counts the bytes it
moves between host and device; a timed step ends when its loss is on the host. With a CONFIG it is the
recipe's step (its optimizer, EMA, clipping, accumulation micro-step, guard, precision and input) at
its batch and image size, on its backend unless --backend says otherwise; the flags given override the
recipe's keys. With --net (default mnist_cnn) it is the peer-comparable step of a registered net:
softmax cross-entropy and SGD momentum 0.9 at a constant rate, no weight decay, EMA or clipping
(scripts/cpu-peer.sh, scripts/jax_peer.py and docs/benchmarks.md compare it). With a CONFIG and
--data shards it times the recipe's whole loop from its own data (decode, augment, prefetch to the
device, step, reading results) beside the same step on a resident batch, and says where the loop's
time went (bench_shards.go). On the pure-Go backend the report puts the step's GFLOP/s beside the
machine's peak, measured after the timed steps with the backend's own float32 GEMM on two 1024×1024
matrices (best of 5); --peak measures only that.`

// benchReport is `trainer bench --json`'s output.
type benchReport struct {
	Net       string    `json:"net"`
	Config    string    `json:"config,omitempty"` // the recipe timed, if any
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
	// variables: residency holds when the per-step bytes are far below the variables' (backend.TransferCounter).
	ToDeviceBytes int64 `json:"to_device_bytes_per_step"`
	ToHostBytes   int64 `json:"to_host_bytes_per_step"`
	VariableBytes int64 `json:"variable_bytes"`
	// The pure-Go backend's peak: its float32 GEMM on two PeakN×PeakN matrices, best of 5, on every
	// core; PercentOfPeak is GFLOPPerS over it. Absent on other backends.
	PeakGFLOPPerS float64 `json:"peak_gflop_per_s,omitempty"`
	PercentOfPeak float64 `json:"percent_of_peak,omitempty"`
	PeakN         int     `json:"peak_n,omitempty"`
	PeakKernel    string  `json:"peak_kernel,omitempty"`
}

// benchPeak is the size and repetitions of the peak measurement.
const benchPeakN, benchPeakReps = 1024, 5

// peakReport is `trainer bench --peak --json`'s output.
type peakReport struct {
	GFLOPPerS float64 `json:"peak_gflop_per_s"`
	N         int     `json:"peak_n"`
	Threads   int     `json:"threads"`
	Kernel    string  `json:"peak_kernel"`
}

// newBenchCommand declares `trainer bench [CONFIG]` and its flags.
func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [CONFIG]",
		Short: "Time a train step of a recipe or a net on synthetic data",
		Long:  benchDescription,
		Args:  cobra.MaximumNArgs(1),
	}
	var f benchFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Net, "net", "", "registered net `NAME` (trainer nets), when no CONFIG is given (default mnist_cnn)")
	fs.IntVar(&f.Batch, "batch", 128, "batch size `N` (data.batch_size; with a CONFIG, its own unless given)")
	fs.IntVar(&f.Size, "size", 0, "square input resolution `S` (net.image_size; 0: the net's default)")
	fs.IntVar(&f.Steps, "steps", 5, "timed steps `K` (after one untimed step that compiles)")
	fs.Float64Var(&f.Width, "width", 1, "width multiplier `W` of the net (net.width)")
	fs.StringVar(&f.Precision, "precision", "float32", "compute precision `float32|bf16` (bf16: bfloat16 compute, float32 master weights)")
	fs.StringVar(&f.Data, "data", "device", "`device|host|shards`: one synthetic batch sent once and reused (no input transfer), or sent every step; shards (with a CONFIG): the recipe's whole loop from its own data beside the resident step (bench_shards.go)")
	fs.StringVar(&f.Input, "input", "float32", "`float32|uint8`: normalised images, or pixels the graph normalises first (data.device_normalize)")
	fs.StringArrayVar(&f.Set, "set", nil, "override a key of the CONFIG: `key=value` (repeatable)")
	fs.StringVar(&f.Backend, "backend", "go", "backend `B`: go, xla:cpu, xla:cuda, xla:tpu or a plugin path (with a CONFIG, its own unless given)")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the timed steps to the file `F`")
	fs.BoolVar(&f.JSON, "json", false, "print JSON")
	fs.BoolVar(&f.Peak, "peak", false, "only measure the pure-Go backend's peak: its float32 GEMM on two 1024×1024 matrices, best of 5")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		f.given = givenFlags(fs)
		if f.Peak {
			return benchPeakMain(cmd.OutOrStdout(), f.JSON)
		}
		return benchMain(f, positional, cmd.OutOrStdout())
	}
	return cmd
}

// benchFlags are `trainer bench`'s flags, one field per flag.
type benchFlags struct {
	Net        string   // --net
	Batch      int      // --batch
	Size       int      // --size
	Steps      int      // --steps
	Width      float64  // --width
	Precision  string   // --precision
	Data       string   // --data
	Input      string   // --input
	Set        []string // --set
	Backend    string   // --backend
	CPUProfile string   // --cpuprofile
	JSON       bool     // --json
	Peak       bool     // --peak
	// given names the flags set on the command line (not a flag; filled at parse time): with a
	// CONFIG, only those override its keys.
	given map[string]bool
}

// benchMain times one train step (trainstep.Step: what `trainer run` compiles) on random data; see
// benchDescription.
func benchMain(f benchFlags, positional []string, stdout io.Writer) error {
	var err error
	if f.Batch < 1 || f.Steps < 1 || f.Size < 0 || f.Width <= 0 {
		return errors.New("bench: --batch and --steps must be >= 1, --size >= 0, --width > 0")
	}
	// The bounds a run's recipe has (data.batch_size, net.image_size, net.width), checked before a
	// batch is allocated; the step times are kept, one per step.
	if f.Batch > data.MaxBatchSize || f.Size > config.MaxImageSize || f.Steps > maxBenchSteps || !(f.Width <= 16) {
		return fmt.Errorf("bench: --batch %d, --size %d, --steps %d, --width %g: expected a batch of at most %d, a size of at most %d, "+
			"at most %d steps and a width of at most 16", f.Batch, f.Size, f.Steps, f.Width, data.MaxBatchSize, config.MaxImageSize, maxBenchSteps)
	}
	switch f.Precision {
	case "float32", "f32":
		f.Precision = "float32"
	case "bf16", "bfloat16":
		f.Precision = "bfloat16"
	default:
		return fmt.Errorf("bench: --precision %q: expected float32 or bf16", f.Precision)
	}
	if f.Data != "device" && f.Data != "host" && f.Data != "shards" {
		return fmt.Errorf("bench: --data %q: expected device, host or shards", f.Data)
	}
	if f.Input != "float32" && f.Input != "uint8" {
		return fmt.Errorf("bench: --input %q: expected float32 or uint8", f.Input)
	}
	var cfg config.Config
	var recipePath string
	if len(positional) == 1 {
		if f.given["net"] {
			return errors.New("bench: give a CONFIG or --net NAME, not both")
		}
		// The flags given override the recipe's keys; the others leave them as they are.
		var overrides []string
		value := map[string]string{"backend": f.Backend, "batch": strconv.Itoa(f.Batch), "size": strconv.Itoa(f.Size),
			"width": strconv.FormatFloat(f.Width, 'g', -1, 64), "precision": f.Precision} // as pflag prints them
		for flagName, key := range map[string]string{"backend": "backend", "batch": "data.batch_size",
			"size": "net.image_size", "width": "net.width", "precision": "net.precision"} {
			if f.given[flagName] {
				overrides = append(overrides, key+"="+value[flagName])
			}
		}
		if f.given["input"] {
			overrides = append(overrides, fmt.Sprintf("data.device_normalize=%v", f.Input == "uint8"))
		}
		slices.Sort(overrides)
		recipePath = positional[0]
		if cfg, err = recipe.Load(recipePath, append(overrides, f.Set...)); err != nil {
			return err
		}
	} else {
		if len(f.Set) > 0 {
			return errors.New("bench: --set needs a CONFIG")
		}
		name := f.Net
		if name == "" {
			name = "mnist_cnn"
		}
		if cfg, err = peerConfig(name, f.Backend, f.Batch, f.Size, f.Width, f.Precision, f.Input == "uint8"); err != nil {
			return err
		}
	}
	if f.Data == "shards" {
		return benchShards(stdout, cfg, recipePath, f.Steps, f.JSON)
	}
	rep, err := benchStep(cfg, f.Steps, f.Data == "host", f.CPUProfile)
	if err != nil {
		return err
	}
	rep.Config = recipePath
	if spec, err := backend.ParseConfig(cfg.Backend); err == nil && spec.Backend == "go" {
		p := gobackend.MeasurePeak(benchPeakN, benchPeakReps)
		rep.PeakGFLOPPerS, rep.PeakN, rep.PeakKernel = p.GFLOPS, p.N, p.Kernel
		rep.PercentOfPeak = 100 * rep.GFLOPPerS / p.GFLOPS
	}
	if f.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if note := precisionNote(cfg); note != "" {
		fmt.Fprintln(stdout, note)
	}
	times := slices.Sorted(slices.Values(rep.StepsMS))
	fmt.Fprintf(stdout, "%s batch=%d size=%d %s threads=%d: median %.1f ms/step (min %.1f, max %.1f over %d), %.0f images/s, %.2f GFLOP/step, %.1f GFLOP/s\n",
		rep.Net, rep.Batch, rep.Size, rep.Precision, rep.Threads, rep.MedianMS, times[0], times[len(times)-1], len(times),
		rep.ImagesPS, rep.GFLOPs, rep.GFLOPPerS)
	fmt.Fprintf(stdout, "per step: %d bytes to the device, %d to the host (data on %s; variables %d bytes); first step with compile %.1f s\nbackend: %s\n",
		rep.ToDeviceBytes, rep.ToHostBytes, rep.Data, rep.VariableBytes, rep.CompileS, rep.Backend)
	if rep.PeakGFLOPPerS > 0 {
		fmt.Fprintf(stdout, "peak: %.1f GFLOP/s (the backend's float32 GEMM, %d³, %s kernel, %d threads, best of %d); this step %.1f GFLOP/s = %.0f%% of it\n",
			rep.PeakGFLOPPerS, rep.PeakN, rep.PeakKernel, rep.Threads, benchPeakReps, rep.GFLOPPerS, rep.PercentOfPeak)
	}
	return nil
}

// benchPeakMain prints the pure-Go backend's peak alone (trainer bench --peak).
func benchPeakMain(stdout io.Writer, asJSON bool) error {
	p := gobackend.MeasurePeak(benchPeakN, benchPeakReps)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(peakReport{GFLOPPerS: p.GFLOPS, N: p.N, Threads: p.Threads, Kernel: p.Kernel})
	}
	_, err := fmt.Fprintf(stdout, "peak: %.1f GFLOP/s (the pure-Go backend's float32 GEMM, %d³, %s kernel, %d threads, best of %d)\n",
		p.GFLOPS, p.N, p.Kernel, p.Threads, benchPeakReps)
	return err
}

// maxBenchSteps bounds bench --steps: its report keeps every step's time.
const maxBenchSteps = 1_000_000

// peerConfig is the minimal recipe of `bench --net`: the net at batch n, softmax cross-entropy, SGD
// momentum 0.9 at a constant 0.01, no weight decay, EMA or clipping, the guard as by default;
// uint8 input is normalised with ImageNet's statistics.
func peerConfig(net, backend string, n, size int, width float64, precision string, uint8Input bool) (config.Config, error) {
	spec, err := graphs.Get(net)
	if err != nil {
		return config.Config{}, err
	}
	cfg := config.Defaults()
	cfg.Name, cfg.Backend = "bench", backend
	cfg.Net.Name, cfg.Net.ImageSize, cfg.Net.Width, cfg.Net.Precision = net, size, width, precision
	cfg.Data.BatchSize = n
	cfg.Data.DeviceNormalize = "false"
	if uint8Input {
		cfg.Data.DeviceNormalize = "true"
	}
	cfg.Data.Mean, cfg.Data.Std = nil, nil
	for i := range spec.InputShape[2] {
		cfg.Data.Mean = append(cfg.Data.Mean, graphs.ImageNetEval.Mean[i%3])
		cfg.Data.Std = append(cfg.Data.Std, graphs.ImageNetEval.Std[i%3])
	}
	cfg.Optimizer = config.OptimizerConfig{Name: "sgd", LR: 0.01, Momentum: 0.9, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
		AccumulateSteps: 1}
	return cfg, nil
}

// macCounter counts the forward's multiply-accumulates of one build of the step graph.
type macCounter struct {
	trainstep.Net
	stats *graphs.Stats
}

func (m macCounter) Forward(ctx *context.Context, images *Node, train bool) *Node {
	m.stats.MACs = 0 // count one build (the graph may be traced more than once)
	return m.Net.Forward(ctx, images, train)
}

// benchStep compiles cfg's train step and times steps executions of it on synthetic data (sent every
// step with host, else once), after one that compiles.
func benchStep(cfg config.Config, steps int, host bool, cpuProfilePath string) (_ benchReport, err error) {
	profile, err := openCPUProfile(cpuProfilePath) // checked before the compile it would wait for
	if err != nil {
		return benchReport{}, err
	}
	defer func() {
		if perr := profile.finish(); err == nil {
			err = perr
		}
	}()
	net, err := trainstep.NetOf(cfg)
	if err != nil {
		return benchReport{}, err
	}
	form := trainstep.BatchOf(cfg, net)
	if v := config.BatchValues(cfg.Data.BatchSize, [3]int{form.Height, form.Width, form.Channels}); v > config.MaxBatchValues {
		return benchReport{}, fmt.Errorf("bench: --batch %d at %s's input of %d×%d×%d: %d pixel values a batch, expected at most %d (8 GiB as float32): a smaller --batch or --size",
			cfg.Data.BatchSize, cfg.Net.Label(), form.Height, form.Width, form.Channels, v, int64(config.MaxBatchValues))
	}
	stats := &graphs.Stats{}
	net.Options.Stats = stats
	config, err := backend.ForReplicas(cfg.Backend, cfg.Replicas) // go: one device per replica
	if err != nil {
		return benchReport{}, err
	}
	opened, err := backend.Open(config)
	if err != nil {
		return benchReport{}, err
	}
	defer opened.Finalize()
	counter := backend.CountTransfers(opened)
	ctx := trainstep.NewContext(cfg)
	step, err := trainstep.New(counter, ctx, cfg, macCounter{net, stats})
	if err != nil {
		return benchReport{}, err
	}
	defer step.Finalize()

	newBatch := syntheticBatch(form, cfg.Data.BatchSize, max(cfg.Replicas, 1))
	x, y := newBatch()
	k := max(cfg.Optimizer.AccumulateSteps, 1)
	done := 0 // micro-steps run
	run := func() (time.Duration, error) {
		if host {
			finalizeAll(x, y)
			x, y = newBatch()
		}
		j, t := done%k, done/k // place in the accumulation group, optimizer step (0-based)
		sc := trainstep.Scalars{LR: cfg.PeakLR(), Update: t + 1, Apply: j == k-1, Keep: float64(min(j, 1)),
			EMADecay: schedule.EMADecay(cfg.EMA, t), EMAFresh: t == 0}
		start := time.Now()
		outs, err := step.Execute(x, y, sc)
		if err != nil {
			return 0, err
		}
		loss := outs.Loss() // Waits for the step: execution may be asynchronous.
		elapsed := time.Since(start)
		outs.Finalize()
		done++
		if loss != loss {
			return 0, fmt.Errorf("bench: loss is %v", loss)
		}
		return elapsed, nil
	}
	compileStart := time.Now()
	if _, err := run(); err != nil { // Compiles.
		return benchReport{}, err
	}
	compileS := time.Since(compileStart).Seconds()
	if err := profile.start(); err != nil {
		return benchReport{}, err
	}
	rep := benchReport{Net: cfg.Net.Name, Backend: counter.Description(), Batch: cfg.Data.BatchSize, Size: form.Height,
		Threads: runtime.GOMAXPROCS(0), Precision: cfg.Net.Precision, Data: "device", Input: "float32", CompileS: compileS}
	if host {
		rep.Data = "host"
	}
	if form.Pixels == dtypes.Uint8 {
		rep.Input = "uint8"
	}
	ctx.EnumerateVariables(func(v *context.Variable) { rep.VariableBytes += int64(v.Shape().Memory()) })
	var times []float64
	var toDevice, toHost []int64
	for range steps {
		in0, out0 := counter.Transferred()
		d, err := run()
		if err != nil {
			return rep, err
		}
		in1, out1 := counter.Transferred()
		times = append(times, d.Seconds()*1000)
		toDevice, toHost = append(toDevice, in1-in0), append(toHost, out1-out0)
	}
	slices.Sort(toDevice)
	slices.Sort(toHost)
	rep.ToDeviceBytes, rep.ToHostBytes = toDevice[len(toDevice)/2], toHost[len(toHost)/2]
	rep.StepsMS = slices.Clone(times)
	slices.Sort(times)
	rep.MedianMS = times[len(times)/2]
	rep.ImagesPS = float64(rep.Batch) / (rep.MedianMS / 1000)
	rep.GFLOPs = 3 * 2 * float64(stats.MACs) * float64(rep.Batch) / 1e9
	rep.GFLOPPerS = rep.GFLOPs / (rep.MedianMS / 1000)
	return rep, nil
}

// syntheticBatch returns a maker of one random global batch of n examples of form, as one shard per
// replica: images uniform in [-1, 1) (or uint8 pixels), labels uniform over the classes (one-hot
// rows when the step takes soft targets). Every call makes new tensors of the same values.
func syntheticBatch(form trainstep.Batch, n, replicas int) func() (images, labels []*tensors.Tensor) {
	h, w, c := form.Height, form.Width, form.Channels
	rng := rand.New(rand.NewPCG(1, 2))
	pixels := make([]float32, n*h*w*c)
	for i := range pixels {
		pixels[i] = rng.Float32()*2 - 1
	}
	bytePixels := make([]uint8, len(pixels))
	for i := range bytePixels {
		bytePixels[i] = uint8(rng.IntN(256))
	}
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(rng.IntN(form.Classes))
	}
	onehot := make([]float32, n*form.Classes)
	for i, l := range labels {
		onehot[i*form.Classes+int(l)] = 1
	}
	per, px := n/replicas, h*w*c
	return func() (images, targets []*tensors.Tensor) {
		for r := range replicas {
			rows := func(width int) (int, int) { return r * per * width, (r + 1) * per * width }
			a, b := rows(px)
			if form.Pixels == dtypes.Uint8 {
				images = append(images, tensors.FromFlatDataAndDimensions(bytePixels[a:b], per, h, w, c))
			} else {
				images = append(images, tensors.FromFlatDataAndDimensions(pixels[a:b], per, h, w, c))
			}
			if form.SoftTargets {
				a, b = rows(form.Classes)
				targets = append(targets, tensors.FromFlatDataAndDimensions(onehot[a:b], per, form.Classes))
			} else {
				a, b = rows(1)
				targets = append(targets, tensors.FromFlatDataAndDimensions(labels[a:b], per))
			}
		}
		return images, targets
	}
}

func finalizeAll(groups ...[]*tensors.Tensor) {
	for _, g := range groups {
		for _, t := range g {
			t.FinalizeAll()
		}
	}
}
