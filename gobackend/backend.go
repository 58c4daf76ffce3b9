package gobackend

import (
	"os"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// DefaultConfig is the simplego configuration used when none is given. Ops run one after another; the
// kernels inside each (GEMM, fused convolution, element-wise loops) split over every core. Parallel op
// execution ("ops_parallel", free of deadlocks and bit-identical to it: parallel.go) overlaps
// independent ops, but those are mostly already multi-threaded, and on the 2-core machines measured it
// didn't shorten the steps (docs/benchmarks.md, "A core left idle").
const DefaultConfig = "ops_sequential"

// addedOps are the ops the wrapper adds to simplego (ConvGeneral is overridden, not added).
var addedOps = []backends.OpType{
	backends.OpTypePad,
	backends.OpTypeReverse,
	backends.OpTypeSelectAndScatterMax,
	backends.OpTypeSelectAndScatterMin,
	backends.OpTypeBatchNormForTraining,
	backends.OpTypeBatchNormForInference,
	backends.OpTypeBatchNormGradient,
	backends.OpTypeAllReduce, // SPMD programs (spmd.go).
}

// Backend is GoMLX's pure-Go backend (simplego, name "go") completed with the ops its gradients need:
// Pad, Reverse, SelectAndScatterMax/Min and the three BatchNorm ops, composed from ops simplego supports.
// It also replaces slow simplego ops: float32 ConvGeneral (a single-threaded loop) by a fused GEMM
// convolution (kernels/gemm_conv.go; other convolutions by im2col or col2im around one DotGeneral), ReduceWindow
// (pooling) of float32 and float64 by one node looping over the windows (pool.go; other dtypes by strided
// Slices), SelectAndScatterMax/Min (the max-pool gradient) of float32, float64, int32
// and int64 by one node looping over the windows (pool_grad.go), and, in simplego's executor table, float32 DotGeneral, Slice, Transpose,
// Gather and the hot element-wise ops by multi-core kernels; Compile fuses element-wise chains
// (fuse.go). With devices=R (R > 1) it is R in-process devices that run SPMD programs (devices.go,
// spmd.go). Everything else (buffers, execution) is simplego's.
type Backend struct {
	*simplego.Backend
	config       string
	numDevices   int // From devices=R; when > 1, buffers are deviceBuffers (devices.go).
	capabilities backends.Capabilities
	convMode     convMode // conv=MODE (conv.go)
	im2colLimit  int      // im2col_limit=N: larger im2col/col2im convolutions run simplego's own (conv.go)
	fastDot      bool     // float32/64 DotGeneral runs on the packed GEMM (kernels/gemm.go), Slice on slice copies (slice.go).
	noFuse       bool     // Element-wise chains are not fused at compile time (fuse.go).
	strictConv   bool     // A failed im2col/col2im composition is an error, not simplego's ConvGeneral (conv.go).
}

var _ backends.Backend = (*Backend)(nil)

// New returns the completed pure-Go backend. simplegoConfig is simplego's comma-separated option
// list (e.g. "parallelism=2,ops_sequential"); when it names neither "ops_sequential" nor "ops_parallel",
// "ops_sequential" is added (see DefaultConfig). Three options are the wrapper's own. For comparisons,
// "simplego_dot" keeps all of simplego's own executors (no packed GEMM, fused convolution, copies,
// row loops or fusion), and "nofuse" keeps the fast executors but doesn't fuse element-wise chains.
// For checking the convolution compositions, "strict_conv" makes a failed im2col or col2im composition
// an error instead of a silent fallback to simplego's native ConvGeneral (the tests use it),
// "conv=auto|native|im2col|col2im" forces one algorithm for every convolution (auto: the default
// choice per convolution), and "im2col_limit=N" sets the largest im2col/col2im intermediate, in
// elements, above which a convolution runs simplego's own (default 1<<28).
//
// "ops_parallel" runs independent ops at once on simplego's op workers (parallel.go says why it cannot
// deadlock); results are the same bits as ops_sequential's.
//
// "devices=R" makes R devices in this process (default 1): each runs the per-device program of an SPMD
// executable (graph.Exec.SPMD) on its own buffers, the cores shared among them, and AllReduce meets
// across them with a fixed reduction order, so runs are bit-reproducible (spmd.go). It needs
// ops_sequential (the default): an AllReduce waiting for the other devices must not hold one of
// simplego's parallel-op workers. E.g. "devices=4" or "devices=2,nofuse".
func New(simplegoConfig string) (backends.Backend, error) {
	return newBackend(simplegoConfig)
}

func newBackend(simplegoConfig string) (*Backend, error) {
	config := normalizeConfig(simplegoConfig)
	config, simplegoDot := takeOption(config, "simplego_dot")
	config, noFuse := takeOption(config, "nofuse")
	config, strictConv := takeOption(config, "strict_conv")
	config, numDevices, err := takeDevices(config)
	if err != nil {
		return nil, errors.WithMessagef(err, "pure-Go backend config %q", simplegoConfig)
	}
	config, conv, err := takeConvOptions(config)
	if err != nil {
		return nil, errors.WithMessagef(err, "pure-Go backend config %q", simplegoConfig)
	}
	inner, err := simplego.New(config)
	if err != nil {
		return nil, errors.WithMessagef(err, "pure-Go backend config %q", simplegoConfig)
	}
	sg, ok := inner.(*simplego.Backend)
	if !ok {
		return nil, errors.Errorf("simplego.New returned %T, expected *simplego.Backend", inner)
	}
	caps := simplego.Capabilities.Clone()
	for _, op := range addedOps {
		caps.Operations[op] = true
	}
	b := &Backend{Backend: sg, config: config, numDevices: numDevices, capabilities: caps, fastDot: !simplegoDot,
		noFuse: noFuse || simplegoDot, strictConv: strictConv, convMode: conv.mode, im2colLimit: conv.im2colLimit}
	installCollectives()
	if parallelOps(config) {
		if err := startParallelOps(sg, config); err != nil {
			sg.Finalize()
			return nil, errors.WithMessagef(err, "pure-Go backend config %q", simplegoConfig)
		}
	}
	if b.fastDot {
		enableFastOps(sg)
	} else {
		b.config += ",simplego_dot"
	}
	if noFuse && !simplegoDot {
		b.config += ",nofuse"
	}
	if strictConv {
		b.config += ",strict_conv"
	}
	if numDevices > 1 {
		b.config += ",devices=" + strconv.Itoa(numDevices)
	}
	b.config += conv.suffix
	if opStatsEnabled() {
		installOpStats() // After the fast ops, so it times them.
	}
	return b, nil
}

// takeOption removes option from a comma-separated config and reports whether it was there.
func takeOption(config, option string) (string, bool) {
	var kept []string
	found := false
	for _, p := range strings.Split(config, ",") {
		if p == option {
			found = true
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ","), found
}

// Devices returns the number of devices a pure-Go backend config asks for (devices=R; 1 when absent),
// so that a recipe can be checked without opening the backend.
func Devices(config string) (int, error) {
	_, n, err := takeDevices(normalizeConfig(config))
	return n, err
}

// takeDevices removes the "devices=R" option from a comma-separated config and returns R (1 when absent).
func takeDevices(config string) (string, int, error) {
	var kept []string
	n := 1
	parallelOps := false
	for _, p := range strings.Split(config, ",") {
		if v, ok := strings.CutPrefix(p, "devices="); ok {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				return "", 0, errors.Errorf("devices=%s: want a whole number of devices >= 1", v)
			}
			continue
		}
		parallelOps = parallelOps || p == "ops_parallel"
		kept = append(kept, p)
	}
	if n > 1 && parallelOps {
		return "", 0, errors.Errorf("devices=%d with ops_parallel: a device waiting in an AllReduce would hold one of "+
			"simplego's op workers that the other devices may need; use ops_sequential (the default)", n)
	}
	return strings.Join(kept, ","), n, nil
}

// convOptions are the backend's convolution options (conv.go), taken out of the config string.
type convOptions struct {
	mode        convMode
	im2colLimit int
	suffix      string // the options as given, appended to the backend's config for Name and Description
}

// takeConvOptions removes "conv=MODE" and "im2col_limit=N" from a comma-separated config.
func takeConvOptions(config string) (string, convOptions, error) {
	opts := convOptions{mode: convAuto, im2colLimit: defaultIm2colLimit}
	var kept []string
	for _, p := range strings.Split(config, ",") {
		if v, ok := strings.CutPrefix(p, "conv="); ok {
			mode, known := convModes[v]
			if !known {
				return "", opts, errors.Errorf("conv=%s: want auto, native, im2col or col2im", v)
			}
			opts.mode = mode
			opts.suffix += ",conv=" + v
			continue
		}
		if v, ok := strings.CutPrefix(p, "im2col_limit="); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "", opts, errors.Errorf("im2col_limit=%s: want a number of elements >= 0", v)
			}
			opts.im2colLimit = n
			opts.suffix += ",im2col_limit=" + v
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ","), opts, nil
}

