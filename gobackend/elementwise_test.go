package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// specialTT is randTT with zeros of both signs, infinities, NaNs and large values sprinkled in.
func specialTT(rng *rand.Rand, dims ...int) tt {
	t := randTT(rng, dims...)
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 3e38, -1e-40}
	for i := range t.data {
		if rng.Intn(10) == 0 {
			t.data[i] = specials[rng.Intn(len(specials))]
		}
	}
	return t
}

// assertSameBits fails unless got and want hold the same values bit for bit (float32 results widened
// to float64 exactly), any NaN matching any NaN.
func assertSameBits(t *testing.T, what string, got, want tt) {
	t.Helper()
	if fmt.Sprint(got.dims) != fmt.Sprint(want.dims) {
		t.Fatalf("%s: dims %v, want %v", what, got.dims, want.dims)
	}
	for i := range want.data {
		g, w := got.data[i], want.data[i]
		if math.IsNaN(g) && math.IsNaN(w) {
			continue
		}
		if math.Float64bits(g) != math.Float64bits(w) {
			t.Fatalf("%s: flat %d = %v, want %v", what, i, g, w)
		}
	}
}

// randBroadcastDims returns dims with some axes set to 1, or a scalar shape.
func randBroadcastDims(rng *rand.Rand, dims []int) []int {
	if rng.Intn(4) == 0 {
		return nil
	}
	b := make([]int, len(dims))
	for a, d := range dims {
		if rng.Intn(3) == 0 {
			b[a] = 1
		} else {
			b[a] = d
		}
	}
	return b
}

// randOutDims returns dims of rank 0-4 of sizes 1-6, sometimes large enough for the loops to be split
// over the cores (TestMain lowers the split threshold).
func randOutDims(rng *rand.Rand, trial int) []int {
	if trial%4 == 0 {
		return [][]int{{3, 70, 90}, {2, 16, 16, 64}, {20000}, {130, 1, 131}, {4, 4, 2, 1100}, {2, 32, 32, 72}}[trial/4%6]
	}
	dims := make([]int, rng.Intn(5))
	for a := range dims {
		dims[a] = 1 + rng.Intn(6)
	}
	return dims
}

// The float32 and float64 binary ops (and GreaterThan) give exactly simplego's results for equal shapes, per-axis
// broadcasts and scalars on either side, special values included, whether or not they write over an
// input.
func TestFastBinaryMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(41))
	ops := []struct {
		name string
		fn   func(b backends.Builder) func(x, y backends.Op) (backends.Op, error)
	}{
		{"Add", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Add }},
		{"Sub", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Sub }},
		{"Mul", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Mul }},
		{"Div", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Div }},
		{"Max", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Max }},
		{"Min", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Min }},
		{"GreaterThan", func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.GreaterThan }},
	}
	for trial := range 224 {
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial/112]
		op := ops[trial%len(ops)]
		dims := randOutDims(rng, trial/len(ops))
		lDims, rDims := dims, dims
		switch trial / len(ops) % 4 { // Each op meets each pattern.
		case 1:
			rDims = randBroadcastDims(rng, dims)
		case 2:
			lDims = randBroadcastDims(rng, dims)
		case 3:
			lDims, rDims = randBroadcastDims(rng, dims), randBroadcastDims(rng, dims)
		}
		keepInput := trial/len(ops)%2 == 1 // The converted lhs is also an output: the op may not write over it.
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			x, err := b.ConvertDType(in[0], dtype)
			if err != nil {
				return nil, err
			}
			y, err := b.ConvertDType(in[1], dtype)
			if err != nil {
				return nil, err
			}
			z, err := op.fn(b)(x, y)
			if err != nil {
				return nil, err
			}
			outs := []backends.Op{z}
			if keepInput {
				outs = append(outs, x)
			}
			return asFloat64(b, outs)
		}
		x, y := specialTT(rng, lDims...), specialTT(rng, rDims...)
		got, want := runOps(t, fast, build, x, y), runOps(t, slow, build, x, y)
		name := fmt.Sprintf("%d/%s/%s/%v/%v", trial, dtype, op.name, lDims, rDims)
		for i := range want {
			assertSameBits(t, fmt.Sprintf("%s/out%d", name, i), got[i], want[i])
		}
	}
}

