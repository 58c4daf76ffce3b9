package gobackend

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// SPMD programs (GoMLX's distributed.SPMD strategy: graph.Exec.SPMD(mesh)). The builder compiles the
// per-device program once; its Execute takes the inputs of every device (device-major) and runs the
// program once per device, concurrently, each device on its own buffers, and returns every device's
// outputs in the same order. The program's collectives are explicit: AllReduce (sum, product, max, min)
// over all of the program's devices.
//
// How an AllReduce meets across devices. simplego runs a node with (backend, node, inputs) only, so an
// executor can't tell which device it runs for. The builder therefore gives the program a hidden
// scalar int32 parameter, the device index, which the caller never sees (Inputs hides it, Execute
// inserts it), and every AllReduce node reads it as its second input. The node's data points to the
// executable's collectives; each execution opens a collectiveRun there. The first device to reach an
// AllReduce node opens a meeting for it; every device deposits its operand and waits; the last to
// arrive computes, element by element, acc = x₀; acc = acc ⊕ x₁; …; acc ⊕ x_{R−1} in the dtype's own
// arithmetic (the same order whatever the arrival order), writes acc into every device's output (in
// place into a device's operand when its execution owns it) and releases them. Every device gets the
// same bits, and reruns get the same bits. If one device's execution fails, the run is aborted and
// the devices waiting in a meeting return an error instead of waiting forever.
//
// An SPMD executable runs one execution at a time (the meetings belong to the execution in flight).
// Each device executes its ops in sequence (ops_sequential, which devices=R requires), so a device
// waiting in a meeting holds no worker that another device needs; the kernels inside each op (GEMM,
// element-wise loops) use their own goroutines, and the R devices share the cores.

// DistributedSPMD makes the program an SPMD program over numDevices of the backend's devices.
func (b *goBuilder) DistributedSPMD(numDevices int) error {
	if b.spmd {
		return errors.New("DistributedSPMD: the program is already an SPMD program")
	}
	if numDevices < 1 || numDevices > b.backend.NumDevices() {
		return errors.Errorf("SPMD program over %d devices: the pure-Go backend has %d (backend config go:devices=R)",
			numDevices, b.backend.NumDevices())
	}
	b.spmd, b.programDevices = true, numDevices
	b.collectives = &collectives{}
	return nil
}

// DistributedAutoSharding is refused: there is no partitioner here.
func (b *goBuilder) DistributedAutoSharding(...backends.Mesh) error {
	return errors.New("the pure-Go backend has no automatic partitioner (XLA Shardy): write the program per device, " +
		"with its collectives (AllReduce), and run it with graph.Exec.SPMD")
}

// DeviceAssignment fixes the devices the program runs on: one per device of an SPMD program, one for
// any other program (which otherwise runs on the device Execute is given).
func (b *goBuilder) DeviceAssignment(devices ...backends.DeviceNum) error {
	if len(devices) != b.programDevices {
		return errors.Errorf("device assignment %v: the program runs on %d device(s)", devices, b.programDevices)
	}
	for i, d := range devices {
		if err := b.backend.checkDevice(d); err != nil {
			return errors.WithMessagef(err, "device assignment %v", devices)
		}
		if slices.Contains(devices[:i], d) {
			return errors.Errorf("device assignment %v: device %d appears twice", devices, d)
		}
	}
	b.assignment = slices.Clone(devices)
	return nil
}

// Parameter creates an input of the program. In an SPMD program shapes are one device's and a sharding
// spec only says how the caller split the data, so it is dropped.
func (b *goBuilder) Parameter(name string, shape shapes.Shape, sharding *backends.ShardingSpec) (backends.Op, error) {
	if b.spmd {
		sharding = nil
	}
	op, err := b.Builder.Parameter(name, shape, sharding)
	if err == nil {
		b.numParams++
	}
	return op, err
}

