package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// The native ReduceWindow node gives the composition's result bit for bit (operands drawn from a few
// values with -0, ±inf and NaN among them, so ties, zero signs and NaN propagation show; sums of mixed
// magnitudes, so the order of the additions shows), padded windows and windows of padding only
// included, for every reduction, float32 and float64, and matches the float64 reference.
func TestReduceWindowNativeMatchesComposition(t *testing.T) {
	b := testBackend(t)
	if !poolInstalled {
		t.Fatal("execReduceWindow is not installed (simplego's ReduceWindow executor is missing, or Node's fields moved)")
	}
	rng := rand.New(rand.NewSource(25))
	values := []float64{0, math.Copysign(0, -1), 1, -2, 3e7, 1e-3, -0.7, math.Inf(1), math.Inf(-1)}
	for _, tc := range []struct {
		name                          string
		dims, window, strides, winDil []int
		paddings                      [][2]int
	}{
		{"NHWC 2x2/2", []int{2, 6, 8, 8}, []int{1, 2, 2, 1}, []int{1, 2, 2, 1}, nil, nil},
		{"NHWC 3x3/1 same, channels not a multiple of 8", []int{2, 5, 6, 19}, []int{1, 3, 3, 1}, []int{1, 1, 1, 1}, nil, [][2]int{{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
		{"NHWC 3x3/2 ceil", []int{3, 9, 8, 8}, []int{1, 3, 3, 1}, []int{1, 2, 2, 1}, nil, [][2]int{{0, 0}, {0, 2}, {1, 1}, {0, 0}}},
		{"NHWC window dilation", []int{2, 7, 7, 16}, []int{1, 2, 2, 1}, []int{1, 1, 2, 1}, []int{1, 2, 3, 1}, [][2]int{{0, 0}, {1, 0}, {2, 2}, {0, 0}}},
		{"windows of padding only", []int{1, 2, 3, 8}, []int{1, 2, 2, 1}, []int{1, 1, 1, 1}, nil, [][2]int{{0, 0}, {3, 1}, {0, 2}, {0, 0}}},
		{"rank 3, inner of two axes", []int{3, 11, 2, 5}, []int{1, 4, 1, 1}, []int{1, 3, 1, 1}, nil, [][2]int{{0, 0}, {2, 1}, {0, 0}, {0, 0}}},
		{"NHWC large (parallel)", []int{8, 32, 32, 16}, []int{1, 3, 3, 1}, []int{1, 2, 2, 1}, nil, [][2]int{{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
	} {
		x := newTT(tc.dims...)
		for i := range x.data {
			x.data[i] = values[rng.Intn(len(values))]
			if rng.Intn(200) == 0 {
				x.data[i] = math.NaN()
			}
		}
		for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
			for _, op := range []backends.ReduceOpType{backends.ReduceOpMax, backends.ReduceOpMin, backends.ReduceOpSum, backends.ReduceOpProduct} {
				what := fmt.Sprintf("%s %s %s", tc.name, dtype, op)
				got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
					gb := bb.(*goBuilder)
					in, err := gb.ConvertDType(p[0], dtype)
					if err != nil {
						return nil, err
					}
					pool := func() (backends.Op, error) {
						return gb.ReduceWindow(in, op, tc.window, tc.strides, nil, tc.winDil, tc.paddings)
					}
					native, err := pool()
					if err != nil {
						return nil, err
					}
					if _, ok := nodeDataOf(native.(*simplego.Node)).(*poolSpec); !ok {
						return nil, fmt.Errorf("%s: built a composition, want the native node", what)
					}
					gb.nativePool = false
					composed, err := pool()
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
				}, x)
				for i := range got[0].data {
					if n, c := got[0].data[i], got[1].data[i]; math.Float64bits(n) != math.Float64bits(c) {
						t.Fatalf("%s: cell %d: native %v (bits %x), composition %v (bits %x)", what, i, n, math.Float64bits(n), c, math.Float64bits(c))
					}
				}
				if dtype == dtypes.Float64 && op != backends.ReduceOpProduct { // Products overflow to NaN in orders of their own.
					paddings := tc.paddings
					if paddings == nil {
						paddings = make([][2]int, len(tc.dims))
					}
					want := refReduceWindow(x, op, tc.window, tc.strides, fillOnes(nil, len(tc.dims)), fillOnes(tc.winDil, len(tc.dims)), paddings)
					for i, w := range want.data {
						if g := got[0].data[i]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) && math.Abs(g-w) > 1e-9*math.Abs(w) {
							t.Fatalf("%s: cell %d: native %v, reference %v", what, i, g, w)
						}
					}
				}
			}
		}
	}
}

// Inner blocks shorter than poolMinInner (NCHW, few channels) keep the composition.
func TestReduceWindowNarrowRowsComposed(t *testing.T) {
	b := testBackend(t)
	runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
		in, err := bb.ConvertDType(p[0], dtypes.Float32)
		if err != nil {
			return nil, err
		}
		o, err := bb.ReduceWindow(in, backends.ReduceOpMax, []int{1, 1, 2, 2}, []int{1, 1, 2, 2}, nil, nil, nil)
		if err != nil {
			return nil, err
		}
		if _, native := nodeDataOf(o.(*simplego.Node)).(*poolSpec); native {
			return nil, fmt.Errorf("NCHW pool of rows of 1 built the native node")
		}
		o, err = bb.ConvertDType(o, dtypes.Float64)
		return []backends.Op{o}, err
	}, newTT(2, 3, 4, 4))
}