// Equal gives exactly simplego's results for int32, float32 and float64 operands of equal shapes,
// per-axis broadcasts and scalars on either side (the labels-against-classes comparison among them),
// with many equal pairs, and NaN, zeros of both signs and infinities in the floats.
func TestFastEqualMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(43))
	for trial := range 96 {
		dtype := []dtypes.DType{dtypes.Int32, dtypes.Float32, dtypes.Float64}[trial%3]
		dims := randOutDims(rng, trial/3)
		lDims, rDims := dims, dims
		switch trial / 3 % 4 {
		case 1:
			rDims = randBroadcastDims(rng, dims)
		case 2:
			lDims = randBroadcastDims(rng, dims)
		case 3:
			lDims, rDims = randBroadcastDims(rng, dims), randBroadcastDims(rng, dims)
		}
		if trial%24 == 0 { // Labels [batch, 1] against the classes [1, classes].
			dims, lDims, rDims = []int{128, 10}, []int{128, 1}, []int{1, 10}
		}
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			x, err := b.ConvertDType(in[0], dtype)
			if err != nil {
				return nil, err
			}
			y, err := b.ConvertDType(in[1], dtype)
			if err != nil {
				return nil, err
			}
			z, err := b.Equal(x, y)
			if err != nil {
				return nil, err
			}
			out, err := b.ConvertDType(z, dtypes.Float64)
			return []backends.Op{out}, err
		}
		x, y := specialTT(rng, lDims...), specialTT(rng, rDims...)
		for _, v := range []tt{x, y} {
			for i := range v.data {
				if dtype == dtypes.Int32 || rng.Intn(2) == 0 {
					v.data[i] = float64(rng.Intn(3)) // Many equal pairs.
				}
			}
		}
		got, want := runOps(t, fast, build, x, y), runOps(t, slow, build, x, y)
		assertSameBits(t, fmt.Sprintf("%d/%s/%v/%v", trial, dtype, lDims, rDims), got[0], want[0])
	}
}

// ArgMax and ArgMin over the last axis of float32 and float64 rows (ties, NaNs, infinities and zeros
// of both signs among them) and over another axis (left to simplego), and bools converted to float32
// and float64, give exactly simplego's values.
func TestFastArgMinMaxAndBoolsMatchSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(44))
	for trial := range 48 {
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial%2]
		isMin := trial/2%2 == 1
		dims := [][]int{{128, 10}, {7, 1}, {3, 5, 9}, {1, 300}, {6}, {4, 2, 3}}[trial/4%6]
		axis := len(dims) - 1
		if trial >= 24 {
			axis = 0 // Left to simplego unless the rank is 1.
		}
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			x, err := b.ConvertDType(in[0], dtype)
			if err != nil {
				return nil, err
			}
			arg, err := b.ArgMinMax(x, axis, dtypes.Int32, isMin)
			if err != nil {
				return nil, err
			}
			zero, err := b.Constant([]float64{0})
			if err != nil {
				return nil, err
			}
			if zero, err = b.ConvertDType(zero, dtype); err != nil {
				return nil, err
			}
			positive, err := b.GreaterThan(x, zero)
			if err != nil {
				return nil, err
			}
			mask, err := b.ConvertDType(positive, dtype)
			if err != nil {
				return nil, err
			}
			outs := []backends.Op{arg, mask}
			return asFloat64(b, outs)
		}
		x := specialTT(rng, dims...)
		for i := range x.data {
			if rng.Intn(4) == 0 {
				x.data[i] = float64(rng.Intn(3)) // Ties.
			}
		}
		got, want := runOps(t, fast, build, x), runOps(t, slow, build, x)
		for i := range want {
			assertSameBits(t, fmt.Sprintf("%d/%s/%v/axis %d/min %v/out%d", trial, dtype, dims, axis, isMin, i), got[i], want[i])
		}
	}
}

