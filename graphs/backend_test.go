package graphs

import (
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// testBackend is the pure-Go backend with the project's added ops (Pad, Reverse, SelectAndScatter,
// im2col convolution), which conv and pool gradients need; every test in the package shares it. Getting
// it installs the project's GoMLX gradients (gomlxfix), as every command that builds a graph does.
var testBackend = sync.OnceValue(func() backends.Backend {
	gomlxfix.Install()
	backend, err := gobackend.New("")
	if err != nil {
		panic(err)
	}
	return backend
})
