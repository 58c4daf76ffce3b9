package gobackend

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// The copying Slice gives exactly simplego's result on random windows (whole, strided, single-element
// and empty-stride axes; float32, float64 and int32), and the run logic is exercised at every rank.
func TestFastSliceMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(31))
	for trial := range 60 {
		rank := rng.Intn(5)
		dims := make([]int, rank)
		starts, limits, strides := make([]int, rank), make([]int, rank), make([]int, rank)
		for a := range dims {
			dims[a] = 1 + rng.Intn(6)
			switch rng.Intn(3) {
			case 0: // whole axis
				starts[a], limits[a], strides[a] = 0, dims[a], 1
			default:
				starts[a] = rng.Intn(dims[a])
				limits[a] = starts[a] + 1 + rng.Intn(dims[a]-starts[a])
				strides[a] = 1 + rng.Intn(3)
			}
		}
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int32}[trial%3]
		name := fmt.Sprintf("%d/%s/dims%v/starts%v/limits%v/strides%v", trial, dtype, dims, starts, limits, strides)
		build := inDType(dtype, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.Slice(x, starts, limits, strides)
		})
		x := distinctTT(rng, dims...)
		got, want := runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0]
		assertClose(t, name, got, want, 0)
		if dtype == dtypes.Float64 && len(want.data) == len(x.data) && fmt.Sprint(want.data) != fmt.Sprint(x.data) {
			t.Fatalf("%s: a full-size window must be the input", name)
		}
	}
}

// Larger windows (DenseNet's channel slices of its feature concatenations, a strided spatial window, one
// value per run) give simplego's result.
func TestFastSliceLarge(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(43))
	for _, tc := range []struct{ dims, starts, limits, strides []int }{
		{[]int{8, 16, 16, 96}, []int{0, 0, 0, 32}, []int{8, 16, 16, 96}, []int{1, 1, 1, 1}},
		{[]int{4, 33, 35, 16}, []int{1, 1, 2, 0}, []int{4, 33, 35, 16}, []int{1, 2, 2, 1}},
		{[]int{300, 301}, []int{3, 1}, []int{299, 300}, []int{1, 2}},
	} {
		name := fmt.Sprintf("dims%v/starts%v/limits%v/strides%v", tc.dims, tc.starts, tc.limits, tc.strides)
		build := inDType(dtypes.Float32, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.Slice(x, tc.starts, tc.limits, tc.strides)
		})
		x := distinctTT(rng, tc.dims...)
		got, want := runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0]
		assertClose(t, name, got, want, 0)
	}
}

// The tiled Transpose gives exactly simplego's result for random permutations of ranks 0-5, with
// contiguous and strided last axes, tails smaller than a tile and sizes above one, in three dtypes.
func TestFastTransposeMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(37))
	for trial := range 60 {
		rank := rng.Intn(6)
		dims := make([]int, rank)
		for a := range dims {
			dims[a] = 1 + rng.Intn(5)
		}
		if rank >= 2 && trial%4 == 0 {
			dims[rank-1], dims[rank-2] = 33+rng.Intn(40), 35+rng.Intn(30) // more than one 32x32 tile
		}
		perm := rng.Perm(rank)
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int32}[trial%3]
		name := fmt.Sprintf("%d/%s/dims%v/perm%v", trial, dtype, dims, perm)
		build := inDType(dtype, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.Transpose(x, perm...)
		})
		x := distinctTT(rng, dims...)
		got, want := runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0]
		assertClose(t, name, got, want, 0)
	}
}

// The flatten's transposes of a small net's features (NHWC to NCHW and back, large enough to be shared
// out between the cores) and permutations whose axes merge give simplego's result; the merged form of a
// permutation is what the tiles walk.
func TestFastTransposeMergedAndSplit(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(41))
	for _, tc := range []struct{ dims, perm []int }{
		{[]int{32, 7, 7, 64}, []int{0, 3, 1, 2}},
		{[]int{32, 64, 7, 7}, []int{0, 2, 3, 1}},
		{[]int{3, 1, 40, 5, 600}, []int{4, 0, 1, 2, 3}},
		{[]int{2, 3, 4, 5, 6, 7, 8}, []int{5, 6, 0, 1, 4, 2, 3}},
		{[]int{70000}, []int{0}},
	} {
		name := fmt.Sprintf("dims%v/perm%v", tc.dims, tc.perm)
		build := inDType(dtypes.Float32, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.Transpose(x, tc.perm...)
		})
		x := distinctTT(rng, tc.dims...)
		got, want := runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0]
		assertClose(t, name, got, want, 0)
	}
	for _, tc := range []struct{ dims, perm, wantDims, wantPerm []int }{
		{[]int{128, 7, 7, 64}, []int{0, 3, 1, 2}, []int{128, 49, 64}, []int{0, 2, 1}},
		{[]int{128, 64, 7, 7}, []int{0, 2, 3, 1}, []int{128, 64, 49}, []int{0, 2, 1}},
		{[]int{3, 1, 40, 5, 600}, []int{4, 0, 1, 2, 3}, []int{600, 600}, []int{1, 0}},
		{[]int{2, 3, 4}, []int{0, 1, 2}, []int{24}, []int{0}},
		{[]int{1, 1}, []int{1, 0}, []int{}, []int{}},
	} {
		d, p := mergeTransposeAxes(tc.dims, tc.perm)
		if fmt.Sprint(d, p) != fmt.Sprint(tc.wantDims, tc.wantPerm) {
			t.Errorf("mergeTransposeAxes(%v, %v) = %v, %v; want %v, %v", tc.dims, tc.perm, d, p, tc.wantDims, tc.wantPerm)
		}
	}
}

// simplegoOps is the Go backend with simplego's own DotGeneral, Slice and Transpose: the reference the
// fast kernels are compared with.
func simplegoOps(t *testing.T) *Backend {
	t.Helper()
	slow, err := newBackend("simplego_dot,strict_conv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Finalize)
	return slow
}

// inDType builds op on the float64 input converted to dtype, and converts the result back to float64
// for comparison.
func inDType(dtype dtypes.DType, op func(b backends.Builder, x backends.Op) (backends.Op, error)) func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
	return func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
		x := in[0]
		var err error
		if dtype != dtypes.Float64 {
			if x, err = b.ConvertDType(x, dtype); err != nil {
				return nil, err
			}
		}
		y, err := op(b, x)
		if err != nil || dtype == dtypes.Float64 {
			return []backends.Op{y}, err
		}
		y, err = b.ConvertDType(y, dtypes.Float64)
		return []backends.Op{y}, err
	}
}
