//go:build !cgo

package pjrt

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/pkg/errors"
)

// xlaAvailable: the xla backend needs cgo, and this build has none.
const xlaAvailable = false

func openXLA(pluginPath string, _ Spec) (backends.Backend, error) {
	return nil, errors.Errorf("cannot load PJRT plugin %s: built without cgo", pluginPath)
}