// Short rows times a per-channel row (the depthwise convolution's products), large enough to be split
// over the cores, on either side: exactly simplego's values in float32 and float64.
func TestFastBinaryShortRowsMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(42))
	ops := map[string]func(b backends.Builder) func(x, y backends.Op) (backends.Op, error){
		"Add": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Add },
		"Sub": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Sub },
		"Mul": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Mul },
		"Div": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Div },
		"Max": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Max },
		"Min": func(b backends.Builder) func(x, y backends.Op) (backends.Op, error) { return b.Min },
	}
	full, row := []int{2, 20, 20, 40}, []int{1, 1, 1, 40}
	for name, fn := range ops {
		for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
			for _, swapped := range []bool{false, true} {
				lDims, rDims := full, row
				if swapped {
					lDims, rDims = row, full
				}
				build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
					x, err := b.ConvertDType(in[0], dtype)
					if err != nil {
						return nil, err
					}
					y, err := b.ConvertDType(in[1], dtype)
					if err != nil {
						return nil, err
					}
					z, err := fn(b)(x, y)
					if err != nil {
						return nil, err
					}
					z, err = b.ConvertDType(z, dtypes.Float64)
					return []backends.Op{z}, err
				}
				x, y := specialTT(rng, lDims...), specialTT(rng, rDims...)
				assertSameBits(t, fmt.Sprintf("%s/%s/%v/%v", name, dtype, lDims, rDims), runOps(t, fast, build, x, y)[0], runOps(t, slow, build, x, y)[0])
			}
		}
	}
}

// BroadcastInDim gives exactly simplego's result for scalars, new axes at any position and expanded
// size-1 axes, in float32, float64 and int32.
func TestFastBroadcastInDimMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(43))
	for trial := range 40 {
		outDims := randOutDims(rng, trial)
		var inDims, axes []int
		for a, d := range outDims {
			switch rng.Intn(3) {
			case 0: // not an operand axis
			case 1:
				inDims, axes = append(inDims, 1), append(axes, a)
			default:
				inDims, axes = append(inDims, d), append(axes, a)
			}
		}
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int32}[trial%3]
		build := inDType(dtype, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.BroadcastInDim(x, shapes.Make(dtype, outDims...), axes)
		})
		x := distinctTT(rng, inDims...)
		name := fmt.Sprintf("%d/%s/in%v/out%v/axes%v", trial, dtype, inDims, outDims, axes)
		assertSameBits(t, name, runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0])
	}
}

// Where gives exactly simplego's result for shaped and scalar values, large enough to be split.
func TestFastWhereMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(47))
	for trial := range 12 {
		dims := randOutDims(rng, 4*trial)
		if trial%2 == 1 {
			dims = []int{3, 5} // Small: simplego's own.
		}
		scalarT, scalarF := trial%3 == 1, trial%3 == 2
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial%2]
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			zero, err := b.Constant([]float64{0})
			if err != nil {
				return nil, err
			}
			cond, err := b.GreaterThan(in[0], zero)
			if err != nil {
				return nil, err
			}
			vals := []backends.Op{in[1], in[2]}
			if scalarT {
				vals[0] = zero
			}
			if scalarF {
				vals[1] = zero
			}
			for i := range vals {
				if vals[i], err = b.ConvertDType(vals[i], dtype); err != nil {
					return nil, err
				}
			}
			out, err := b.Where(cond, vals[0], vals[1])
			if err != nil {
				return nil, err
			}
			out, err = b.ConvertDType(out, dtypes.Float64)
			return []backends.Op{out}, err
		}
		c, x, y := randTT(rng, dims...), specialTT(rng, dims...), specialTT(rng, dims...)
		name := fmt.Sprintf("%d/%s/%v/scalars %v %v", trial, dtype, dims, scalarT, scalarF)
		assertSameBits(t, name, runOps(t, fast, build, c, x, y)[0], runOps(t, slow, build, c, x, y)[0])
	}
}

// ReduceSum over random axis subsets gives exactly simplego's float32 and float64 sums (same order of additions),
// including the per-channel sums of an NHWC tensor split over the cores.
func TestFastReduceSumMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(53))
	for trial := range 80 {
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial/40]
		dims := randOutDims(rng, trial%40)
		var axes []int
		for a := range dims {
			if rng.Intn(2) == 0 {
				axes = append(axes, a)
			}
		}
		if trial%8 == 0 && len(dims) == 4 {
			axes = []int{0, 1, 2} // BatchNorm's statistics.
		}
		if trial%8 == 4 {
			dims, axes = []int{131 + trial%3, 10}, []int{1} // A loss's per-example sums over the classes.
		}
		build := inDType(dtype, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.ReduceSum(x, axes...)
		})
		x := randTT(rng, dims...)
		name := fmt.Sprintf("%d/%s/%v/axes%v", trial, dtype, dims, axes)
		assertSameBits(t, name, runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0])
	}
}

