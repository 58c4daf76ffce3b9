package gobackend

import (
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// execFastDotGeneral replaces simplego's DotGeneral executor: float32 and float64 products of the
// backends that enabled it go to the packed GEMM; everything else to simplego's kernel. The output is
// simplego's normalised [batch, lhsCross, rhsCross] (the builder reshapes it).
func execFastDotGeneral(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
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
func dotProblem[T gemmFloat](p dotParams, lhsFlat, rhsFlat []T, lhsDims, rhsDims []int) (*gemmProblemOf[T], bool) {
	lhs := newGemmOperand(lhsFlat, lhsDims, p.lhsContracting, p.lhsBatch)
	rhs := newGemmOperand(rhsFlat, rhsDims, p.rhsContracting, p.rhsBatch)
	if len(lhs.crossOff) != p.lhsCross || len(rhs.crossOff) != p.rhsCross || len(lhs.kOff) != p.contracting ||
		len(rhs.kOff) != p.contracting || len(lhs.batchOff) != p.batch || len(rhs.batchOff) != p.batch {
		return nil, false
	}
	return &gemmProblemOf[T]{lhs: lhs, rhs: rhs, batch: p.batch, m: p.lhsCross, n: p.rhsCross, k: p.contracting}, true
}

// fastDot runs the DotGeneral as a packed GEMM; ok is false if the offset tables disagree with
// simplego's sizes.
func fastDot[T gemmFloat](backend *simplego.Backend, p dotParams, lhsFlat, rhsFlat []T, lhsDims, rhsDims []int, dt dtypes.DType) (*simplego.Buffer, bool, error) {
	prob, ok := dotProblem(p, lhsFlat, rhsFlat, lhsDims, rhsDims)
	if !ok {
		return nil, false, nil
	}
	output := backend.NewBuffer(shapes.Make(dt, p.batch, p.lhsCross, p.rhsCross))
	outFlat, err := backend.BufferData(output)
	if err != nil {
		return nil, false, err
	}
	prob.run(outFlat.([]T))
	return output, true, nil
}
