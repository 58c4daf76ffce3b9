package backend

import (
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TransferCounter wraps a backend and counts the bytes that cross between host and device, so a
// caller can check that parameters and optimizer state stay resident between steps: a train step
// should move its batch and runtime scalars in and the metrics it logs out, nothing of the size of
// the model (the book's runs lost half their throughput when residency silently broke).
//
// The wrapper reports no shared buffers, so on a CPU backend every host-device exchange is an
// explicit copy it can see; on accelerators there are none anyway. Everything else is the wrapped
// backend's.
type TransferCounter struct {
	backends.Backend
	toDevice, toHost atomic.Int64
}

// CountTransfers wraps b; use the returned backend in its place.
func CountTransfers(b backends.Backend) *TransferCounter {
	return &TransferCounter{Backend: b}
}

// Transferred returns the bytes copied host→device and device→host so far.
func (c *TransferCounter) Transferred() (toDevice, toHost int64) {
	return c.toDevice.Load(), c.toHost.Load()
}

// HasSharedBuffers is false: shared buffers would hide the copies being counted.
func (c *TransferCounter) HasSharedBuffers() bool { return false }

// BufferFromFlatData counts the bytes sent to the device.
func (c *TransferCounter) BufferFromFlatData(deviceNum backends.DeviceNum, flat any, shape shapes.Shape) (backends.Buffer, error) {
	buf, err := c.Backend.BufferFromFlatData(deviceNum, flat, shape)
	if err == nil {
		c.toDevice.Add(int64(shape.Memory()))
	}
	return buf, err
}

// BufferToFlatData counts the bytes read back to the host.
func (c *TransferCounter) BufferToFlatData(buffer backends.Buffer, flat any) error {
	err := c.Backend.BufferToFlatData(buffer, flat)
	if err == nil {
		if shape, serr := c.Backend.BufferShape(buffer); serr == nil {
			c.toHost.Add(int64(shape.Memory()))
		}
	}
	return err
}