// ReduceMax over random axis subsets gives exactly simplego's float32 and float64 maxima, zeros of both
// signs, infinities and NaNs included (a row of -Inf among them).
func TestFastReduceMaxMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(59))
	for trial := range 82 {
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial%2]
		dims := randOutDims(rng, trial/2%40)
		var axes []int
		for a := range dims {
			if rng.Intn(2) == 0 {
				axes = append(axes, a)
			}
		}
		if trial%10 == 0 {
			dims, axes = []int{9, 49}, []int{1} // Softmax's row maxima: whole groups of rows and the rest.
		}
		x := specialTT(rng, dims...)
		if trial >= 80 {
			dims, axes = []int{7, 49}, []int{1}
			x = randTT(rng, dims...)
			for i := range x.data {
				x.data[i] = math.Inf(-1)
			}
		}
		build := inDType(dtype, func(b backends.Builder, x backends.Op) (backends.Op, error) {
			return b.ReduceMax(x, axes...)
		})
		name := fmt.Sprintf("%d/%s/%v/axes%v", trial, dtype, dims, axes)
		assertSameBits(t, name, runOps(t, fast, build, x)[0], runOps(t, slow, build, x)[0])
	}
}

// Logistic (and Exp, Erf, Tanh, Log) in float32 and float64 gives exactly simplego's values (large
// tensors split over the cores, special values included), whether or not it writes over its input.
func TestFastLogisticMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(54))
	unary := []func(b backends.Builder, x backends.Op) (backends.Op, error){
		backends.Builder.Logistic, backends.Builder.Exp, backends.Builder.Erf, backends.Builder.Tanh, backends.Builder.Log,
	}
	for trial := range 40 + 4*(len(unary)-1) {
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64}[trial%2]
		dims := randOutDims(rng, trial/2%20)
		keepInput := trial/2%2 == 1
		op := unary[0]
		if trial >= 40 {
			op = unary[(trial-40)/4+1]
		}
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			x, err := b.ConvertDType(in[0], dtype)
			if err != nil {
				return nil, err
			}
			y, err := op(b, x)
			if err != nil {
				return nil, err
			}
			outs := []backends.Op{y}
			if keepInput {
				outs = append(outs, x)
			}
			return asFloat64(b, outs)
		}
		x := specialTT(rng, dims...)
		for i := range x.data {
			x.data[i] *= 20 // Both branches, and the saturated ends.
		}
		got, want := runOps(t, fast, build, x), runOps(t, slow, build, x)
		for i := range want {
			assertSameBits(t, fmt.Sprintf("%d/%s/%v/out%d", trial, dtype, dims, i), got[i], want[i])
		}
	}
}

// The strided loop merges what it can and visits every element once in row-major order, whatever the
// axis it is restricted on.
func TestStridedLoop(t *testing.T) {
	dims := []int{2, 1, 3, 4}
	out := kernels.RowMajorStrides(dims)
	bcast := []int{0, 0, 1, 0} // [1, 1, 3, 1] broadcast along axes 0 and 3
	l := newStridedLoop(dims, out, bcast)
	if fmt.Sprint(l.dims) != "[2 3 4]" {
		t.Fatalf("merged dims %v, want [2 3 4]", l.dims)
	}
	same := newStridedLoop(dims, out, out)
	if fmt.Sprint(same.dims) != "[24]" {
		t.Fatalf("equal layouts merged to %v, want [24]", same.dims)
	}
	for axis := range l.dims {
		var seen []int
		for lo := 0; lo < l.dims[axis]; lo++ {
			l.run(axis, lo, lo+1, func(off []int, n int) {
				for i := range n {
					seen = append(seen, off[0]+i*l.rowStride(0), off[1]+i*l.rowStride(1))
				}
			})
		}
		if len(seen) != 2*24 {
			t.Fatalf("axis %d: visited %d elements, want 24", axis, len(seen)/2)
		}
		counts := map[int]int{}
		for i := 0; i < len(seen); i += 2 {
			counts[seen[i]]++
			o := seen[i]
			if want := (o / 4 % 3); seen[i+1] != want { // The broadcast operand's offset is the axis-2 index.
				t.Fatalf("axis %d: output %d read operand %d, want %d", axis, o, seen[i+1], want)
			}
		}
		if len(counts) != 24 {
			t.Fatalf("axis %d: %d distinct outputs, want 24", axis, len(counts))
		}
	}
}

