package gobackend

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// dotCase is one DotGeneral: operand dims and axes.
type dotCase struct {
	name                           string
	lhsDims, rhsDims               []int
	lhsContract, lhsBatch          []int
	rhsContract, rhsBatch          []int
	wantBatch, wantM, wantN, wantK int
}

func dotCases() []dotCase {
	return []dotCase{
		{name: "matmul", lhsDims: []int{7, 5}, rhsDims: []int{5, 9}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 7, wantN: 9, wantK: 5},
		{name: "transposed-contracting", lhsDims: []int{5, 7}, rhsDims: []int{9, 5}, lhsContract: []int{0}, rhsContract: []int{1}, wantBatch: 1, wantM: 7, wantN: 9, wantK: 5},
		{name: "ones", lhsDims: []int{1, 1}, rhsDims: []int{1, 1}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 1, wantN: 1, wantK: 1},
		{name: "outer-1", lhsDims: []int{1, 5}, rhsDims: []int{5, 1}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 1, wantN: 1, wantK: 5},
		{name: "vector", lhsDims: []int{13, 6}, rhsDims: []int{6}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 13, wantN: 1, wantK: 6},
		{name: "batch-leading", lhsDims: []int{3, 4, 6}, rhsDims: []int{3, 6, 5}, lhsContract: []int{2}, lhsBatch: []int{0}, rhsContract: []int{1}, rhsBatch: []int{0}, wantBatch: 3, wantM: 4, wantN: 5, wantK: 6},
		{name: "batch-middle", lhsDims: []int{4, 3, 6}, rhsDims: []int{6, 3, 5}, lhsContract: []int{2}, lhsBatch: []int{1}, rhsContract: []int{0}, rhsBatch: []int{1}, wantBatch: 3, wantM: 4, wantN: 5, wantK: 6},
		{name: "two-batch-axes-swapped", lhsDims: []int{2, 3, 4, 5}, rhsDims: []int{3, 5, 2, 7}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{1}, rhsBatch: []int{2, 0}, wantBatch: 6, wantM: 4, wantN: 7, wantK: 5},
		{name: "two-contracting-out-of-order", lhsDims: []int{2, 7, 3}, rhsDims: []int{3, 2, 5}, lhsContract: []int{0, 2}, rhsContract: []int{1, 0}, wantBatch: 1, wantM: 7, wantN: 5, wantK: 6},
		{name: "im2col-kloop", lhsDims: []int{9, 40, 3}, rhsDims: []int{9, 3, 8}, lhsContract: []int{0, 2}, rhsContract: []int{0, 1}, wantBatch: 1, wantM: 40, wantN: 8, wantK: 27},
		{name: "blocks-m-k-n", lhsDims: []int{101, 301}, rhsDims: []int{301, 35}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 101, wantN: 35, wantK: 301},
		{name: "long-k", lhsDims: []int{1100, 10}, rhsDims: []int{1100, 18}, lhsContract: []int{0}, rhsContract: []int{0}, wantBatch: 1, wantM: 10, wantN: 18, wantK: 1100},
		{name: "wide-n", lhsDims: []int{7, 9}, rhsDims: []int{9, 1100}, lhsContract: []int{1}, rhsContract: []int{0}, wantBatch: 1, wantM: 7, wantN: 1100, wantK: 9},
		{name: "batched-attention", lhsDims: []int{4, 2, 30, 8}, rhsDims: []int{4, 2, 20, 8}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{3}, rhsBatch: []int{0, 1}, wantBatch: 8, wantM: 30, wantN: 20, wantK: 8},
	}
}

