package gobackend

import (
	"math"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// bfloat16 products and convolutions (precision bf16: bfloat16 compute, float32 master weights).
// simplego multiplies bfloat16 matrices with a generic per-element kernel (about 1 GFLOP/s, which made
// a bf16 step 25× slower than float32) and has no fused convolution for them. Here the operands are
// converted to float32 at the boundary, multiplied by the float32 GEMM or fused convolution
// (accumulating in float32, as simplego's own bf16 product does), and the result converted back with
// GoMLX's bfloat16 rounding (truncation, bfloat16.FromFloat32), so values match simplego's up to the
// float32 sums' order.

// toFloat32 widens bfloat16 values to float32 (exact).
func toFloat32(src []bfloat16.BFloat16) []float32 {
	dst := make([]float32, len(src))
	for i, v := range src {
		dst[i] = math.Float32frombits(uint32(v) << 16)
	}
	return dst
}

// fromFloat32 narrows float32 values to bfloat16 as GoMLX does (bfloat16.FromFloat32).
func fromFloat32(dst []bfloat16.BFloat16, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = bfloat16.FromFloat32(v)
	}
}

// fastDotBF16 is fastDot for bfloat16 operands: float32 GEMM between two conversions.
func fastDotBF16(backend *simplego.Backend, p dotParams, lhsFlat, rhsFlat []bfloat16.BFloat16, lhsDims, rhsDims []int) (*simplego.Buffer, bool, error) {
	prob, ok := dotProblem(p, toFloat32(lhsFlat), toFloat32(rhsFlat), lhsDims, rhsDims)
	if !ok {
		return nil, false, nil
	}
	out32 := make([]float32, p.batch*p.lhsCross*p.rhsCross)
	prob.Run(out32)
	output, outFlat, err := newOutput(backend, shapes.Make(dtypes.BFloat16, p.batch, p.lhsCross, p.rhsCross))
	if err != nil {
		return nil, false, err
	}
	fromFloat32(outFlat.([]bfloat16.BFloat16), out32)
	return output, true, nil
}

// runConvGemmsBF16 is kernels.RunConv for bfloat16 tensors: the float32 convolution between two conversions.
func runConvGemmsBF16(input []bfloat16.BFloat16, inDims []int, kernel []bfloat16.BFloat16, kDims, outDims []int, spec kernels.ConvGemmSpec, out []bfloat16.BFloat16) bool {
	out32 := make([]float32, len(out))
	if !kernels.RunConv(toFloat32(input), inDims, toFloat32(kernel), kDims, outDims, spec, out32) {
		return false
	}
	fromFloat32(out, out32)
	return true
}