// AllReduce reduces each operand over all the program's devices; every device gets the result.
func (b *goBuilder) AllReduce(operands []backends.Op, reduction backends.ReduceOpType, replicaGroups [][]int) ([]backends.Op, error) {
	if !b.spmd {
		return nil, errors.New("AllReduce needs an SPMD program (graph.Exec.SPMD, Graph.SetSPMD)")
	}
	if !collectivesInstalled {
		return nil, errors.Errorf("AllReduce on the pure-Go backend: simplego's executor slot for %s is taken or its node fields "+
			"moved (TestSimplegoInternals says which)", allReduceOpType)
	}
	switch reduction {
	case backends.ReduceOpSum, backends.ReduceOpProduct, backends.ReduceOpMax, backends.ReduceOpMin:
	default:
		return nil, errors.Errorf("AllReduce with reduction %s: the pure-Go backend does sum, product, max and min", reduction)
	}
	if err := checkReplicaGroups(replicaGroups, b.programDevices); err != nil {
		return nil, err
	}
	if b.deviceParam == nil {
		b.deviceParamIdx = b.numParams
		p, err := b.Parameter("#spmd_device_index", shapes.Make(dtypes.Int32), nil)
		if err != nil {
			return nil, err
		}
		b.deviceParam = p
	}
	results := make([]backends.Op, len(operands))
	for i, x := range operands {
		shape, err := b.OpShape(x)
		if err != nil {
			return nil, err
		}
		if !allReducible(shape.DType) {
			return nil, errors.Errorf("AllReduce of %s: not implemented on the pure-Go backend (floats and integers of 32 "+
				"and 64 bits, and 8 and 16-bit integers)", shape)
		}
		placeholder, err := b.Builder.Identity(x) // A fresh node of x's shape, which becomes the AllReduce node.
		if err != nil {
			return nil, err
		}
		n, okN := placeholder.(*simplego.Node)
		xn, okX := x.(*simplego.Node)
		dn, okD := b.deviceParam.(*simplego.Node)
		if !okN || !okX || !okD {
			return nil, errors.Errorf("AllReduce: unexpected node types %T, %T, %T", placeholder, x, b.deviceParam)
		}
		setNodeOpData(n, allReduceOpType, &allReduceSpec{collectives: b.collectives, reduction: reduction})
		setNodeInputs(n, []*simplego.Node{xn, dn})
		results[i] = n
	}
	return results, nil
}

// checkReplicaGroups accepts no groups or one group of all devices (in any order): the reduction is
// always in device order.
func checkReplicaGroups(groups [][]int, numDevices int) error {
	if len(groups) == 0 {
		return nil
	}
	if len(groups) == 1 && len(groups[0]) == numDevices {
		sorted := slices.Sorted(slices.Values(groups[0]))
		all := true
		for i, d := range sorted {
			all = all && d == i
		}
		if all {
			return nil
		}
	}
	return errors.Errorf("AllReduce over replica groups %v: the pure-Go backend reduces over all %d devices of the program "+
		"only (one group [0 … %d])", groups, numDevices, numDevices-1)
}

// allReducible lists the dtypes AllReduce reduces.
func allReducible(dtype dtypes.DType) bool {
	switch dtype {
	case dtypes.Float32, dtypes.Float64, dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64,
		dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64:
		return true
	}
	return false
}

// Compile compiles the program (fuse.go); programs of an SPMD builder or of a multi-device backend get
// a deviceExecutable around simplego's.
func (b *goBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	if b.spmd {
		shardings = nil // See Parameter.
	}
	exec, err := b.compileFused(outputs, shardings)
	if err != nil || (!b.spmd && !b.backend.multiDevice()) {
		return exec, err
	}
	names, _ := exec.Inputs()
	e := &deviceExecutable{backend: b.backend, inner: exec, numDevices: b.programDevices, assignment: b.assignment,
		numInputs: len(names), deviceParamIdx: -1, collectives: b.collectives}
	if b.deviceParam != nil {
		e.numInputs--
		e.deviceParamIdx = b.deviceParamIdx
		for d := range b.programDevices {
			buf, err := b.backend.Backend.BufferFromFlatData(0, []int32{int32(d)}, shapes.Make(dtypes.Int32))
			if err != nil {
				return nil, err
			}
			e.deviceIndex = append(e.deviceIndex, buf)
		}
	}
	return e, nil
}

// deviceExecutable runs a compiled program on the backend's devices: an SPMD program on each of its
// devices, any other on one.
type deviceExecutable struct {
	backend        *Backend
	inner          backends.Executable // simplego's.
	numDevices     int                 // The program's devices.
	assignment     []backends.DeviceNum
	numInputs      int               // Per device, as the caller sees them.
	deviceParamIdx int               // The hidden device-index parameter among simplego's inputs; -1 if none.
	deviceIndex    []backends.Buffer // Its value for each of the program's devices.
	collectives    *collectives      // nil unless SPMD.
	mu             sync.Mutex        // One SPMD execution at a time.
}

