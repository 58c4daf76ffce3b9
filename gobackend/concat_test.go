package gobackend

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// The row-by-row Concatenate gives the plain concatenation on every axis, in float32 and float64, from a
// few values to DenseNet-sized feature maps.
func TestFastConcatenate(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(9))
	for _, tc := range []struct {
		dims [][]int
		axis int
	}{
		{[][]int{{2, 3, 4}, {2, 3, 5}}, 2},
		{[][]int{{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1},
		{[][]int{{1, 3}, {2, 3}}, 0},
		{[][]int{{8, 16, 16, 64}, {8, 16, 16, 32}, {8, 16, 16, 32}}, 3},
	} {
		inputs := make([]tt, len(tc.dims))
		for i, d := range tc.dims {
			inputs[i] = randTT(rng, d...)
		}
		// The reference: for each outer index, each input's slab in turn.
		outer := 1
		for _, d := range tc.dims[0][:tc.axis] {
			outer *= d
		}
		var want []float64
		for o := range outer {
			for _, in := range inputs {
				w := len(in.data) / outer
				want = append(want, in.data[o*w:(o+1)*w]...)
			}
		}
		for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
			got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
				in := make([]backends.Op, len(p))
				for i := range p {
					var err error
					if in[i], err = bb.ConvertDType(p[i], dtype); err != nil {
						return nil, err
					}
				}
				out, err := bb.Concatenate(tc.axis, in...)
				if err != nil {
					return nil, err
				}
				out, err = bb.ConvertDType(out, dtypes.Float64)
				return []backends.Op{out}, err
			}, inputs...)
			wantD := slices.Clone(want)
			for i := range wantD {
				if dtype == dtypes.Float32 {
					wantD[i] = float64(float32(wantD[i]))
				}
			}
			if !slices.Equal(got[0].data, wantD) {
				t.Fatalf("%v axis %d %s: the concatenation differs", tc.dims, tc.axis, dtype)
			}
		}
	}
}