// Finalize releases simplego's resources and unhooks the backend from the packed GEMM.
func (b *Backend) Finalize() {
	if opStatsEnabled() {
		printOpStats(os.Stderr)
	}
	disableFastOps(b.Backend)
	stopParallelOps(b.Backend)
	b.Backend.Finalize()
}

// normalizeConfig adds DefaultConfig unless the config already chooses an op-execution mode.
func normalizeConfig(config string) string {
	var parts []string
	hasMode := false
	for _, p := range strings.Split(config, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p == "ops_sequential" || p == "ops_parallel" {
			hasMode = true
		}
		parts = append(parts, p)
	}
	if !hasMode {
		parts = append(parts, DefaultConfig)
	}
	return strings.Join(parts, ",")
}

// Config returns the simplego configuration the backend was created with.
func (b *Backend) Config() string { return b.config }

// String returns "go", the name to select this backend with.
func (b *Backend) String() string { return simplego.BackendName }

// Description is simplego's description plus what the wrapper adds.
func (b *Backend) Description() string {
	d := b.Backend.Description() + " [" + b.config + "] + Pad, Reverse, SelectAndScatter, BatchNorm, AllReduce; im2col/col2im ConvGeneral, native ReduceWindow"
	if b.fastDot {
		d += "; float32 fused-GEMM ConvGeneral and packed-GEMM DotGeneral (" + kernels.GemmKernelName() +
			"), copying Slice/Gather, tiled Transpose, row-loop element-wise ops"
		if !b.noFuse {
			d += ", element-wise fusion"
		}
	}
	if b.multiDevice() {
		d += "; " + b.devicesSummary()
	}
	return d
}