// Finalize releases the program.
func (e *deviceExecutable) Finalize() {
	e.inner.Finalize()
	for _, buf := range e.deviceIndex {
		_ = e.backend.Backend.BufferFinalize(buf)
	}
	e.deviceIndex = nil
}

// Inputs are one device's parameters, without the hidden device index.
func (e *deviceExecutable) Inputs() ([]string, []shapes.Shape) {
	names, inputShapes := e.inner.Inputs()
	if e.deviceParamIdx >= 0 {
		names = slices.Delete(slices.Clone(names), e.deviceParamIdx, e.deviceParamIdx+1)
		inputShapes = slices.Delete(slices.Clone(inputShapes), e.deviceParamIdx, e.deviceParamIdx+1)
	}
	return names, inputShapes
}

// Outputs are one device's outputs.
func (e *deviceExecutable) Outputs() []shapes.Shape { return e.inner.Outputs() }

// devices returns the device each of the program's devices runs on.
func (e *deviceExecutable) devices(defaultDevice backends.DeviceNum) ([]backends.DeviceNum, error) {
	switch {
	case e.assignment != nil:
		return e.assignment, nil
	case e.numDevices == 1:
		return []backends.DeviceNum{defaultDevice}, e.backend.checkDevice(defaultDevice)
	}
	devices := make([]backends.DeviceNum, e.numDevices)
	for d := range devices {
		devices[d] = backends.DeviceNum(d)
	}
	return devices, nil
}

// Execute runs the program on each of its devices with that device's inputs (inputs and donate are
// device-major: device 0's parameters, then device 1's, …) and returns the outputs the same way.
func (e *deviceExecutable) Execute(inputs []backends.Buffer, donate []bool, defaultDevice backends.DeviceNum) ([]backends.Buffer, error) {
	n, p := e.numDevices, e.numInputs
	if len(inputs) != n*p {
		return nil, errors.Errorf("Execute: %d inputs, want %d (%d device(s) × %d parameters)", len(inputs), n*p, n, p)
	}
	if donate == nil {
		donate = make([]bool, len(inputs))
	}
	devices, err := e.devices(defaultDevice)
	if err != nil {
		return nil, err
	}
	perDevice := make([][]backends.Buffer, n)
	perDonate := make([][]bool, n)
	for d := range n {
		ins := make([]backends.Buffer, 0, p+1)
		for i := range p {
			sb, dev, err := e.backend.unwrapBuffer(inputs[d*p+i])
			if err != nil {
				return nil, errors.WithMessagef(err, "Execute: input #%d of device #%d", i, d)
			}
			if dev != devices[d] {
				return nil, errors.Errorf("Execute: input #%d of device #%d (device %d) is on device %d", i, d, devices[d], dev)
			}
			ins = append(ins, sb)
		}
		don := slices.Clone(donate[d*p : (d+1)*p])
		if e.deviceParamIdx >= 0 {
			ins = slices.Insert(ins, e.deviceParamIdx, e.deviceIndex[d])
			don = slices.Insert(don, e.deviceParamIdx, false)
		}
		perDevice[d], perDonate[d] = ins, don
	}
	defer e.invalidateDonated(inputs, donate)

	var outs [][]backends.Buffer
	if e.collectives == nil && n == 1 {
		var out []backends.Buffer
		out, err = e.inner.Execute(perDevice[0], perDonate[0], 0)
		outs = [][]backends.Buffer{out}
	} else {
		outs, err = e.runDevices(perDevice, perDonate)
	}
	if err != nil {
		return nil, err
	}
	outputs := make([]backends.Buffer, 0, n*len(outs[0]))
	for d, out := range outs {
		for _, buf := range out {
			sb, ok := buf.(*simplego.Buffer)
			if !ok {
				return nil, errors.Errorf("Execute: simplego returned a %T", buf)
			}
			outputs = append(outputs, e.backend.wrapBuffer(sb, devices[d]))
		}
	}
	return outputs, nil
}

// invalidateDonated marks the donated input buffers as used up (on a multi-device backend, where
// buffers are the backend's own).
func (e *deviceExecutable) invalidateDonated(inputs []backends.Buffer, donate []bool) {
	if !e.backend.multiDevice() {
		return
	}
	for i, buf := range inputs {
		if db, ok := buf.(*deviceBuffer); ok && donate[i] {
			db.buf = nil
		}
	}
}

