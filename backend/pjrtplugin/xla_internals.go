//go:build cgo

package pjrtplugin

import (
	"reflect"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
	"github.com/pkg/errors"
)

// This file is the package's only bridge into the internals of GoMLX's xla backend (GoMLX v0.26.0),
// for the emit backend (emit_xla.go). It touches, by reflection:
//
//   - the unexported fields plugin, client, numDevices and pluginName of xla.Backend, set on a backend
//     that no constructor made: zero-valued *pjrt.Plugin and *pjrt.Client stand-ins (xla.Backend refuses
//     to build graphs while its plugin is nil), the device count, and a name;
//   - the unexported fields builder (*stablehlo.Builder) and fn (*stablehlo.Function) of xla.Builder,
//     read after Compile to get the module's StableHLO text.
//
// Why no public API serves: xla.New and xla.NewWithOptions always load a PJRT plugin and create a
// client, and nothing in GoMLX v0.26 hands out a builder's StableHLO (it is only logged by klog at
// -v=2, and compiled straight into the client).
//
// When GoMLX changes: a missing or retyped field is an error naming it (never a panic), and
// TestXLAInternals fails saying which field moved; TestEmitBackend fails too.

// newStandInXLABackend returns an xla.Backend with numDevices devices and no plugin behind it.
func newStandInXLABackend(numDevices int) (*xla.Backend, error) {
	inner := &xla.Backend{}
	v := reflect.ValueOf(inner).Elem()
	set := func(name string, value func(t reflect.Type) reflect.Value) error {
		f := v.FieldByName(name)
		if !f.IsValid() {
			return errors.Errorf("emit backend: GoMLX's xla.Backend has no field %q any more (GoMLX upgraded?)", name)
		}
		val := value(f.Type())
		if !val.IsValid() || val.Type() != f.Type() {
			return errors.Errorf("emit backend: GoMLX's xla.Backend field %q is a %s now (GoMLX upgraded?)", name, f.Type())
		}
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(val)
		return nil
	}
	zeroPointer := func(t reflect.Type) reflect.Value {
		if t.Kind() != reflect.Pointer {
			return reflect.Value{}
		}
		return reflect.New(t.Elem())
	}
	for _, name := range []string{"plugin", "client"} {
		if err := set(name, zeroPointer); err != nil {
			return nil, err
		}
	}
	if err := set("numDevices", func(reflect.Type) reflect.Value { return reflect.ValueOf(numDevices) }); err != nil {
		return nil, err
	}
	if err := set("pluginName", func(reflect.Type) reflect.Value { return reflect.ValueOf("emit") }); err != nil {
		return nil, err
	}
	return inner, nil
}

// moduleText reads the StableHLO text out of an xla.Builder whose main function has been returned.
func moduleText(b backends.Builder) (string, error) {
	sb, err := field[*stablehlo.Builder](b, "builder")
	if err != nil {
		return "", err
	}
	if sb == nil {
		return "", errors.New("emit backend: the StableHLO builder is gone")
	}
	main, err := field[*stablehlo.Function](b, "fn")
	if err != nil {
		return "", err
	}
	if main == nil || !main.Returned {
		return "", errors.New("emit backend: xla's Compile stopped before the module was finished")
	}
	program, err := sb.Build()
	if err != nil {
		return "", errors.WithMessage(err, "emit backend: building the StableHLO module")
	}
	return string(program), nil
}

// field reads the unexported field name of type T from the struct *b points to.
func field[T any](b any, name string) (T, error) {
	var zero T
	v := reflect.ValueOf(b)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return zero, errors.Errorf("emit backend: builder is a %T, not GoMLX's *xla.Builder", b)
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeOf(zero) {
		return zero, errors.Errorf("emit backend: %T has no field %s %T any more (GoMLX upgraded?)", b, name, zero)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(T), nil
}
