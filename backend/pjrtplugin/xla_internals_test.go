//go:build cgo

package pjrtplugin

import (
	"reflect"
	"testing"

	xlapjrt "github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends/xla"
)

// TestXLAInternals is the guard on xla_internals.go: the fields of GoMLX's xla.Backend and xla.Builder
// it sets and reads are there with the types it expects, and a stand-in backend builds graphs.
func TestXLAInternals(t *testing.T) {
	for _, c := range []struct {
		typ   reflect.Type
		field string
		want  reflect.Type
	}{
		{reflect.TypeOf(xla.Backend{}), "plugin", reflect.TypeOf((*xlapjrt.Plugin)(nil))},
		{reflect.TypeOf(xla.Backend{}), "client", reflect.TypeOf((*xlapjrt.Client)(nil))},
		{reflect.TypeOf(xla.Backend{}), "numDevices", reflect.TypeOf(0)},
		{reflect.TypeOf(xla.Backend{}), "pluginName", reflect.TypeOf("")},
		{reflect.TypeOf(xla.Builder{}), "builder", reflect.TypeOf((*stablehlo.Builder)(nil))},
		{reflect.TypeOf(xla.Builder{}), "fn", reflect.TypeOf((*stablehlo.Function)(nil))},
	} {
		if f, ok := c.typ.FieldByName(c.field); !ok || f.Type != c.want {
			t.Errorf("GoMLX changed xla.%s: field %s is %v, the emit backend expects %s", c.typ.Name(), c.field, f.Type, c.want)
		}
	}
	b, err := newStandInXLABackend(3)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumDevices() != 3 {
		t.Errorf("stand-in backend has %d devices, want 3", b.NumDevices())
	}
	if b.Builder("probe") == nil {
		t.Error("GoMLX's xla.Backend refuses to build on the stand-in plugin")
	}
}