// runDevices executes the program once per device, concurrently, within one collectiveRun.
func (e *deviceExecutable) runDevices(inputs [][]backends.Buffer, donate [][]bool) ([][]backends.Buffer, error) {
	n := len(inputs)
	run := newCollectiveRun(n)
	if e.collectives != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.collectives.run.Store(run)
		defer e.collectives.run.Store(nil)
	}
	outs := make([][]backends.Buffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for d := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[d] = errors.Errorf("device #%d panicked: %v", d, r)
					run.abort()
				}
			}()
			outs[d], errs[d] = e.inner.Execute(inputs[d], donate[d], 0)
			if errs[d] != nil {
				run.abort()
			}
		}()
	}
	wg.Wait()
	// Report the failure that aborted the run, not the devices it released.
	var firstErr error
	for d, err := range errs {
		if err == nil {
			continue
		}
		err = errors.WithMessagef(err, "device #%d of %d", d, n)
		if !errors.Is(err, errRunAborted) {
			return nil, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return outs, nil
}

// collectives is an SPMD program's link between its executable and its AllReduce nodes: the
// execution in flight.
type collectives struct {
	run atomic.Pointer[collectiveRun]
}

// allReduceSpec is an AllReduce node's data.
type allReduceSpec struct {
	collectives *collectives
	reduction   backends.ReduceOpType
}

// errRunAborted is returned by the devices released from a meeting because another device failed.
var errRunAborted = errors.New("aborted: another device of the SPMD program failed")

// collectiveRun is one execution of an SPMD program: its meetings, one per AllReduce node.
type collectiveRun struct {
	numDevices int
	mu         sync.Mutex
	meetings   map[*simplego.Node]*meeting
	aborted    chan struct{}
	abortOnce  sync.Once
}

func newCollectiveRun(numDevices int) *collectiveRun {
	return &collectiveRun{numDevices: numDevices, meetings: map[*simplego.Node]*meeting{}, aborted: make(chan struct{})}
}

// abort releases every device waiting in a meeting, and any that arrives later.
func (r *collectiveRun) abort() { r.abortOnce.Do(func() { close(r.aborted) }) }

// meeting is where the devices bring their operands of one AllReduce node.
type meeting struct {
	arrived int
	inputs  []*simplego.Buffer
	owned   []bool
	outputs []*simplego.Buffer // Set, with err, by the last device to arrive, before done is closed.
	err     error
	done    chan struct{}
}

// allReduce brings device's operand to node's meeting, waits for the other devices, and returns the
// device's result.
func (r *collectiveRun) allReduce(backend *simplego.Backend, node *simplego.Node, reduction backends.ReduceOpType,
	device int, input *simplego.Buffer, owned bool) (*simplego.Buffer, error) {
	if device < 0 || device >= r.numDevices {
		return nil, errors.Errorf("AllReduce: device index %d out of %d", device, r.numDevices)
	}
	r.mu.Lock()
	m := r.meetings[node]
	if m == nil {
		m = &meeting{inputs: make([]*simplego.Buffer, r.numDevices), owned: make([]bool, r.numDevices), done: make(chan struct{})}
		r.meetings[node] = m
	}
	if m.inputs[device] != nil {
		r.mu.Unlock()
		return nil, errors.Errorf("AllReduce: device #%d reached the same AllReduce twice in one execution", device)
	}
	m.inputs[device], m.owned[device] = input, owned
	m.arrived++
	last := m.arrived == r.numDevices
	r.mu.Unlock()
	if last {
		m.outputs, m.err = reduceAcrossDevices(backend, reduction, m.inputs, m.owned)
		close(m.done)
	} else {
		select {
		case <-m.done:
		case <-r.aborted:
			return nil, errRunAborted
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	return m.outputs[device], nil
}

// execAllReduce is simplego's executor for AllReduce nodes (inputs: the operand, the device index).
func execAllReduce(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	spec, ok := nodeDataOf(node).(*allReduceSpec)
	if !ok || len(inputs) != 2 {
		return nil, errors.New("AllReduce node without its parameters")
	}
	flat, err := backend.BufferData(inputs[1])
	if err != nil {
		return nil, err
	}
	index, ok := flat.([]int32)
	if !ok || len(index) != 1 {
		return nil, errors.Errorf("AllReduce: device index input is %T", flat)
	}
	run := spec.collectives.run.Load()
	if run == nil {
		return nil, errors.New("AllReduce executed outside an SPMD execution")
	}
	out, err := run.allReduce(backend, node, spec.reduction, int(index[0]), inputs[0], inputsOwned[0])
	if err == nil && out == inputs[0] {
		inputs[0] = nil // Tells simplego the operand's buffer became the output.
	}
	return out, err
}

var (
	installCollectivesOnce sync.Once
	collectivesInstalled   bool // execAllReduce is in simplego's table.
)

// installCollectives puts execAllReduce in simplego's empty AllReduce slot (once).
func installCollectives() {
	installCollectivesOnce.Do(func() {
		if fuseFieldsOK && sgNodeExecutors[allReduceOpType] == nil {
			sgNodeExecutors[allReduceOpType] = execAllReduce
			collectivesInstalled = true
		}
	})
}

// reduceAcrossDevices computes the reduction of the devices' operands, in device order, into one
// output per device: the operand itself where owned, else a new buffer.
func reduceAcrossDevices(backend *simplego.Backend, reduction backends.ReduceOpType, inputs []*simplego.Buffer, owned []bool) ([]*simplego.Buffer, error) {
	n := len(inputs)
	shape, err := backend.BufferShape(inputs[0])
	if err != nil {
		return nil, err
	}
	outputs := make([]*simplego.Buffer, n)
	ins, outs := make([]any, n), make([]any, n)
	for d, in := range inputs {
		s, err := backend.BufferShape(in)
		if err != nil {
			return nil, err
		}
		if !s.Equal(shape) {
			return nil, errors.Errorf("AllReduce: device #%d brings %s, device #0 %s", d, s, shape)
		}
		outputs[d] = in
		if !owned[d] {
			outputs[d] = backend.NewBuffer(shape)
		}
		if ins[d], err = backend.BufferData(in); err != nil {
			return nil, err
		}
		if outs[d], err = backend.BufferData(outputs[d]); err != nil {
			return nil, err
		}
	}
	switch ins[0].(type) {
	case []float32:
		reduceInto(reduction, typed[float32](ins), typed[float32](outs))
	case []float64:
		reduceInto(reduction, typed[float64](ins), typed[float64](outs))
	case []int8:
		reduceInto(reduction, typed[int8](ins), typed[int8](outs))
	case []int16:
		reduceInto(reduction, typed[int16](ins), typed[int16](outs))
	case []int32:
		reduceInto(reduction, typed[int32](ins), typed[int32](outs))
	case []int64:
		reduceInto(reduction, typed[int64](ins), typed[int64](outs))
	case []uint8:
		reduceInto(reduction, typed[uint8](ins), typed[uint8](outs))
	case []uint16:
		reduceInto(reduction, typed[uint16](ins), typed[uint16](outs))
	case []uint32:
		reduceInto(reduction, typed[uint32](ins), typed[uint32](outs))
	case []uint64:
		reduceInto(reduction, typed[uint64](ins), typed[uint64](outs))
	default:
		return nil, errors.Errorf("AllReduce of %s: not implemented on the pure-Go backend", shape)
	}
	return outputs, nil
}

// reducible are the element types AllReduce reduces.
type reducible interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func typed[T reducible](flats []any) [][]T {
	out := make([][]T, len(flats))
	for i, f := range flats {
		out[i] = f.([]T)
	}
	return out
}

// reduceInto sets every outs[d][i] to ins[0][i] ⊕ ins[1][i] ⊕ … in that order, split over the cores.
// Each element's inputs are all read before its outputs are written, so an output may be an input.
func reduceInto[T reducible](reduction backends.ReduceOpType, ins, outs [][]T) {
	body := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			acc := ins[0][i]
			switch reduction {
			case backends.ReduceOpSum:
				for _, x := range ins[1:] {
					acc += x[i]
				}
			case backends.ReduceOpProduct:
				for _, x := range ins[1:] {
					acc *= x[i]
				}
			case backends.ReduceOpMax:
				for _, x := range ins[1:] {
					acc = max(acc, x[i])
				}
			case backends.ReduceOpMin:
				for _, x := range ins[1:] {
					acc = min(acc, x[i])
				}
			}
			for _, o := range outs {
				o[i] = acc
			}
		}
	}
	size := len(ins[0])
	threads := runtime.GOMAXPROCS(0)
	chunks := min(size/elementwiseGrain, 4*threads)
	if threads == 1 || chunks <= 1 || !kernels.WorthSplitting(float64(size)*kernels.ElementNs) {
		body(0, size)
		return
	}
	kernels.ParallelChunks(kernels.SplitRange(size, chunks, 1), min(threads, chunks), body)
}
