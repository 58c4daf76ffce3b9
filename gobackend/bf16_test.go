package gobackend

import (
	"math"
	"math/rand"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// bf16Round is x as a bfloat16 (GoMLX's truncation), back in float64.
func bf16Round(x tt) tt {
	out := newTT(x.dims...)
	for i, v := range x.data {
		out.data[i] = float64(bfloat16.FromFloat32(float32(v)).Float32())
	}
	return out
}

// bfloat16 products and convolutions run the float32 GEMM and fused convolution between conversions
// (the 25× slower bf16 step came from simplego's per-element bf16 product and the im2col compositions):
// the convolutions become fused convolution nodes, and both give the float64 result of the
// bfloat16-rounded operands to bfloat16 accuracy (float32 accumulation, one rounding at the end).
func TestBF16ProductsAndConvolutions(t *testing.T) {
	b := countCompiledOps(testBackend(t))
	rng := rand.New(rand.NewSource(91))
	toBF16 := func(bb backends.Builder, p backends.Op) (backends.Op, error) {
		return bb.ConvertDType(p, dtypes.BFloat16)
	}
	// Relative to the largest output: the rounding of the result (2^-8) plus float32 sums.
	const tol = 1.0 / 128
	for _, dc := range dotCases() {
		lhs, rhs := bf16Round(randTT(rng, dc.lhsDims...)), bf16Round(randTT(rng, dc.rhsDims...))
		want := refDotGeneral(lhs, rhs, dc)
		got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
			l, err := toBF16(bb, p[0])
			if err != nil {
				return nil, err
			}
			r, err := toBF16(bb, p[1])
			if err != nil {
				return nil, err
			}
			o, err := bb.DotGeneral(l, dc.lhsContract, dc.lhsBatch, r, dc.rhsContract, dc.rhsBatch)
			if err != nil {
				return nil, err
			}
			o, err = bb.ConvertDType(o, dtypes.Float64)
			return []backends.Op{o}, err
		}, lhs, rhs)[0]
		assertClose(t, "bf16 "+dc.name, got, want, tol)
	}
	for _, cc := range append(fusedConvCases()[:3], depthwiseCases()[0].convCase, depthwiseCases()[len(depthwiseCases())-2].convCase) {
		x, k := bf16Round(randTT(rng, cc.inDims...)), bf16Round(randTT(rng, cc.kDims...))
		want := refConv(x, k, cc)
		before := b.count(fusedConvOpType)
		got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
			xb, err := toBF16(bb, p[0])
			if err != nil {
				return nil, err
			}
			kb, err := toBF16(bb, p[1])
			if err != nil {
				return nil, err
			}
			o, err := bb.ConvGeneral(xb, kb, cc.axes, cc.strides, cc.paddings, cc.inputDilations, cc.kernelDilations, cc.groups, cc.batchGroups)
			if err != nil {
				return nil, err
			}
			o, err = bb.ConvertDType(o, dtypes.Float64)
			return []backends.Op{o}, err
		}, x, k)[0]
		if b.count(fusedConvOpType) == before {
			t.Fatalf("bf16 conv %s did not run as a fused convolution", cc.name)
		}
		assertClose(t, "bf16 conv "+cc.name, got, want, tol)
	}
}

// The conversions: widening is exact, narrowing is GoMLX's (bfloat16.FromFloat32).
func TestBF16Conversions(t *testing.T) {
	vals := []float32{0, 1, -1.5, 3.14159, 1e-40, float32(math.Inf(-1)), 65504, -0.0}
	b := make([]bfloat16.BFloat16, len(vals))
	fromFloat32(b, vals)
	for i, v := range vals {
		if b[i] != bfloat16.FromFloat32(v) {
			t.Fatalf("fromFloat32(%v) = %v, want %v", v, b[i], bfloat16.FromFloat32(v))
		}
	}
	for i, w := range toFloat32(b) {
		if w != b[i].Float32() {
			t.Fatalf("toFloat32(%v) = %v, want %v", b[i], w, b[i].Float32())
		}
	}
}