// Capabilities reports simplego's capabilities plus the ops the wrapper adds.
func (b *Backend) Capabilities() backends.Capabilities { return b.capabilities }

// Builder returns a builder that embeds simplego's and overrides the added ops and ConvGeneral.
func (b *Backend) Builder(name string) backends.Builder {
	return &goBuilder{Builder: b.Backend.Builder(name), backend: b, convMode: b.convMode, fusedConv: b.fastDot,
		nativePoolGrad: b.fastDot, nativePool: b.fastDot, fuse: b.fastDot && !b.noFuse, strictConv: b.strictConv, programDevices: 1}
}

// goBuilder embeds simplego's builder; every op it composes is built with that inner builder.
type goBuilder struct {
	backends.Builder
	backend        *Backend
	convMode       convMode
	fusedConv      bool // float32 convolutions the fused GEMM handles stay ConvGeneral nodes (kernels/gemm_conv.go).
	fuse           bool // Compile fuses element-wise chains (fuse.go).
	nativePoolGrad bool // SelectAndScatterMax/Min run as one node (pool_grad.go), not composed.
	nativePool     bool // Float ReduceWindow runs as one node (pool.go), not composed from slices.
	strictConv     bool // A failed im2col/col2im composition is an error (see New).

	// The program's devices (spmd.go): set by DistributedSPMD and DeviceAssignment.
	spmd           bool
	programDevices int                  // 1 unless DistributedSPMD.
	assignment     []backends.DeviceNum // nil: devices 0..programDevices-1, or the default device.
	numParams      int                  // Parameters created so far, the hidden one included.
	deviceParam    backends.Op          // The hidden device-index parameter every AllReduce node reads; nil until one.
	deviceParamIdx int
	collectives    *collectives
}