// The row Gather (leading axes indexed, the rest whole) gives exactly simplego's result, indices out
// of range clamped, for int32 and int64 indices and three operand dtypes; other gathers keep simplego's.
func TestFastGatherMatchesSimplego(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(59))
	for trial := range 24 {
		rank := 1 + rng.Intn(4)
		dims := make([]int, rank)
		for a := range dims {
			dims[a] = 1 + rng.Intn(5)
		}
		c := 1 + rng.Intn(rank)
		batch := []int{1 + rng.Intn(4), 1 + rng.Intn(3)}[:1+rng.Intn(2)]
		if len(batch) > rank {
			batch = batch[:1] // GoMLX's shape inference bounds indexVectorAxis by the operand's rank.
		}
		nIdx := kernels.Prod(batch)
		idx := make([]float64, nIdx*c)
		for i := range idx {
			idx[i] = float64(rng.Intn(dims[i%c]+4) - 2) // Some out of range on both sides.
		}
		dtype := []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int32}[trial%3]
		idxType := []dtypes.DType{dtypes.Int32, dtypes.Int64}[trial/3%2]
		collapsed := iotaInts(c)
		if trial%8 == 7 && rank > c {
			collapsed = nil // Not a row gather (slices keep their axes): simplego's own.
		}
		sliceSizes := append(ones(c), dims[c:]...)
		var offsetAxes []int
		for a := range rank - len(collapsed) {
			offsetAxes = append(offsetAxes, len(batch)+a)
		}
		build := func(b backends.Builder, in []backends.Op) ([]backends.Op, error) {
			x, err := b.ConvertDType(in[0], dtype)
			if err != nil {
				return nil, err
			}
			ix, err := b.ConvertDType(in[1], idxType)
			if err != nil {
				return nil, err
			}
			g, err := b.Gather(x, ix, len(batch), offsetAxes, collapsed, iotaInts(c), sliceSizes, false)
			if err != nil {
				return nil, err
			}
			g, err = b.ConvertDType(g, dtypes.Float64)
			return []backends.Op{g}, err
		}
		x := distinctTT(rng, dims...)
		ix := tt{dims: append(slices.Clone(batch), c), data: idx}
		name := fmt.Sprintf("%d/%s/%s/dims%v/c%d/batch%v", trial, dtype, idxType, dims, c, batch)
		assertSameBits(t, name, runOps(t, fast, build, x, ix)[0], runOps(t, slow, build, x, ix)[0])
	}
}

// The vector exp and logistic kernels give math.Exp's and simplego's logistic's bits on every value
// they take (float32 and float64 inputs over the whole range they accept, ties of the exponent's
// rounding, zeros of both signs), and stop before a group holding one they leave to math.Exp.
func TestVectorExpMatchesMath(t *testing.T) {
	if !kernels.HasExpAVX2 {
		t.Skip("no vector exp on this CPU")
	}
	rng := rand.New(rand.NewSource(57))
	const n = 1 << 14
	x64 := make([]float64, n)
	for i := range x64 {
		switch i % 5 {
		case 0:
			x64[i] = rng.NormFloat64() * 3
		case 1:
			x64[i] = (rng.Float64()*2 - 1) * 700
		case 2:
			x64[i] = (float64(rng.Intn(2000)-1000) + 0.5) * math.Ln2 // Exponent rounding ties.
		case 3:
			x64[i] = rng.NormFloat64() * 1e-6
		default:
			x64[i] = []float64{0, math.Copysign(0, -1), 700, -700, 1e-310}[rng.Intn(5)]
		}
	}
	x32 := make([]float32, n)
	for i, v := range x64 {
		x32[i] = float32(v)
	}
	for _, logistic := range []bool{false, true} {
		fn := math.Exp
		if logistic {
			fn = sgLogistic
		}
		o64, o32 := make([]float64, n), make([]float32, n)
		if done := unaryVec(o64, x64, vecOf(logistic)); done != n {
			t.Fatalf("logistic %v: float64 kernel stopped at %d of %d", logistic, done, n)
		}
		if done := unaryVec(o32, x32, vecOf(logistic)); done != n {
			t.Fatalf("logistic %v: float32 kernel stopped at %d of %d", logistic, done, n)
		}
		for i := range n {
			if want := fn(x64[i]); math.Float64bits(o64[i]) != math.Float64bits(want) {
				t.Fatalf("logistic %v float64(%v) = %v, want %v", logistic, x64[i], o64[i], want)
			}
			if want := float32(fn(float64(x32[i]))); math.Float32bits(o32[i]) != math.Float32bits(want) {
				t.Fatalf("logistic %v float32(%v) = %v, want %v", logistic, x32[i], o32[i], want)
			}
		}
		// A group with a value outside [-700, 700] stops the kernel before it.
		y := []float64{1, 2, 3, 4, 5, 701, 6, 7, 8}
		if done := unaryVec(make([]float64, len(y)), y, vecOf(logistic)); done != 4 {
			t.Fatalf("logistic %v: stopped at %d, want 4", logistic, done)
		}
	}
}

