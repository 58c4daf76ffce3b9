package gobackend

import (
	"fmt"
	"runtime"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"
)

// The backend's devices. simplego has one device and its buffers don't say which device holds them.
// With devices=R (R > 1) the backend has R devices in this process, all in host memory and sharing
// the cores, and every buffer it hands out is a *deviceBuffer: simplego's buffer and its device, so
// that GoMLX's tensors (which keep one buffer per device) and executables see per-device buffers as on
// any multi-device backend. With one device (the default) buffers are simplego's own and every method
// below is simplego's, unchanged.

// deviceBuffer is a buffer of a multi-device backend. buf is nil once the buffer was finalized or
// donated to an execution, so a later use fails with a clear error.
type deviceBuffer struct {
	buf    *simplego.Buffer
	device backends.DeviceNum
}

// NumDevices is the number of devices, 1 unless the config says devices=R.
func (b *Backend) NumDevices() int { return max(b.numDevices, 1) }

// multiDevice says whether the backend has several devices (and its buffers are deviceBuffers).
func (b *Backend) multiDevice() bool { return b.numDevices > 1 }

// DeviceDescription describes a device; with several, it says they share the process's cores.
func (b *Backend) DeviceDescription(deviceNum backends.DeviceNum) string {
	if !b.multiDevice() {
		return b.Backend.DeviceDescription(deviceNum)
	}
	return fmt.Sprintf("cpu device %d of %d, in-process (host memory; the %d devices share this process's %d cores)",
		deviceNum, b.numDevices, b.numDevices, runtime.GOMAXPROCS(0))
}

// devicesSummary says what the devices are, for Description.
func (b *Backend) devicesSummary() string {
	return fmt.Sprintf("%d in-process devices sharing %d cores (SPMD programs, AllReduce in a fixed device order)",
		b.numDevices, runtime.GOMAXPROCS(0))
}

// checkDevice refuses a device number the backend doesn't have.
func (b *Backend) checkDevice(deviceNum backends.DeviceNum) error {
	if deviceNum < 0 || int(deviceNum) >= b.NumDevices() {
		return errors.Errorf("device %d: the pure-Go backend has %d device(s) (config devices=R for more)", deviceNum, b.NumDevices())
	}
	return nil
}

// unwrapBuffer returns simplego's buffer behind buffer and the device holding it.
func (b *Backend) unwrapBuffer(buffer backends.Buffer) (*simplego.Buffer, backends.DeviceNum, error) {
	if !b.multiDevice() {
		sb, ok := buffer.(*simplego.Buffer)
		if !ok || sb == nil {
			return nil, 0, errors.Errorf("buffer %T is not a pure-Go backend buffer", buffer)
		}
		return sb, 0, nil
	}
	db, ok := buffer.(*deviceBuffer)
	if !ok || db == nil {
		return nil, 0, errors.Errorf("buffer %T is not a buffer of this %d-device pure-Go backend", buffer, b.numDevices)
	}
	if db.buf == nil {
		return nil, 0, errors.Errorf("buffer on device %d was used after it was finalized or donated to an execution", db.device)
	}
	return db.buf, db.device, nil
}

// wrapBuffer is the buffer handed out for simplego's buffer on deviceNum.
func (b *Backend) wrapBuffer(sb *simplego.Buffer, deviceNum backends.DeviceNum) backends.Buffer {
	if !b.multiDevice() {
		return sb
	}
	return &deviceBuffer{buf: sb, device: deviceNum}
}

// wrapNew wraps a buffer simplego just made (as a backends.Buffer) for deviceNum.
func (b *Backend) wrapNew(buffer backends.Buffer, deviceNum backends.DeviceNum, err error) (backends.Buffer, error) {
	if err != nil || !b.multiDevice() {
		return buffer, err
	}
	sb, ok := buffer.(*simplego.Buffer)
	if !ok {
		return nil, errors.Errorf("simplego made a buffer of type %T", buffer)
	}
	return b.wrapBuffer(sb, deviceNum), nil
}

