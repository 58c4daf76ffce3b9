//go:build !cgo

package pjrtplugin

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/pkg/errors"
)

// Available says whether this build can load PJRT plugins: GoMLX's xla backend needs cgo, and this
// build has none.
const Available = false

// Open fails: this program was built without cgo.
func Open(pluginPath string, _ []string) (backends.Backend, error) {
	return nil, errors.Errorf("cannot load PJRT plugin %s: built without cgo", pluginPath)
}