func vecOf(logistic bool) vecUnary {
	if logistic {
		return vecLogistic
	}
	return vecExp
}

// The vector erf gives math.Erf's bits on every value it takes (float32 and float64 inputs from every
// branch of math.Erf, their borders, tiny and subnormal values, zeros of both signs), and stops before
// a group holding NaN or an infinity.
func TestVectorErfMatchesMath(t *testing.T) {
	switch {
	case !kernels.HasExpAVX2:
		t.Skip("no vector erf on this CPU")
	case !kernels.HasErfAVX2 && goFusesMulAdd():
		t.Skip("this build fuses math.Erf's multiply-adds: the vector erf is off")
	case !kernels.HasErfAVX2:
		t.Fatal("the vector erf disagrees with math.Erf (erfVecAgrees)")
	}
	rng := rand.New(rand.NewSource(58))
	const n = 1 << 14
	x64 := make([]float64, n)
	for i := range x64 {
		switch i % 6 {
		case 0:
			x64[i] = rng.NormFloat64()
		case 1:
			x64[i] = (rng.Float64()*2 - 1) * 7
		case 2:
			x64[i] = []float64{0.84375, 1.25, 1 / 0.35, 6, 1.0 / (1 << 28), 2.848094538889218e-306}[rng.Intn(6)] * (1 + (rng.Float64()-0.5)*1e-15)
		case 3:
			x64[i] = rng.NormFloat64() * 1e-9
		case 4:
			x64[i] = rng.NormFloat64() * 1e-300
		default:
			x64[i] = []float64{0, math.Copysign(0, -1), 1e-310, -6.5, 30}[rng.Intn(5)]
		}
		if rng.Intn(2) == 0 {
			x64[i] = -x64[i]
		}
	}
	x32 := make([]float32, n)
	for i, v := range x64 {
		x32[i] = float32(v)
	}
	o64, o32 := make([]float64, n), make([]float32, n)
	if done := unaryVec(o64, x64, vecErf); done != n {
		t.Fatalf("float64 kernel stopped at %d of %d", done, n)
	}
	if done := unaryVec(o32, x32, vecErf); done != n {
		t.Fatalf("float32 kernel stopped at %d of %d", done, n)
	}
	for i := range n {
		if want := math.Erf(x64[i]); math.Float64bits(o64[i]) != math.Float64bits(want) {
			t.Fatalf("erf float64(%v) = %v, want %v", x64[i], o64[i], want)
		}
		if want := float32(math.Erf(float64(x32[i]))); math.Float32bits(o32[i]) != math.Float32bits(want) {
			t.Fatalf("erf float32(%v) = %v, want %v", x32[i], o32[i], want)
		}
	}
	y := []float64{1, 2, 3, 4, 5, math.NaN(), 6, 7, 8}
	if done := unaryVec(make([]float64, len(y)), y, vecErf); done != 4 {
		t.Fatalf("stopped at %d, want 4", done)
	}
}

// Operands the compiler cannot fold: x·y rounds to 1 unless the multiply-add is fused.
var fmaX, fmaY, fmaZ = 1 + 0x1p-30, 1 - 0x1p-30, -1.0

// goFusesMulAdd reports whether this build compiles x*y+z to a fused multiply-add (GOAMD64=v3).
func goFusesMulAdd() bool { return mulAdd(fmaX, fmaY, fmaZ) != 0 }

//go:noinline
func mulAdd(x, y, z float64) float64 { return x*y + z }

// asFloat64 converts every op of outs to float64, as runOps compares them.
func asFloat64(b backends.Builder, outs []backends.Op) ([]backends.Op, error) {
	for i, o := range outs {
		var err error
		if outs[i], err = b.ConvertDType(o, dtypes.Float64); err != nil {
			return nil, err
		}
	}
	return outs, nil
}