// composer builds ops on the inner builder and keeps the first error, so compositions read as formulas and
// the error is checked once at the end.
type composer struct {
	b   backends.Builder
	err error
}

func (b *goBuilder) composer() *composer { return &composer{b: b.Builder} }

func (c *composer) keep(op backends.Op, err error) backends.Op {
	if c.err == nil && err != nil {
		c.err = err
	}
	return op
}

func (c *composer) shape(x backends.Op) shapes.Shape {
	if c.err != nil {
		return shapes.Invalid()
	}
	s, err := c.b.OpShape(x)
	if err != nil {
		c.err = err
		return shapes.Invalid()
	}
	return s
}

func (c *composer) slice(x backends.Op, starts, limits, strides []int) backends.Op {
	if c.err != nil {
		return nil
	}
	if strides == nil {
		strides = ones(len(starts))
	}
	return c.keep(c.b.Slice(x, starts, limits, strides))
}

func (c *composer) concat(axis int, xs ...backends.Op) backends.Op {
	if c.err != nil {
		return nil
	}
	if len(xs) == 1 {
		return xs[0]
	}
	return c.keep(c.b.Concatenate(axis, xs...))
}

func (c *composer) reshape(x backends.Op, dims ...int) backends.Op {
	if c.err != nil {
		return nil
	}
	return c.keep(c.b.Reshape(x, dims...))
}

func (c *composer) transpose(x backends.Op, perm ...int) backends.Op {
	if c.err != nil {
		return nil
	}
	identity := true
	for i, p := range perm {
		if p != i {
			identity = false
		}
	}
	if identity {
		return x
	}
	return c.keep(c.b.Transpose(x, perm...))
}

// broadcast broadcasts x (whose axes map to axes of shape) to shape.
func (c *composer) broadcast(x backends.Op, shape shapes.Shape, axes ...int) backends.Op {
	if c.err != nil {
		return nil
	}
	if axes == nil {
		axes = []int{}
	}
	return c.keep(c.b.BroadcastInDim(x, shape, axes))
}

func (c *composer) binary(fn func(a, b backends.Op) (backends.Op, error), a, b backends.Op) backends.Op {
	if c.err != nil {
		return nil
	}
	return c.keep(fn(a, b))
}

func (c *composer) add(a, b backends.Op) backends.Op { return c.binary(c.b.Add, a, b) }
func (c *composer) sub(a, b backends.Op) backends.Op { return c.binary(c.b.Sub, a, b) }
func (c *composer) mul(a, b backends.Op) backends.Op { return c.binary(c.b.Mul, a, b) }

func (c *composer) unary(fn func(a backends.Op) (backends.Op, error), a backends.Op) backends.Op {
	if c.err != nil {
		return nil
	}
	return c.keep(fn(a))
}

func (c *composer) reduceSum(x backends.Op, axes ...int) backends.Op {
	if c.err != nil {
		return nil
	}
	return c.keep(c.b.ReduceSum(x, axes...))
}

func (c *composer) constant(flat any, dims ...int) backends.Op {
	if c.err != nil {
		return nil
	}
	return c.keep(c.b.Constant(flat, dims...))
}

// scalar returns a float constant of the given dtype.
func (c *composer) scalar(dtype dtypes.DType, v float64) backends.Op {
	switch dtype {
	case dtypes.Float64:
		return c.constant([]float64{v})
	case dtypes.Float32:
		return c.constant([]float32{float32(v)})
	case dtypes.BFloat16:
		return c.constant([]bfloat16.BFloat16{bfloat16.FromFloat64(v)})
	}
	x := c.constant([]float64{v})
	if c.err != nil {
		return nil
	}
	return c.keep(c.b.ConvertDType(x, dtype))
}

// zero returns a 0 scalar constant of the given dtype.
func (c *composer) zero(dtype dtypes.DType) backends.Op {
	return c.constant(zeroFlat(dtype))
}

// extreme returns the lowest (or highest) value of dtype as a scalar constant: -inf/+inf for floats.
func (c *composer) extreme(dtype dtypes.DType, highest bool) backends.Op {
	v := dtype.LowestValue()
	if highest {
		v = dtype.HighestValue()
	}
	return c.constant(flatOf(dtype, v))
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}
