//go:build cgo

package pjrt

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
)

// xlaAvailable: the xla backend is compiled in (it needs cgo).
const xlaAvailable = true

func init() {
	// The xla package reads GOMLX_NO_AUTO_INSTALL in its own init, possibly before ours sets it.
	xla.EnableAutoInstall(false)
}

// openXLA opens GoMLX's xla backend on the plugin at pluginPath (absolute, already checked), so go-xla
// never runs its own plugin search.
func openXLA(pluginPath string, spec Spec) (b backends.Backend, err error) {
	options := slices.Clone(spec.Options)
	// GoMLX shares host and device buffers when the plugin is *named* "cpu"; loaded by path it isn't.
	if name := pluginName(pluginPath); name != "" && platformMatches("cpu", name) &&
		!slices.Contains(options, "noshared_buffers") && !slices.Contains(options, "shared_buffers") {
		options = append(options, "shared_buffers")
	}
	if strings.Contains(pluginPath, string(os.PathSeparator)+"jax_plugins"+string(os.PathSeparator)) && os.Getenv("GOPJRT_CUDA_CHECKS") == "" {
		// go-xla's check looks for GoMLX's install layout, and for a JAX wheel only prints a page of
		// wrong advice (docs/distributed.md says what a wheel needs).
		if err := os.Setenv("GOPJRT_CUDA_CHECKS", "0"); err != nil {
			return nil, err
		}
	}
	if flags, changed := cudaDataDirFlags(pluginPath, os.Getenv("XLA_FLAGS")); changed {
		if err := os.Setenv("XLA_FLAGS", flags); err != nil {
			return nil, err
		}
	}
	config := strings.Join(append([]string{pluginPath}, options...), ",")
	defer func() {
		// go-xla dereferences nil on some load failures (e.g. GetPjrtApi returning NULL): report, don't die.
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("loading PJRT plugin %s panicked: %v", pluginPath, r)
		}
	}()
	return xla.New(config)
}