// BufferFinalize releases a buffer.
func (b *Backend) BufferFinalize(buffer backends.Buffer) error {
	if !b.multiDevice() {
		return b.Backend.BufferFinalize(buffer)
	}
	sb, _, err := b.unwrapBuffer(buffer)
	if err != nil {
		return err
	}
	buffer.(*deviceBuffer).buf = nil
	return b.Backend.BufferFinalize(sb)
}

// BufferShape returns the buffer's shape.
func (b *Backend) BufferShape(buffer backends.Buffer) (shapes.Shape, error) {
	if !b.multiDevice() {
		return b.Backend.BufferShape(buffer)
	}
	sb, _, err := b.unwrapBuffer(buffer)
	if err != nil {
		return shapes.Invalid(), err
	}
	return b.Backend.BufferShape(sb)
}

// BufferDeviceNum returns the device holding the buffer.
func (b *Backend) BufferDeviceNum(buffer backends.Buffer) (backends.DeviceNum, error) {
	if !b.multiDevice() {
		return b.Backend.BufferDeviceNum(buffer)
	}
	_, device, err := b.unwrapBuffer(buffer)
	return device, err
}

// BufferToFlatData copies the buffer's values into flat.
func (b *Backend) BufferToFlatData(buffer backends.Buffer, flat any) error {
	if !b.multiDevice() {
		return b.Backend.BufferToFlatData(buffer, flat)
	}
	sb, _, err := b.unwrapBuffer(buffer)
	if err != nil {
		return err
	}
	return b.Backend.BufferToFlatData(sb, flat)
}

// BufferFromFlatData makes a buffer on deviceNum holding a copy of flat.
func (b *Backend) BufferFromFlatData(deviceNum backends.DeviceNum, flat any, shape shapes.Shape) (backends.Buffer, error) {
	if !b.multiDevice() {
		return b.Backend.BufferFromFlatData(deviceNum, flat, shape)
	}
	if err := b.checkDevice(deviceNum); err != nil {
		return nil, err
	}
	buffer, err := b.Backend.BufferFromFlatData(0, flat, shape)
	return b.wrapNew(buffer, deviceNum, err)
}

// NewSharedBuffer makes a buffer on deviceNum whose values the caller reads and writes through flat.
func (b *Backend) NewSharedBuffer(deviceNum backends.DeviceNum, shape shapes.Shape) (backends.Buffer, any, error) {
	if !b.multiDevice() {
		return b.Backend.NewSharedBuffer(deviceNum, shape)
	}
	if err := b.checkDevice(deviceNum); err != nil {
		return nil, nil, err
	}
	buffer, flat, err := b.Backend.NewSharedBuffer(0, shape)
	buffer, err = b.wrapNew(buffer, deviceNum, err)
	return buffer, flat, err
}

// BufferData returns the buffer's values in place.
func (b *Backend) BufferData(buffer backends.Buffer) (any, error) {
	if !b.multiDevice() {
		return b.Backend.BufferData(buffer)
	}
	sb, _, err := b.unwrapBuffer(buffer)
	if err != nil {
		return nil, err
	}
	return b.Backend.BufferData(sb)
}

// BufferCopyToDevice copies a buffer to another device (a copy in host memory).
func (b *Backend) BufferCopyToDevice(source backends.Buffer, deviceNum backends.DeviceNum) (backends.Buffer, error) {
	if !b.multiDevice() {
		return b.Backend.BufferCopyToDevice(source, deviceNum)
	}
	sb, _, err := b.unwrapBuffer(source)
	if err != nil {
		return nil, err
	}
	shape, err := b.Backend.BufferShape(sb)
	if err != nil {
		return nil, err
	}
	flat, err := b.Backend.BufferData(sb)
	if err != nil {
		return nil, err
	}
	return b.BufferFromFlatData(deviceNum, flat, shape)
}
