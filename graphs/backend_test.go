package graphs

import (
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/gobackend"
)

// testBackend is the pure-Go backend with the project's added ops (Pad, Reverse, SelectAndScatter,
// im2col convolution), which conv and pool gradients need; every test in the package shares it.
var testBackend = sync.OnceValue(func() backends.Backend {
	backend, err := gobackend.New("")
	if err != nil {
		panic(err)
	}
	return backend
})
