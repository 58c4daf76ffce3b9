package bestiary

import (
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// testBackend is the pure-Go backend with the project's gradients installed; every test in the
// package shares it.
var testBackend = sync.OnceValue(func() backends.Backend {
	gomlxfix.Install()
	backend, err := gobackend.New("")
	if err != nil {
		panic(err)
	}
	return backend
})
