package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// devicesBackend returns a pure-Go backend with n devices (shared by the tests).
var devicesBackend = func() func(t *testing.T, n int) *Backend {
	var mu sync.Mutex
	cache := map[int]*Backend{}
	return func(t *testing.T, n int) *Backend {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if b := cache[n]; b != nil {
			return b
		}
		b, err := newBackend(fmt.Sprintf("strict_conv,devices=%d", n))
		if err != nil {
			t.Fatal(err)
		}
		cache[n] = b
		return b
	}
}()

func replicaMesh(t *testing.T, n int) *distributed.DeviceMesh {
	t.Helper()
	mesh, err := distributed.NewDeviceMesh([]int{n}, []string{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	return mesh
}

func TestDevicesConfig(t *testing.T) {
	b := devicesBackend(t, 4)
	if b.NumDevices() != 4 || !strings.Contains(b.Config(), "devices=4") || !strings.Contains(b.Config(), "ops_sequential") {
		t.Errorf("devices=4: NumDevices %d, config %q", b.NumDevices(), b.Config())
	}
	if d := b.DeviceDescription(3); !strings.Contains(d, "device 3 of 4") || !strings.Contains(d, "share") {
		t.Errorf("DeviceDescription(3) = %q: should name the device and say the devices share the cores", d)
	}
	if !strings.Contains(b.Description(), "4 in-process devices") {
		t.Errorf("Description() = %q", b.Description())
	}
	for _, bad := range []string{"devices=0", "devices=two", "devices=2,ops_parallel"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
		if _, err := Devices(bad); err == nil {
			t.Errorf("Devices(%q) accepted", bad)
		}
	}
	for config, want := range map[string]int{"": 1, "nofuse": 1, "devices=3,nofuse": 3} {
		if n, err := Devices(config); err != nil || n != want {
			t.Errorf("Devices(%q) = %d, %v; want %d", config, n, err, want)
		}
	}
	one, err := newBackend("devices=1")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Finalize()
	def, err := newBackend("")
	if err != nil {
		t.Fatal(err)
	}
	defer def.Finalize()
	if one.NumDevices() != 1 || one.Config() != def.Config() || one.Description() != def.Description() ||
		one.DeviceDescription(0) != (&simplego.Backend{}).DeviceDescription(0) {
		t.Errorf("devices=1 differs from the default: config %q vs %q", one.Config(), def.Config())
	}

	// Buffers know their device; one device keeps simplego's own buffers.
	shape := shapes.Make(dtypes.Float32, 3)
	buf, err := b.BufferFromFlatData(3, []float32{1, 2, 3}, shape)
	if err != nil {
		t.Fatal(err)
	}
	if dev, err := b.BufferDeviceNum(buf); err != nil || dev != 3 {
		t.Errorf("BufferDeviceNum = %d, %v; want 3", dev, err)
	}
	if _, err := b.BufferFromFlatData(4, []float32{1, 2, 3}, shape); err == nil {
		t.Errorf("BufferFromFlatData on device 4 of 4 accepted")
	}
	moved, err := b.BufferCopyToDevice(buf, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 3)
	if dev, _ := b.BufferDeviceNum(moved); dev != 1 || b.BufferToFlatData(moved, got) != nil || !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("BufferCopyToDevice: device %d, values %v", dev, got)
	}
	shared, flat, err := b.NewSharedBuffer(2, shape)
	if err != nil {
		t.Fatal(err)
	}
	copy(flat.([]float32), []float32{4, 5, 6})
	if data, err := b.BufferData(shared); err != nil || !slices.Equal(data.([]float32), []float32{4, 5, 6}) {
		t.Errorf("shared buffer reads %v, %v", data, err)
	}
	if err := b.BufferFinalize(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BufferShape(buf); err == nil {
		t.Errorf("a finalized buffer is still usable")
	}
	oneBuf, err := one.BufferFromFlatData(0, []float32{1, 2, 3}, shape)
	if _, ok := oneBuf.(*simplego.Buffer); err != nil || !ok {
		t.Errorf("devices=1 makes %T buffers (%v), want simplego's", oneBuf, err)
	}
}

// dotSumFn is the per-device computation of the tests: the column sums of x·w, all-reduced, and the
// device's own sums before the reduction.
func dotSumFn(x, w *Node) (reduced, partial *Node) {
	partial = ReduceSum(Dot(x, w), 0)
	return x.Graph().Distributed().AllReduceOne(partial, backends.ReduceOpSum), partial
}

func TestSPMDAllReduceMatchesOneDevice(t *testing.T) {
	for _, n := range []int{2, 4} {
		b := devicesBackend(t, n)
		rng := rand.New(rand.NewSource(int64(n)))
		const rows, k, m = 3, 5, 4
		xs := make([]tt, n)
		w := randTT(rng, k, m)
		all := newTT(n*rows, k)
		for d := range xs {
			xs[d] = randTT(rng, rows, k)
			copy(all.data[d*rows*k:], xs[d].data)
		}
		want := runGraph(t, testBackend(t), func(in []*Node) []*Node { return []*Node{ReduceSum(Dot(in[0], in[1]), 0)} }, all, w)[0]

		exec, err := NewExec(b, dotSumFn)
		if err != nil {
			t.Fatal(err)
		}
		exec.SPMD(replicaMesh(t, n))
		run := func(dtype dtypes.DType) []*tensors.Tensor {
			args := make([]any, 0, 2*n)
			for d := range n { // Device-major; every device its own tensors.
				x, wd := xs[d].tensor(), w.tensor()
				if dtype == dtypes.Float32 {
					x, wd = toF32Tensor(xs[d]), toF32Tensor(w)
				}
				args = append(args, x, wd)
			}
			outs, err := exec.Exec(args...)
			if err != nil {
				t.Fatalf("devices=%d: %+v", n, err)
			}
			if len(outs) != 2*n {
				t.Fatalf("devices=%d: %d outputs, want %d", n, len(outs), 2*n)
			}
			for d := range n {
				if dev, err := outs[2*d].Device(); err != nil || int(dev) != d {
					t.Errorf("devices=%d: device #%d's output is on device %d (%v)", n, d, dev, err)
				}
			}
			return outs
		}

		// float64: the single-device computation on the joined batch.
		outs := run(dtypes.Float64)
		for d := range n {
			assertClose(t, "all-reduced column sums", fromTensor(t, outs[2*d]), want, 1e-12)
			if !slices.Equal(tensors.MustCopyFlatData[float64](outs[2*d]), tensors.MustCopyFlatData[float64](outs[0])) {
				t.Errorf("devices=%d: device #%d's result differs from device #0's", n, d)
			}
		}
		again := run(dtypes.Float64)
		for d := range n {
			if !slices.Equal(tensors.MustCopyFlatData[float64](again[2*d]), tensors.MustCopyFlatData[float64](outs[2*d])) {
				t.Errorf("devices=%d: rerun differs on device #%d", n, d)
			}
		}

		// float32: exactly partial₀ + partial₁ + … in float32, in device order.
		outs = run(dtypes.Float32)
		sum := make([]float32, m)
		for d := range n {
			for j, v := range tensors.MustCopyFlatData[float32](outs[2*d+1]) {
				if d == 0 {
					sum[j] = v
				} else {
					sum[j] += v
				}
			}
		}
		for d := range n {
			if got := tensors.MustCopyFlatData[float32](outs[2*d]); !slices.Equal(got, sum) {
				t.Errorf("devices=%d float32: device #%d got %v, want the device-order sum %v", n, d, got, sum)
			}
		}
		exec.Finalize()
	}
}

func toF32Tensor(x tt) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(toF32(x), x.dims...) }

func TestSPMDAllReduceKinds(t *testing.T) {
	b := devicesBackend(t, 3)
	g := NewGraph(b, t.Name())
	if err := g.SetSPMD(replicaMesh(t, 3)); err != nil {
		t.Fatal(err)
	}
	x := Parameter(g, "x", shapes.Make(dtypes.Float32, 2))
	y := Parameter(g, "y", shapes.Make(dtypes.Float64))
	z := Parameter(g, "z", shapes.Make(dtypes.Int32, 2))
	var outs []*Node
	for _, kind := range []backends.ReduceOpType{backends.ReduceOpSum, backends.ReduceOpProduct, backends.ReduceOpMax, backends.ReduceOpMin} {
		outs = append(outs, g.Distributed().AllReduce([]*Node{x, y, z}, kind)...)
	}
	g.Compile(outs...)
	results := g.Run(
		[]float32{1, -2}, 0.5, []int32{3, -1}, // Device 0.
		[]float32{2, 5}, 4.0, []int32{-7, 2}, // Device 1.
		[]float32{-3, 0.25}, -1.0, []int32{1, 6}) // Device 2.
	want := []any{
		[]float32{0, 3.25}, 3.5, []int32{-3, 7}, // Sum.
		[]float32{-6, -2.5}, -2.0, []int32{-21, -12}, // Product.
		[]float32{2, 5}, 4.0, []int32{3, 6}, // Max.
		[]float32{-3, -2}, -1.0, []int32{-7, -1}, // Min.
	}
	if len(results) != 3*len(want) {
		t.Fatalf("%d outputs, want %d", len(results), 3*len(want))
	}
	for d := range 3 {
		for i, w := range want {
			if got := results[d*len(want)+i].Value(); !equalValues(got, w) {
				t.Errorf("device #%d output #%d: %v, want %v", d, i, got, w)
			}
		}
	}
}

// TestSPMDAllReduceLarge reduces a vector long enough to be split over the cores, in place (donated
// inputs) and not: exactly the device-order float32 sum either way.
func TestSPMDAllReduceLarge(t *testing.T) {
	const n, size = 4, 100_003
	b := devicesBackend(t, n)
	builder := b.Builder(t.Name())
	if err := builder.DistributedSPMD(n); err != nil {
		t.Fatal(err)
	}
	shape := shapes.Make(dtypes.Float32, size)
	x, err := builder.Parameter("x", shape, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := builder.AllReduce([]backends.Op{x}, backends.ReduceOpSum, nil)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := builder.Compile(y, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	rng := rand.New(rand.NewSource(3))
	flats := make([][]float32, n)
	want := make([]float32, size)
	for d := range flats {
		flats[d] = make([]float32, size)
		for i := range flats[d] {
			flats[d][i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(rng.Intn(7)-3)))
			if d == 0 {
				want[i] = flats[d][i]
			} else {
				want[i] += flats[d][i]
			}
		}
	}
	for _, donate := range []bool{false, true} {
		ins := make([]backends.Buffer, n)
		for d := range n {
			if ins[d], err = b.BufferFromFlatData(backends.DeviceNum(d), flats[d], shape); err != nil {
				t.Fatal(err)
			}
		}
		outs, err := executeWithin(t, exec, ins, []bool{donate, donate, donate, donate})
		if err != nil {
			t.Fatal(err)
		}
		for d, out := range outs {
			got := make([]float32, size)
			if err := b.BufferToFlatData(out, got); err != nil || !slices.Equal(got, want) {
				t.Errorf("donate %v: device #%d's sum differs from the device-order sum (%v)", donate, d, err)
			}
		}
	}
}

func equalValues(a, b any) bool {
	switch a := a.(type) {
	case []float32:
		return slices.Equal(a, b.([]float32))
	case []int32:
		return slices.Equal(a, b.([]int32))
	case float64:
		return a == b.(float64)
	}
	return false
}

// TestSPMDVariableUpdates trains a linear model for 3 steps with context.Exec: the weights are
// replicated variables, donated to each step and replaced by its outputs, updated with the all-reduced
// gradient; it must follow the one-device run on the joined batch, every device holding the same bits.
func TestSPMDVariableUpdates(t *testing.T) {
	const rows, k, steps, lr = 4, 3, 3, 0.05
	for _, n := range []int{2, 4} {
		rng := rand.New(rand.NewSource(int64(10 + n)))
		w0 := randTT(rng, k, 1)
		xs, ys := make([]tt, n), make([]tt, n)
		allX, allY := newTT(n*rows, k), newTT(n*rows, 1)
		for d := range n {
			xs[d], ys[d] = randTT(rng, rows, k), randTT(rng, rows, 1)
			copy(allX.data[d*rows*k:], xs[d].data)
			copy(allY.data[d*rows:], ys[d].data)
		}
		step := func(reduce bool) func(ctx *context.Context, x, y *Node) *Node {
			return func(ctx *context.Context, x, y *Node) *Node {
				g := x.Graph()
				v := ctx.VariableWithValue("w", w0.tensor())
				w := v.ValueGraph(g)
				diff := Sub(Dot(x, w), y)
				loss := ReduceAllSum(Mul(diff, diff))
				grad := Gradient(loss, w)[0]
				if reduce {
					grad = g.Distributed().AllReduceOne(grad, backends.ReduceOpSum)
					loss = g.Distributed().AllReduceOne(loss, backends.ReduceOpSum)
				}
				// A variable first read after the AllReduces: its parameter comes after the hidden
				// device index among simplego's inputs.
				rate := ctx.VariableWithValue("lr", lr).ValueGraph(g)
				v.SetValueGraph(Sub(w, Mul(grad, rate)))
				return loss
			}
		}

		refCtx := context.New()
		ref, err := context.NewExec(testBackend(t), refCtx, step(false))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.New()
		spmd, err := context.NewExec(devicesBackend(t, n), ctx, step(true))
		if err != nil {
			t.Fatal(err)
		}
		spmd.SPMD(replicaMesh(t, n))
		for s := range steps {
			wantLoss, err := ref.Exec(allX.tensor(), allY.tensor())
			if err != nil {
				t.Fatal(err)
			}
			args := make([]any, 0, 2*n)
			for d := range n {
				args = append(args, xs[d].tensor(), ys[d].tensor())
			}
			losses, err := spmd.Exec(args...)
			if err != nil {
				t.Fatalf("devices=%d step %d: %+v", n, s, err)
			}
			for d, l := range losses {
				assertClose(t, "loss", fromTensor(t, l), fromTensor(t, wantLoss[0]), 1e-12)
				if l.Value() != losses[0].Value() {
					t.Errorf("devices=%d step %d: device #%d's loss differs", n, s, d)
				}
			}
		}
		wantW, err := refCtx.GetVariable("w").Value()
		if err != nil {
			t.Fatal(err)
		}
		dist, err := ctx.GetVariable("w").DistributedValue()
		if err != nil {
			t.Fatal(err)
		}
		shards := dist.Shards()
		if len(shards) != n {
			t.Fatalf("devices=%d: variable has %d shards", n, len(shards))
		}
		for d, shard := range shards {
			if dev, err := shard.Device(); err != nil || int(dev) != d {
				t.Errorf("devices=%d: shard #%d on device %d (%v)", n, d, dev, err)
			}
			assertClose(t, "weights after 3 steps", fromTensor(t, shard), fromTensor(t, wantW), 1e-12)
			if !slices.Equal(tensors.MustCopyFlatData[float64](shard), tensors.MustCopyFlatData[float64](shards[0])) {
				t.Errorf("devices=%d: device #%d's weights differ from device #0's", n, d)
			}
		}
		if w := fromTensor(t, shards[0]); math.Abs(w.data[0]-w0.data[0]) < 1e-9 {
			t.Errorf("devices=%d: the weights did not move", n)
		}
		ref.Finalize()
		spmd.Finalize()
	}
}

// TestSPMDConvGradients runs a float32 convolution's forward and kernel gradient on 4 devices at once
// (the fused GEMM convolution and the element-wise kernels running concurrently on every device), the
// gradient all-reduced, against the one-device gradient of the joined batch.
func TestSPMDConvGradients(t *testing.T) {
	const n, batch = 4, 2
	rng := rand.New(rand.NewSource(5))
	kernel := randTT(rng, 3, 3, 4, 8)
	xs := make([]tt, n)
	all := newTT(n*batch, 12, 12, 4)
	for d := range xs {
		xs[d] = randTT(rng, batch, 12, 12, 4)
		copy(all.data[d*len(xs[d].data):], xs[d].data)
	}
	grad := func(x, k *Node) *Node {
		y := Convolve(x, k).Strides(1).PadSame().Done()
		return Gradient(ReduceAllSum(Mul(Max(y, ZerosLike(y)), y)), k)[0]
	}
	f32 := func(x tt) *tensors.Tensor { return toF32Tensor(x) }
	oneExec, err := NewExec(testBackend(t), grad)
	if err != nil {
		t.Fatal(err)
	}
	defer oneExec.Finalize()
	want, err := oneExec.Exec(f32(all), f32(kernel))
	if err != nil {
		t.Fatal(err)
	}
	exec, err := NewExec(devicesBackend(t, n), func(x, k *Node) *Node {
		return x.Graph().Distributed().AllReduceOne(grad(x, k), backends.ReduceOpSum)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	exec.SPMD(replicaMesh(t, n))
	var args []any
	for d := range n {
		args = append(args, f32(xs[d]), f32(kernel))
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	wantFlat := tensors.MustCopyFlatData[float32](want[0])
	maxWant := 0.0
	for _, v := range wantFlat {
		maxWant = max(maxWant, math.Abs(float64(v)))
	}
	for d, out := range outs {
		for i, v := range tensors.MustCopyFlatData[float32](out) {
			if diff := math.Abs(float64(v - wantFlat[i])); diff > 1e-5*maxWant {
				t.Fatalf("device #%d: kernel gradient [%d] = %g, one device %g", d, i, v, wantFlat[i])
			}
		}
	}
}

// allReduceProgram builds, on the backend's own API, an SPMD program over n devices that all-reduces
// a float32 vector of size 3.
func allReduceProgram(t *testing.T, b backends.Backend, n int) backends.Executable {
	t.Helper()
	builder := b.Builder(t.Name())
	if err := builder.DistributedSPMD(n); err != nil {
		t.Fatal(err)
	}
	x, err := builder.Parameter("x", shapes.Make(dtypes.Float32, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	groups := [][]int{make([]int, n)}
	for i := range n {
		groups[0][i] = n - 1 - i // Any order of all devices.
	}
	y, err := builder.AllReduce([]backends.Op{x}, backends.ReduceOpSum, groups)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := builder.Compile(y, nil)
	if err != nil {
		t.Fatal(err)
	}
	if names, _ := exec.Inputs(); len(names) != 1 || names[0] != "x" {
		t.Errorf("Inputs() = %v: the device index must stay hidden", names)
	}
	return exec
}

// executeWithin runs Execute, failing the test if it doesn't return within a minute (a hang).
func executeWithin(t *testing.T, exec backends.Executable, inputs []backends.Buffer, donate []bool) ([]backends.Buffer, error) {
	t.Helper()
	type result struct {
		outs []backends.Buffer
		err  error
	}
	done := make(chan result, 1)
	go func() {
		outs, err := exec.Execute(inputs, donate, 0)
		done <- result{outs, err}
	}()
	select {
	case r := <-done:
		return r.outs, r.err
	case <-time.After(time.Minute):
		t.Fatal("Execute hung")
	}
	return nil, nil
}

func TestSPMDDeviceFailureDoesNotHang(t *testing.T) {
	const n = 4
	b := devicesBackend(t, n)
	exec := allReduceProgram(t, b, n)
	defer exec.Finalize()
	inputs := func(badDevice, badSize int) []backends.Buffer {
		var bufs []backends.Buffer
		for d := range n {
			size := 3
			if d == badDevice {
				size = badSize
			}
			flat := make([]float32, size)
			for i := range flat {
				flat[i] = float32(d + i)
			}
			buf, err := b.BufferFromFlatData(backends.DeviceNum(d), flat, shapes.Make(dtypes.Float32, size))
			if err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, buf)
		}
		return bufs
	}
	// Device 2 fails at once (wrong input shape) while the others wait for it in the AllReduce.
	_, err := executeWithin(t, exec, inputs(2, 4), nil)
	if err == nil || !strings.Contains(err.Error(), "device #2") {
		t.Fatalf("a failing device: error %v, want one naming device #2", err)
	}
	// The executable still works afterwards, with donated inputs.
	ins := inputs(-1, 0)
	outs, err := executeWithin(t, exec, ins, []bool{true, true, true, true})
	if err != nil {
		t.Fatal(err)
	}
	for d, out := range outs {
		got := make([]float32, 3)
		if err := b.BufferToFlatData(out, got); err != nil || !slices.Equal(got, []float32{6, 10, 14}) {
			t.Errorf("device #%d: %v (%v), want [6 10 14]", d, got, err)
		}
		if dev, _ := b.BufferDeviceNum(out); int(dev) != d {
			t.Errorf("output #%d on device %d", d, dev)
		}
	}
	if _, err := b.BufferShape(ins[0]); err == nil {
		t.Errorf("a donated input is still usable")
	}
	// An input on the wrong device is refused.
	ins = inputs(-1, 0)
	ins[0], ins[1] = ins[1], ins[0]
	if _, err := executeWithin(t, exec, ins, nil); err == nil || !strings.Contains(err.Error(), "is on device 1") {
		t.Errorf("an input on another device: error %v", err)
	}
}

func TestSPMDOneDevice(t *testing.T) {
	b := testBackend(t)
	exec := allReduceProgram(t, b, 1)
	defer exec.Finalize()
	in, err := b.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 3))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := executeWithin(t, exec, []backends.Buffer{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 3)
	if len(outs) != 1 || b.BufferToFlatData(outs[0], got) != nil || !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("AllReduce over one device: %v, want its input", got)
	}
	if _, ok := outs[0].(*simplego.Buffer); !ok {
		t.Errorf("one device: output is %T, want simplego's buffer", outs[0])
	}
	if err := b.Builder("x").DistributedSPMD(2); err == nil {
		t.Errorf("an SPMD program over 2 devices was accepted by a one-device backend")
	}
}

func TestSPMDRefusals(t *testing.T) {
	b := devicesBackend(t, 2)
	builder := b.Builder(t.Name())
	x, err := builder.Parameter("x", shapes.Make(dtypes.Float32, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := builder.AllReduce([]backends.Op{x}, backends.ReduceOpSum, nil); err == nil {
		t.Errorf("AllReduce outside an SPMD program accepted")
	}
	if err := builder.DistributedAutoSharding(); err == nil || !strings.Contains(err.Error(), "SPMD") {
		t.Errorf("DistributedAutoSharding: %v", err)
	}
	if err := builder.DistributedSPMD(3); err == nil {
		t.Errorf("SPMD over 3 devices of 2 accepted")
	}
	if err := builder.DistributedSPMD(2); err != nil {
		t.Fatal(err)
	}
	if err := builder.DeviceAssignment(1, 1); err == nil {
		t.Errorf("a device assigned twice accepted")
	}
	if _, err := builder.AllReduce([]backends.Op{x}, backends.ReduceOpSum, [][]int{{0}, {1}}); err == nil ||
		!strings.Contains(err.Error(), "all 2 devices") {
		t.Errorf("AllReduce over groups [[0] [1]]: %v", err)
	}
	bf, err := builder.Parameter("bf", shapes.Make(dtypes.BFloat16, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := builder.AllReduce([]backends.Op{bf}, backends.ReduceOpSum, nil); err == nil ||
		!strings.Contains(err.Error(), "not implemented on the pure-Go backend") {
		t.Errorf("AllReduce of bfloat16: %v", err)
	}
}

// TestSPMDDeviceAssignment runs an SPMD program on devices 3 and 1 of 4, and a one-device program
// pinned to device 2.
func TestSPMDDeviceAssignment(t *testing.T) {
	b := devicesBackend(t, 4)
	exec, err := NewExec(b, func(x *Node) *Node {
		return x.Graph().Distributed().AllReduceOne(x, backends.ReduceOpMax)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	exec.SPMD(replicaMesh(t, 2)).WithDeviceAssignment([]backends.DeviceNum{3, 1})
	outs, err := exec.Exec([]float64{1, 5}, []float64{4, 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, dev := range []backends.DeviceNum{3, 1} {
		if got, _ := outs[i].Device(); got != dev || !slices.Equal(outs[i].Value().([]float64), []float64{4, 5}) {
			t.Errorf("output #%d: %v on device %d, want [4 5] on device %d", i, outs[i].Value(), got, dev)
		}
	}

	single, err := NewExec(b, func(x *Node) *Node { return Neg(x) })
	if err != nil {
		t.Fatal(err)
	}
	defer single.Finalize()
	for _, dev := range []backends.DeviceNum{0, 2} {
		out, _, err := single.ExecWithGraphOnDevice(dev, []float64{1, 2}) // (GoMLX v0.26's ExecOnDevice ignores dev.)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := out[0].Device(); got != dev || !slices.Equal(out[0].Value().([]float64), []float64{-1, -2}) {
			t.Errorf("one-device program on device %d: %v on device %d", dev, out[0].Value(), got)
		}
	}
}
