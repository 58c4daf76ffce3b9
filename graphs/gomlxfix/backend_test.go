package gomlxfix

import (
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/gobackend"
)

// testBackend is the pure-Go backend with the project's added ops (Pad, Reverse, SelectAndScatter,
// im2col convolution), which conv gradients need; every test in the package shares it. Getting
// it installs the gradients, as every command that builds a graph does.
var testBackend = sync.OnceValue(func() backends.Backend {
	Install()
	backend, err := gobackend.New("")
	if err != nil {
		panic(err)
	}
	return backend
})
