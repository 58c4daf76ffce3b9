package gobackend

import (
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// The executors need a node's output shape, op type and parameters, which simplego keeps in unexported
// fields. Reflection by name costs about a microsecond per call (a ResNet step runs ~17,000 ops), so
// the fields' offsets are looked up once, with their types checked; if simplego's Node ever changes,
// nodeFieldsOK is false and every fast executor that needs them defers to simplego's own.

var nodeShapeOff, nodeDataOff, nodeOpTypeOff, nodeFieldsOK = func() (shapeOff, dataOff, opOff uintptr, ok bool) {
	t := reflect.TypeOf(simplego.Node{})
	shapeF, ok1 := t.FieldByName("shape")
	dataF, ok2 := t.FieldByName("data")
	opF, ok3 := t.FieldByName("opType")
	ok = ok1 && ok2 && ok3 && shapeF.Type == reflect.TypeOf(shapes.Shape{}) &&
		dataF.Type == reflect.TypeOf((*any)(nil)).Elem() && opF.Type == reflect.TypeOf(backends.OpType(0))
	return shapeF.Offset, dataF.Offset, opF.Offset, ok
}()

// nodeShape is the node's output shape (callers check nodeFieldsOK first).
func nodeShape(n *simplego.Node) shapes.Shape {
	return *(*shapes.Shape)(unsafe.Add(unsafe.Pointer(n), nodeShapeOff))
}

// nodeDataOf is the node's op-specific parameters (callers check nodeFieldsOK first).
func nodeDataOf(n *simplego.Node) any {
	return *(*any)(unsafe.Add(unsafe.Pointer(n), nodeDataOff))
}

// nodeOpType is the node's op type (callers check nodeFieldsOK first).
func nodeOpType(n *simplego.Node) backends.OpType {
	return *(*backends.OpType)(unsafe.Add(unsafe.Pointer(n), nodeOpTypeOff))
}
