package gobackend

import (
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// execFastDotGeneral replaces simplego's DotGeneral executor: float32 and float64 products of the
// backends that enabled it go to the packed GEMM; everything else to simplego's kernel. The output is
// simplego's normalised [batch, lhsCross, rhsCross] (the builder reshapes it).
// The last user of a Reshape view (reshape.go) takes it out of simplego's hands.
func execFastDotGeneral(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	out, err := dotGeneral(backend, node, inputs, inputsOwned)
	releaseViews(node, inputs, inputsOwned)
	return out, err
}

func dotGeneral(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	if !ownsFastOps(backend) || len(inputs) != 2 {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	lhsShape, err1 := backend.BufferShape(inputs[0])
	rhsShape, err2 := backend.BufferShape(inputs[1])
	dt := lhsShape.DType
	if err1 != nil || err2 != nil || (dt != dtypes.Float32 && dt != dtypes.Float64 && dt != dtypes.BFloat16) || rhsShape.DType != dt {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	p, ok := readDotParams(node)
	if !ok {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	lhsFlat, err1 := backend.BufferData(inputs[0])
	rhsFlat, err2 := backend.BufferData(inputs[1])
	if err1 != nil || err2 != nil {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	var output *simplego.Buffer
	var err error
	switch dt {
	case dtypes.Float64:
		output, ok, err = fastDot(backend, p, lhsFlat.([]float64), rhsFlat.([]float64), lhsShape.Dimensions, rhsShape.Dimensions, dt)
	case dtypes.BFloat16:
		output, ok, err = fastDotBF16(backend, p, lhsFlat.([]bfloat16.BFloat16), rhsFlat.([]bfloat16.BFloat16), lhsShape.Dimensions, rhsShape.Dimensions)
	default:
		output, ok, err = fastDot(backend, p, lhsFlat.([]float32), rhsFlat.([]float32), lhsShape.Dimensions, rhsShape.Dimensions, dt)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return sgDotGeneral(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// dotProblem is the DotGeneral p of these operands as a GEMM problem; ok is false if the offset tables
// disagree with simplego's sizes.
func dotProblem[T kernels.Float](p dotParams, lhsFlat, rhsFlat []T, lhsDims, rhsDims []int) (*kernels.GemmProblemOf[T], bool) {
	return kernels.NewDotProblem(lhsFlat, rhsFlat, lhsDims, rhsDims, p.lhsContracting, p.lhsBatch, p.rhsContracting, p.rhsBatch,
		p.batch, p.lhsCross, p.rhsCross, p.contracting)
}

// fastDot runs the DotGeneral as a packed GEMM; ok is false if the offset tables disagree with
// simplego's sizes.
func fastDot[T kernels.Float](backend *simplego.Backend, p dotParams, lhsFlat, rhsFlat []T, lhsDims, rhsDims []int, dt dtypes.DType) (*simplego.Buffer, bool, error) {
	prob, ok := dotProblem(p, lhsFlat, rhsFlat, lhsDims, rhsDims)
	if !ok {
		return nil, false, nil
	}
	output, outFlat, err := newOutput(backend, shapes.Make(dt, p.batch, p.lhsCross, p.rhsCross))
	if err != nil {
		return nil, false, err
	}
	prob.Run(outFlat.([]T))
	return output, true, nil
}
