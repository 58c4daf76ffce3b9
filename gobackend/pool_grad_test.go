package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// The native SelectAndScatter node gives the composition's result bit for bit: the same cell on ties
// (operands drawn from a few values, -0 and NaN among them), padding cells never chosen, the same
// addition order where windows overlap (sources of mixed magnitudes, so order shows in the sums), and
// the composition's -0 kept where windows don't overlap.
func TestSelectAndScatterNativeMatchesComposition(t *testing.T) {
	b := testBackend(t)
	if !poolGradInstalled {
		t.Fatal("execSelectAndScatter is not installed (simplego's SelectAndScatterMax/Min executor slots are taken, or Node's fields moved)")
	}
	if reflect.ValueOf(sgNodeExecutors[selectAndScatterMaxOpType]).Pointer() != reflect.ValueOf(execSelectAndScatter).Pointer() {
		t.Fatal("simplego's table does not point at execSelectAndScatter")
	}
	rng := rand.New(rand.NewSource(18))
	operandValues := []float64{0, math.Copysign(0, -1), 1, 2, 3, -1}
	sourceValues := []float64{1e8, 0.1, -0.3, math.Copysign(0, -1), 3, 1e-8, -7}
	for _, tc := range []struct {
		name                  string
		dims, window, strides []int
		paddings              [][2]int
	}{
		{"NHWC 2x2/2", []int{2, 6, 8, 5}, []int{1, 2, 2, 1}, []int{1, 2, 2, 1}, nil},
		{"NHWC 3x3/1 same", []int{2, 7, 6, 4}, []int{1, 3, 3, 1}, []int{1, 1, 1, 1}, [][2]int{{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
		{"NHWC 3x3/2 ceil", []int{3, 9, 8, 3}, []int{1, 3, 3, 1}, []int{1, 2, 2, 1}, [][2]int{{0, 0}, {0, 2}, {1, 1}, {0, 0}}},
		{"NHWC 2x3/2x3 padded", []int{2, 5, 7, 3}, []int{1, 2, 3, 1}, []int{1, 2, 3, 1}, [][2]int{{0, 0}, {1, 0}, {1, 1}, {0, 0}}},
		{"NHWC 3x3/1 same, 19 channels (vector kernel and tail)", []int{2, 5, 6, 19}, []int{1, 3, 3, 1}, []int{1, 1, 1, 1}, [][2]int{{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
		{"NHWC large (parallel)", []int{8, 32, 32, 16}, []int{1, 3, 3, 1}, []int{1, 2, 2, 1}, [][2]int{{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
		{"NCHW 3x3/1", []int{2, 3, 6, 6}, []int{1, 1, 3, 3}, []int{1, 1, 1, 1}, nil},
		{"rank 3 overlapping", []int{3, 11, 4}, []int{1, 4, 1}, []int{1, 3, 1}, [][2]int{{0, 0}, {2, 1}, {0, 0}}},
		{"rank 2 all axes windowed", []int{9, 10}, []int{3, 2}, []int{2, 1}, [][2]int{{1, 1}, {0, 1}}},
		{"rank 1 windows of padding only", []int{3}, []int{2}, []int{1}, [][2]int{{3, 1}}},
	} {
		_, srcDims := poolWindows(tc.dims, tc.window, tc.strides, tc.paddings)
		for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int32, dtypes.Int64} {
			x, src := newTT(tc.dims...), newTT(srcDims...)
			for i := range x.data {
				x.data[i] = operandValues[rng.Intn(len(operandValues))]
				if dtype.IsFloat() && rng.Intn(50) == 0 {
					x.data[i] = math.NaN()
				}
			}
			for i := range src.data {
				src.data[i] = sourceValues[rng.Intn(len(sourceValues))]
				if !dtype.IsFloat() {
					src.data[i] = math.Trunc(src.data[i])
				}
			}
			for _, isMin := range []bool{false, true} {
				what := fmt.Sprintf("%s %s min=%v", tc.name, dtype, isMin)
				got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
					gb := bb.(*goBuilder)
					in := make([]backends.Op, 2)
					for i := range p {
						var err error
						if in[i], err = gb.ConvertDType(p[i], dtype); err != nil {
							return nil, err
						}
					}
					sas := func() (backends.Op, error) {
						if isMin {
							return gb.SelectAndScatterMin(in[0], in[1], tc.window, tc.strides, tc.paddings)
						}
						return gb.SelectAndScatterMax(in[0], in[1], tc.window, tc.strides, tc.paddings)
					}
					native, err := sas()
					if err != nil {
						return nil, err
					}
					if op := nodeOpType(native.(*simplego.Node)); op != selectAndScatterMaxOpType && op != selectAndScatterMinOpType {
						return nil, fmt.Errorf("%s: built a %s node, want the native one", what, op)
					}
					gb.nativePoolGrad = false
					composed, err := sas()
					if err != nil {
						return nil, err
					}
					outs := []backends.Op{native, composed}
					for i := range outs {
						if outs[i], err = gb.ConvertDType(outs[i], dtypes.Float64); err != nil {
							return nil, err
						}
					}
					return outs, nil
				}, x, src)
				for i := range got[0].data {
					if n, c := got[0].data[i], got[1].data[i]; math.Float64bits(n) != math.Float64bits(c) {
						t.Fatalf("%s: cell %d: native %v (bits %x), composition %v (bits %x)", what, i, n, math.Float64bits(n), c, math.Float64bits(c))
					}
				}
			}
		}
	}
}
