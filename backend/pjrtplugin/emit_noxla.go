//go:build !cgo

package pjrtplugin

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/pkg/errors"
)

// EmitAvailable says whether this build can emit StableHLO: GoMLX's xla backend, whose pure-Go
// StableHLO builder the emit backend drives, is only linked with cgo (it also holds the PJRT bindings).
const EmitAvailable = false

// EmitBackend is unavailable without cgo.
type EmitBackend struct{ backends.Backend }

// Module is one emitted StableHLO program.
type Module struct {
	Name string
	Text string
}

// ErrEmitted is what Compile returns on the emit backend once the module is recorded.
var ErrEmitted = errors.New("StableHLO module emitted (the emit backend compiles nothing)")

// NewEmitBackend fails: this program was built without cgo.
func NewEmitBackend(int) (*EmitBackend, error) {
	return nil, errors.New("emitting StableHLO needs GoMLX's xla backend, which is linked only with cgo: " +
		"rebuild with CGO_ENABLED=1 (no PJRT plugin is needed)")
}

// Modules returns nothing.
func (b *EmitBackend) Modules() []Module { return nil }
