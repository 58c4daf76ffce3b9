package bestiary

import "github.com/trainer/trainer/graphs/testbackend"

// testBackend is the pure-Go backend every test in the package shares, with the project's gradients
// installed.
var testBackend = testbackend.Go
