// Package testbackend gives tests one pure-Go backend per process, with the project's GoMLX gradient
// fixes installed, as every command that builds a graph has them.
package testbackend

import (
	"fmt"
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// Go returns the shared pure-Go backend (gobackend.New with its default options): the ops GoMLX's
// gradients need (Pad, Reverse, SelectAndScatter, BatchNorm) and the fast kernels.
var Go = sync.OnceValue(func() backends.Backend {
	gomlxfix.Install()
	backend, err := gobackend.New("")
	if err != nil {
		panic(err) // the pure-Go backend has no external dependency that could be missing
	}
	return backend
})

var (
	devicesMu sync.Mutex
	devices   = map[int]backends.Backend{}
)

// Devices returns the shared pure-Go backend with n in-process devices (gobackend's devices=n), one
// per n in the process.
func Devices(n int) (backends.Backend, error) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if devices[n] == nil {
		gomlxfix.Install()
		b, err := gobackend.New(fmt.Sprintf("devices=%d", n))
		if err != nil {
			return nil, err
		}
		devices[n] = b
	}
	return devices[n], nil
}
