// Package testbackend gives tests one pure-Go backend per process, with the project's GoMLX gradient
// fixes installed, as every command that builds a graph has them.
package testbackend

import (
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