// refDotGeneral is DotGeneral on float64 with plain loops: output [batch..., lhs cross..., rhs cross...].
func refDotGeneral(lhs, rhs tt, dc dotCase) tt {
	crossAxes := func(rank int, contract, batch []int) []int {
		var cross []int
		for a := range rank {
			if !slices.Contains(contract, a) && !slices.Contains(batch, a) {
				cross = append(cross, a)
			}
		}
		return cross
	}
	lc, rc := crossAxes(len(lhs.dims), dc.lhsContract, dc.lhsBatch), crossAxes(len(rhs.dims), dc.rhsContract, dc.rhsBatch)
	var outDims, kDims []int
	for _, a := range dc.lhsBatch {
		outDims = append(outDims, lhs.dims[a])
	}
	for _, a := range lc {
		outDims = append(outDims, lhs.dims[a])
	}
	for _, a := range rc {
		outDims = append(outDims, rhs.dims[a])
	}
	for _, a := range dc.lhsContract {
		kDims = append(kDims, lhs.dims[a])
	}
	out := newTT(outDims...)
	li, ri := make([]int, len(lhs.dims)), make([]int, len(rhs.dims))
	forEach(outDims, func(o []int) {
		nb := len(dc.lhsBatch)
		for i := range nb {
			li[dc.lhsBatch[i]], ri[dc.rhsBatch[i]] = o[i], o[i]
		}
		for i, a := range lc {
			li[a] = o[nb+i]
		}
		for i, a := range rc {
			ri[a] = o[nb+len(lc)+i]
		}
		sum := 0.0
		forEach(kDims, func(k []int) {
			for i := range k {
				li[dc.lhsContract[i]], ri[dc.rhsContract[i]] = k[i], k[i]
			}
			sum += lhs.data[lhs.flat(li)] * rhs.data[rhs.flat(ri)]
		})
		out.data[out.flat(o)] = sum
	})
	return out
}

func toF32(x tt) []float32 {
	out := make([]float32, len(x.data))
	for i, v := range x.data {
		out[i] = float32(v)
	}
	return out
}

// The DotGeneral override on the backend (float32 and float64 through the hook) matches the float64
// reference and simplego's own kernel (float64: to a few roundings of the products' sums).
func TestFastDotGeneralMatchesSimplego(t *testing.T) {
	fast := testBackend(t)
	slow, err := newBackend("simplego_dot,strict_conv")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Finalize()
	if !fast.fastDot || slow.fastDot {
		t.Fatalf("fastDot: default %v, simplego_dot %v", fast.fastDot, slow.fastDot)
	}
	rng := rand.New(rand.NewSource(22))
	for _, dc := range dotCases() {
		t.Run(dc.name, func(t *testing.T) {
			lhs, rhs := randTT(rng, dc.lhsDims...), randTT(rng, dc.rhsDims...)
			want := refDotGeneral(lhs, rhs, dc)
			build := func(dtype dtypes.DType) func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
				return func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
					l, r := in[0], in[1]
					if dtype != dtypes.Float64 {
						var err error
						if l, err = b.ConvertDType(l, dtype); err != nil {
							return nil, err
						}
						if r, err = b.ConvertDType(r, dtype); err != nil {
							return nil, err
						}
					}
					out, err := b.DotGeneral(l, slices.Clone(dc.lhsContract), slices.Clone(dc.lhsBatch), r, slices.Clone(dc.rhsContract), slices.Clone(dc.rhsBatch))
					if err != nil || dtype == dtypes.Float64 {
						return []backends.Op{out}, err
					}
					out, err = b.ConvertDType(out, dtypes.Float64)
					return []backends.Op{out}, err
				}
			}
			got32 := runOps(t, fast, build(dtypes.Float32), lhs, rhs)[0]
			assertClose(t, "fast float32 vs reference", got32, want, 1e-5)
			assertClose(t, "fast float32 vs simplego", got32, runOps(t, slow, build(dtypes.Float32), lhs, rhs)[0], 1e-5)
			got64 := runOps(t, fast, build(dtypes.Float64), lhs, rhs)[0]
			assertClose(t, "fast float64 vs reference", got64, want, 1e-14)
			assertClose(t, "fast float64 vs simplego", got64, runOps(t, slow, build(dtypes.Float64), lhs, rhs)[0], 1e-14)
		})
	}
}

func mustShapeF32(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }

// findDotNode returns the DotGeneral node under the Reshape simplego's DotGeneral builder returns.
func findDotNode(t *testing.T, op backends.Op) *simplego.Node {
	t.Helper()
	n, ok := op.(*simplego.Node)
	if !ok {
		t.Fatalf("op is %T", op)
	}
	f := unexportedField(reflect.ValueOf(n).Elem(), "inputs")
	if !f.IsValid() {
		t.Fatal("simplego.Node has no inputs field")
	}
	inputs := f.Interface().([]*simplego.Node)
	if len(inputs) != 1 {
		t.Fatalf("reshape has %d inputs", len(inputs))
	}
	return inputs[0]
}
