//go:build cgo

package pjrtplugin

import (
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"
)

// The emit backend is GoMLX's xla backend with no plugin behind it: graphs are built by go-xla's pure-Go
// StableHLO builder exactly as for a real PJRT device, and Compile hands back the module text instead of
// compiling it.
//
// How: the backend is GoMLX's xla.Backend with stand-ins for its plugin and client (xla_internals.go),
// never called: EmitBackend overrides every method that would reach them. Each xla.Builder is wrapped so
// that Compile, after xla's own Compile has finished the module and failed at the missing client
// ("misconfigured CompileConfig"), reads the module text out of the builder.

// EmitAvailable says whether this build can emit StableHLO (the xla backend needs cgo to be linked,
// even though emitting loads no plugin).
const EmitAvailable = true

// EmitBackend builds XLA programs for numDevices devices without any device or plugin. Buffers are
// placeholders holding only a shape; every Compile records the StableHLO module and fails with
// ErrEmitted, so nothing ever runs.
type EmitBackend struct {
	*xla.Backend
	numDevices int

	mu      sync.Mutex
	modules []Module
}

var _ backends.Backend = (*EmitBackend)(nil)

// NewEmitBackend returns a stand-in xla backend with numDevices (>= 1) devices.
func NewEmitBackend(numDevices int) (*EmitBackend, error) {
	if numDevices < 1 {
		return nil, errors.Errorf("emit backend: %d devices, want >= 1", numDevices)
	}
	inner, err := newStandInXLABackend(numDevices)
	if err != nil {
		return nil, err
	}
	return &EmitBackend{Backend: inner, numDevices: numDevices}, nil
}

// Module is one emitted StableHLO program.
type Module struct {
	Name string
	Text string
}

// ErrEmitted is what Compile returns on the emit backend once the module is recorded.
var ErrEmitted = errors.New("StableHLO module emitted (the emit backend compiles nothing)")

// Modules returns the modules emitted so far, in order.
func (b *EmitBackend) Modules() []Module {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Module(nil), b.modules...)
}

// Name implements backends.Backend.
func (b *EmitBackend) Name() string { return "xla" }

// String implements backends.Backend.
func (b *EmitBackend) String() string { return b.Name() }

// Description implements backends.Backend.
func (b *EmitBackend) Description() string {
	return "xla (StableHLO emit only: no PJRT plugin, nothing runs)"
}

// NumDevices implements backends.Backend.
func (b *EmitBackend) NumDevices() int { return b.numDevices }

// DeviceDescription implements backends.Backend.
func (b *EmitBackend) DeviceDescription(d backends.DeviceNum) string {
	return "emit-only device"
}

// Capabilities implements backends.Backend: the xla backend's.
func (b *EmitBackend) Capabilities() backends.Capabilities { return xla.Capabilities }

// Finalize implements backends.Backend: there is nothing to release (the stand-in plugin and client
// must never be destroyed).
func (b *EmitBackend) Finalize() {}

// IsFinalized implements backends.Backend.
func (b *EmitBackend) IsFinalized() bool { return false }

// Builder implements backends.Backend: xla's builder, whose Compile records the module.
func (b *EmitBackend) Builder(name string) backends.Builder {
	inner := withSPMDParameters(b.Backend.Builder(name))
	if inner == nil {
		return nil
	}
	return &emitBuilder{Builder: inner, backend: b}
}

type emitBuilder struct {
	backends.Builder
	backend *EmitBackend
}

// Compile finishes the module with xla's Compile (which fails at the missing PJRT client, after the
// module is built), records its text and returns ErrEmitted. A module that xla's Compile rejects before
// building it (bad output shardings) is reported with xla's error.
func (eb *emitBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	compileErr := func() (err error) {
		// Distributed programs reach the client for a default device assignment: the zero client fails
		// there with a nil dereference in Go code (before any C call), after the module is built.
		defer func() {
			if r := recover(); r != nil {
				err = errors.Errorf("xla Compile panicked: %v", r)
			}
		}()
		_, err = eb.Builder.Compile(outputs, shardings)
		return err
	}()
	xb := eb.Builder
	if sb, ok := xb.(*spmdBuilder); ok {
		xb = sb.Builder
	}
	text, err := moduleText(xb)
	if err != nil {
		if compileErr != nil {
			err = errors.WithMessagef(err, "after xla Compile failed with %v", compileErr)
		}
		return nil, err
	}
	eb.backend.mu.Lock()
	eb.backend.modules = append(eb.backend.modules, Module{Name: eb.Name(), Text: text})
	eb.backend.mu.Unlock()
	return nil, ErrEmitted
}

// emitBuffer is a placeholder for an argument: the graph needs only its shape.
type emitBuffer struct{ shape shapes.Shape }

// HasSharedBuffers implements backends.DataInterface.
func (b *EmitBackend) HasSharedBuffers() bool { return false }

// BufferFromFlatData implements backends.DataInterface: a placeholder with the shape, the data is dropped.
func (b *EmitBackend) BufferFromFlatData(_ backends.DeviceNum, _ any, shape shapes.Shape) (backends.Buffer, error) {
	return &emitBuffer{shape: shape.Clone()}, nil
}

// BufferShape implements backends.DataInterface.
func (b *EmitBackend) BufferShape(buffer backends.Buffer) (shapes.Shape, error) {
	eb, ok := buffer.(*emitBuffer)
	if !ok {
		return shapes.Invalid(), errors.Errorf("emit backend: buffer %T is not from this backend", buffer)
	}
	return eb.shape, nil
}

// BufferDeviceNum implements backends.DataInterface.
func (b *EmitBackend) BufferDeviceNum(backends.Buffer) (backends.DeviceNum, error) { return 0, nil }

// BufferFinalize implements backends.DataInterface.
func (b *EmitBackend) BufferFinalize(backends.Buffer) error { return nil }

// BufferToFlatData implements backends.DataInterface: placeholders hold no data.
func (b *EmitBackend) BufferToFlatData(backends.Buffer, any) error {
	return errors.New("emit backend: buffers hold no data")
}

// BufferCopyToDevice implements backends.DataInterface.
func (b *EmitBackend) BufferCopyToDevice(buffer backends.Buffer, _ backends.DeviceNum) (backends.Buffer, error) {
	return buffer, nil
}

// NewSharedBuffer implements backends.DataInterface.
func (b *EmitBackend) NewSharedBuffer(backends.DeviceNum, shapes.Shape) (backends.Buffer, any, error) {
	return nil, nil, errors.New("emit backend: no shared buffers")
}

// BufferData implements backends.DataInterface.
func (b *EmitBackend) BufferData(backends.Buffer) (any, error) {
	return nil, errors.New("emit backend: buffers hold no data")
}
