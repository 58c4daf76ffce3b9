//go:build cgo

package pjrtplugin

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26's context.Exec gives every variable of an SPMD program a (replicated) sharding spec,
// and its xla builder turns any sharding spec into a Shardy annotation, which needs a Shardy mesh that
// only AutoSharding programs have: an SPMD step with variables fails to build ("mesh not found"). An
// SPMD program's parameters are one device's values, so the spec says nothing the program needs; the
// builders of the XLA backends opened here (Open, EmitBackend) drop it, as the pure-Go backend does.

// spmdBackend is GoMLX's xla backend whose builders drop the parameters' sharding specs in SPMD programs.
type spmdBackend struct{ *xla.Backend }

// Builder implements backends.Backend.
func (b spmdBackend) Builder(name string) backends.Builder {
	return withSPMDParameters(b.Backend.Builder(name))
}

// withSPMDParameters wraps a builder of GoMLX's xla backend (nil stays nil).
func withSPMDParameters(inner backends.Builder) backends.Builder {
	if inner == nil {
		return nil
	}
	return &spmdBuilder{Builder: inner}
}

// spmdBuilder is xla's builder, remembering whether the program is an SPMD program.
type spmdBuilder struct {
	backends.Builder
	spmd bool
}

// DistributedSPMD implements backends.Builder.
func (b *spmdBuilder) DistributedSPMD(numDevices int) error {
	err := b.Builder.DistributedSPMD(numDevices)
	b.spmd = err == nil
	return err
}

// Parameter implements backends.Builder: in an SPMD program, without the sharding spec.
func (b *spmdBuilder) Parameter(name string, shape shapes.Shape, sharding *backends.ShardingSpec) (backends.Op, error) {
	if b.spmd {
		sharding = nil
	}
	return b.Builder.Parameter(name, shape, sharding)
}
