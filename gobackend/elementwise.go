package gobackend

import (
	"math"
	"runtime"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Element-wise executors for the hot ops of a training step. simplego runs every element-wise op on one
// core, and any broadcast (BatchNorm's per-channel scale and shift, a bias) through an iterator that
// steps a multi-index per element. These executors merge the axes into as few strided loops as the
// layouts allow, so the inner loop runs over a whole row (a channel vector, or the whole tensor when
// the shapes are equal) with each operand either contiguous or held constant, and split the rows over
// the cores. The arithmetic is simplego's, value by value in the same order (ReduceSum adds each
// output's terms in the same sequence), so results are bit-identical; the tests check it.

// addElementwiseExecutors registers the element-wise executors.
func addElementwiseExecutors(m map[backends.OpType]sgNodeExecutor) {
	for op, code := range map[backends.OpType]binOp{
		backends.OpTypeAdd: binAdd, backends.OpTypeSub: binSub, backends.OpTypeMul: binMul,
		backends.OpTypeDiv: binDiv, backends.OpTypeMax: binMax, backends.OpTypeMin: binMin,
	} {
		m[op] = fastBinaryExecutor(op, code)
	}
	m[backends.OpTypeBroadcastInDim] = execFastBroadcastInDim
	m[backends.OpTypeWhere] = execFastWhere
	m[backends.OpTypeReduceSum] = execFastReduceSum
	m[backends.OpTypeReduceMax] = execFastReduceMax
	m[backends.OpTypeGreaterThan] = execFastGreaterThan
	m[backends.OpTypeEqual] = execFastEqual
	m[backends.OpTypeArgMinMax] = execFastArgMinMax
	m[backends.OpTypeConvertDType] = execFastConvertDType
	m[backends.OpTypeLogistic] = fastUnaryExecutor(backends.OpTypeLogistic, sgLogistic, vecLogistic)
	// GELU's (ConvNeXt, ViT) and softmax's transcendentals, simplego's formula T(math.F(float64(x))).
	m[backends.OpTypeExp] = fastUnaryExecutor(backends.OpTypeExp, math.Exp, vecExp)
	m[backends.OpTypeErf] = fastUnaryExecutor(backends.OpTypeErf, math.Erf, vecErf)
	m[backends.OpTypeTanh] = fastUnaryExecutor(backends.OpTypeTanh, math.Tanh, vecNone)
	m[backends.OpTypeLog] = fastUnaryExecutor(backends.OpTypeLog, math.Log, vecNone)
}

// sgLogistic is simplego's logistic, value for value (computed in float64 for both dtypes).
func sgLogistic(x float64) float64 {
	if x >= 0 {
		return 1.0 / (1.0 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1.0 + e)
}

// vecUnary names the vector kernel of a unary op (kernels/exp_amd64.s), bit-identical to its fn.
type vecUnary int

const (
	vecNone vecUnary = iota
	vecExp
	vecLogistic
	vecErf
)

// fastUnaryExecutor returns the executor of a float32 or float64 unary op computed by fn in float64
// (as simplego does), split over the cores, with its vector kernel where there is one; other dtypes
// go to simplego's.
func fastUnaryExecutor(opType backends.OpType, fn func(float64) float64, vec vecUnary) sgNodeExecutor {
	return func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
		orig := sgExecutors[opType]
		if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 1 {
			return orig(backend, node, inputs, inputsOwned)
		}
		outShape := nodeShape(node)
		inShape, err := backend.BufferShape(inputs[0])
		dt := outShape.DType
		if err != nil || (dt != dtypes.Float32 && dt != dtypes.Float64) || !inShape.Equal(outShape) {
			return orig(backend, node, inputs, inputsOwned)
		}
		inAny, err := backend.BufferData(inputs[0])
		if err != nil {
			return orig(backend, node, inputs, inputsOwned)
		}
		output := inputs[0] // Like simplego, write over an input this op is the last user of.
		if inputsOwned[0] {
			inputs[0] = nil
		} else {
			output = backend.NewBuffer(outShape)
		}
		outAny, err := backend.BufferData(output)
		if err != nil {
			return nil, err
		}
		if dt == dtypes.Float64 {
			unaryRows(outAny.([]float64), inAny.([]float64), fn, vec)
		} else {
			unaryRows(outAny.([]float32), inAny.([]float32), fn, vec)
		}
		return output, nil
	}
}

// unaryRows computes out[i] = T(fn(float64(in[i]))), split over the cores: through the vector kernel
// (which stops before a group of values it leaves to fn) when there is one.
func unaryRows[T kernels.Float](out, in []T, fn func(float64) float64, vec vecUnary) {
	body := func(lo, hi int) {
		i := lo
		for vec != vecNone && kernels.HasExpAVX2 && (vec != vecErf || kernels.HasErfAVX2) && hi-i >= 4 {
			i += unaryVec(out[i:hi], in[i:hi], vec)
			for end := min(i+4, hi); i < end; i++ {
				out[i] = T(fn(float64(in[i])))
			}
		}
		for ; i < hi; i++ {
			out[i] = T(fn(float64(in[i])))
		}
	}
	n := len(out)
	threads := runtime.GOMAXPROCS(0)
	chunks := min(n/(elementwiseGrain/8), 4*threads) // fn costs tens of cycles: a smaller grain.
	if threads == 1 || chunks <= 1 || !kernels.WorthSplitting(float64(n)*kernels.ElementNs*4) {
		body(0, n)
		return
	}
	kernels.ParallelChunks(kernels.SplitRange(n, chunks, 1), min(threads, chunks), body)
}

// unaryVec runs the vector exp, logistic or erf kernel over whole groups of 4 from the start of in
// until one holds a value the kernel leaves to the math package; it returns how many values it did.
func unaryVec[T kernels.Float](out, in []T, vec vecUnary) int {
	n := min(len(out), len(in))
	if n < 4 {
		return 0
	}
	if kernels.IsFloat64[T]() {
		o, x := unsafe.Slice((*float64)(unsafe.Pointer(&out[0])), n), unsafe.Slice((*float64)(unsafe.Pointer(&in[0])), n)
		if vec == vecErf {
			return kernels.ErfF64(n, &o[0], &x[0])
		}
		return kernels.ExpF64(n, &o[0], &x[0], vec == vecLogistic)
	}
	if vec == vecErf {
		return kernels.ErfF32(n, &kernels.AsFloat32(out)[0], &kernels.AsFloat32(in)[0])
	}
	return kernels.ExpF32(n, &kernels.AsFloat32(out)[0], &kernels.AsFloat32(in)[0], vec == vecLogistic)
}

// elementwiseGrain is the fewest elements worth handing to another core.
const elementwiseGrain = 1 << 14

// stridedLoop walks an iteration space whose axes have been merged where every operand's layout
// allows: operand o's element at index (i_0, ..., i_last) is at Σ i_a·strides[o][a]. The last axis is
// the row a kernel runs over.
type stridedLoop struct {
	dims    []int
	strides [][]int
}

// newStridedLoop drops the axes of size 1 and merges adjacent axes that are contiguous for every
// operand (stride[a] == stride[a+1]·dims[a+1], which includes two broadcast axes).
func newStridedLoop(dims []int, strides ...[]int) stridedLoop {
	// One array holds the dims and every operand's strides (ops run this per call).
	r := max(len(dims), 1)
	backing := make([]int, 0, r*(1+len(strides)))
	l := stridedLoop{strides: make([][]int, len(strides)), dims: backing[:0:r]}
	for o := range strides {
		l.strides[o] = backing[r*(1+o) : r*(1+o) : r*(2+o)]
	}
	for a, d := range dims {
		if d == 1 {
			continue
		}
		if n := len(l.dims); n > 0 {
			merge := true
			for o := range strides {
				if l.strides[o][n-1] != strides[o][a]*d {
					merge = false
					break
				}
			}
			if merge {
				l.dims[n-1] *= d
				for o := range strides {
					l.strides[o][n-1] = strides[o][a]
				}
				continue
			}
		}
		l.dims = append(l.dims, d)
		for o := range strides {
			l.strides[o] = append(l.strides[o], strides[o][a])
		}
	}
	if len(l.dims) == 0 { // One element.
		l.dims = append(l.dims, 1)
		for o := range strides {
			l.strides[o] = append(l.strides[o], 0)
		}
	}
	return l
}

// rowStride is operand o's stride along the row.
func (l *stridedLoop) rowStride(o int) int { return l.strides[o][len(l.dims)-1] }

// run calls row for every row of the space with axis restricted to [lo, hi), in row-major order,
// with each operand's offset at the row's start and the row's length.
func (l *stridedLoop) run(axis, lo, hi int, row func(off []int, n int)) {
	l.runScratch(axis, lo, hi, row, nil)
}

// runScratch is run with its indices and offsets kept in scratch when it holds
// 3·len(l.dims) + len(l.strides) values (a caller running the same loop every step keeps one).
func (l *stridedLoop) runScratch(axis, lo, hi int, row func(off []int, n int), scratch []int) {
	if lo >= hi {
		return
	}
	last := len(l.dims) - 1
	if need := 3*len(l.dims) + len(l.strides); len(scratch) < need {
		scratch = make([]int, need)
	}
	begin, scratch := scratch[:len(l.dims)], scratch[len(l.dims):]
	end, scratch := scratch[:len(l.dims)], scratch[len(l.dims):]
	idx, off := scratch[:last], scratch[len(l.dims):len(l.dims)+len(l.strides)]
	clear(begin)
	copy(end, l.dims)
	begin[axis], end[axis] = lo, hi
	for o := range off {
		off[o] = 0
		for a, b := range begin {
			off[o] += b * l.strides[o][a]
		}
	}
	n := end[last] - begin[last]
	copy(idx, begin)
	for {
		row(off, n)
		a := last - 1
		for ; a >= 0; a-- {
			idx[a]++
			for o := range off {
				off[o] += l.strides[o][a]
			}
			if idx[a] < end[a] {
				break
			}
			for o := range off {
				off[o] -= (idx[a] - begin[a]) * l.strides[o][a]
			}
			idx[a] = begin[a]
		}
		if a < 0 {
			return
		}
	}
}

// runParallel runs the loop with axis split into chunks of at least elementwiseGrain elements, taken
// dynamically by up to GOMAXPROCS goroutines (the caller's included).
func (l *stridedLoop) runParallel(axis int, row func(off []int, n int)) {
	l.runChunks(axis, func(lo, hi int) { l.run(axis, lo, hi, row) })
}

// runChunks splits axis into chunks of at least elementwiseGrain elements and runs chunk(lo, hi) for
// each, on up to GOMAXPROCS goroutines (the caller's included) taking chunks dynamically.
func (l *stridedLoop) runChunks(axis int, chunk func(lo, hi int)) {
	chunks, workers := l.chunking(axis)
	if workers <= 1 {
		chunk(0, l.dims[axis])
		return
	}
	kernels.ParallelChunks(kernels.SplitRange(l.dims[axis], chunks, 1), workers, chunk)
}

// chunking is how runChunks shares axis out: in chunks among workers goroutines, or (workers 1) not
// at all.
func (l *stridedLoop) chunking(axis int) (chunks, workers int) {
	total := kernels.Prod(l.dims)
	n := l.dims[axis]
	perUnit := max(total/n, 1)
	grainUnits := max((elementwiseGrain+perUnit-1)/perUnit, 1)
	threads := runtime.GOMAXPROCS(0)
	chunks = min(n/grainUnits, 4*threads)
	if threads == 1 || chunks <= 1 || !kernels.WorthSplitting(float64(total)*kernels.ElementNs) {
		return 1, 1
	}
	return chunks, min(threads, chunks)
}

// splitAxisElementwise picks the axis to split an element-wise loop on: the outermost when it has
// enough indices to share out, else the largest.
func (l *stridedLoop) splitAxisElementwise() int {
	if l.dims[0] >= 8 {
		return 0
	}
	best := 0
	for a, d := range l.dims {
		if d > l.dims[best] {
			best = a
		}
	}
	return best
}

// broadcastStrides returns in's element strides along out's axes for an implicitly broadcast operand of
// a binary op: 0 on the axes where in has size 1 (or everywhere for a one-element operand); ok is false
// for layouts simplego's binary ops don't broadcast.
func broadcastStrides(in, out shapes.Shape) ([]int, bool) {
	strides := make([]int, out.Rank())
	if in.Size() == 1 {
		return strides, true
	}
	if in.Rank() != out.Rank() {
		return nil, false
	}
	rm := kernels.RowMajorStrides(in.Dimensions)
	for a, d := range in.Dimensions {
		switch d {
		case out.Dimensions[a]:
			strides[a] = rm[a]
		case 1:
		default:
			return nil, false
		}
	}
	return strides, true
}

type binOp = kernels.BinOp

const (
	binAdd = kernels.BinAdd
	binSub = kernels.BinSub
	binMul = kernels.BinMul
	binDiv = kernels.BinDiv
	binMax = kernels.BinMax
	binMin = kernels.BinMin
)

// fastBinaryExecutor returns the executor of a float32 or float64 binary op; other dtypes go to simplego's.
func fastBinaryExecutor(opType backends.OpType, op binOp) sgNodeExecutor {
	return func(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
		orig := sgExecutors[opType]
		if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 2 {
			return orig(backend, node, inputs, inputsOwned)
		}
		outShape := nodeShape(node)
		lhsShape, err1 := backend.BufferShape(inputs[0])
		rhsShape, err2 := backend.BufferShape(inputs[1])
		dt := outShape.DType
		if err1 != nil || err2 != nil || (dt != dtypes.Float32 && dt != dtypes.Float64) || lhsShape.DType != dt || rhsShape.DType != dt {
			return orig(backend, node, inputs, inputsOwned)
		}
		sa, ok1 := broadcastStrides(lhsShape, outShape)
		sb, ok2 := broadcastStrides(rhsShape, outShape)
		if !ok1 || !ok2 || outShape.Size() == 0 {
			return orig(backend, node, inputs, inputsOwned)
		}
		loop := newStridedLoop(outShape.Dimensions, kernels.RowMajorStrides(outShape.Dimensions), sa, sb)
		ra, rb := loop.rowStride(1), loop.rowStride(2)
		if loop.rowStride(0) != 1 && kernels.Prod(loop.dims) != 1 || ra > 1 || rb > 1 {
			return orig(backend, node, inputs, inputsOwned)
		}
		lhsAny, err1 := backend.BufferData(inputs[0])
		rhsAny, err2 := backend.BufferData(inputs[1])
		if err1 != nil || err2 != nil {
			return orig(backend, node, inputs, inputsOwned)
		}
		// Like simplego, write over an input this op is the last user of.
		var output *simplego.Buffer
		switch {
		case inputsOwned[1] && rhsShape.Equal(outShape):
			output, inputs[1] = inputs[1], nil
		case inputsOwned[0] && lhsShape.Equal(outShape):
			output, inputs[0] = inputs[0], nil
		default:
			output = backend.NewBuffer(outShape)
		}
		outAny, err := backend.BufferData(output)
		if err != nil {
			return nil, err
		}
		if dt == dtypes.Float64 {
			binaryRows(&loop, op, outAny.([]float64), lhsAny.([]float64), rhsAny.([]float64), ra, rb)
		} else {
			binaryRows(&loop, op, outAny.([]float32), lhsAny.([]float32), rhsAny.([]float32), ra, rb)
		}
		return output, nil
	}
}

// binaryRows runs kernels.BinaryRow over the loop's rows, split over the cores.
func binaryRows[T kernels.Float](loop *stridedLoop, op binOp, out, lhs, rhs []T, ra, rb int) {
	if d := loop.dims; len(d) == 2 && d[1] < 64 && ra == 1 && rb == 1 {
		// Short rows with one operand repeated on every row (a per-channel factor, as in the depthwise
		// convolution's products): whole blocks of rows per call instead of one call per row.
		n, so, sa, sb := d[1], loop.strides[0][0], loop.strides[1][0], loop.strides[2][0]
		if so == n && ((sa == n && sb == 0) || (sa == 0 && sb == n)) {
			loop.runChunks(0, func(lo, hi int) {
				if sa == 0 {
					kernels.BinaryRowBlock(op, out[lo*n:hi*n], rhs[lo*n:hi*n], lhs[:n], n, true)
				} else {
					kernels.BinaryRowBlock(op, out[lo*n:hi*n], lhs[lo*n:hi*n], rhs[:n], n, false)
				}
			})
			return
		}
	}
	loop.runParallel(loop.splitAxisElementwise(), func(off []int, n int) {
		kernels.BinaryRow(op, out[off[0]:off[0]+n], lhs[off[1]:], rhs[off[2]:], ra, rb)
	})
}

// execFastBroadcastInDim copies or repeats rows instead of simplego's per-element iterator.
func execFastBroadcastInDim(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeBroadcastInDim]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 1 {
		return orig(backend, node, inputs, inputsOwned)
	}
	outShape := nodeShape(node)
	axes, ok := nodeDataOf(node).([]int)
	inShape, err := backend.BufferShape(inputs[0])
	if !ok || err != nil || len(axes) != inShape.Rank() || inShape.DType != outShape.DType || outShape.Size() == 0 {
		return orig(backend, node, inputs, inputsOwned)
	}
	inStrides := make([]int, outShape.Rank())
	if inShape.Size() > 1 {
		rm := kernels.RowMajorStrides(inShape.Dimensions)
		for i, a := range axes {
			if a < 0 || a >= outShape.Rank() {
				return orig(backend, node, inputs, inputsOwned)
			}
			switch inShape.Dimensions[i] {
			case outShape.Dimensions[a]:
				inStrides[a] = rm[i]
			case 1:
			default:
				return orig(backend, node, inputs, inputsOwned)
			}
		}
	}
	loop := newStridedLoop(outShape.Dimensions, kernels.RowMajorStrides(outShape.Dimensions), inStrides)
	inFlat, output, outFlat, err := newCopyOutput(backend, inputs[0], outShape)
	if err != nil {
		return nil, err
	}
	switch in := inFlat.(type) {
	case []float32:
		broadcastRows(&loop, outFlat.([]float32), in)
	case []float64:
		broadcastRows(&loop, outFlat.([]float64), in)
	case []int32:
		broadcastRows(&loop, outFlat.([]int32), in)
	case []int64:
		broadcastRows(&loop, outFlat.([]int64), in)
	case []bool:
		broadcastRows(&loop, outFlat.([]bool), in)
	default:
		backend.BufferFinalize(output) //nolint:errcheck // Returned to the pool; simplego handles the dtype.
		return orig(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// broadcastRows fills each output row from the input: a copy, a repeated value, or a strided read.
func broadcastRows[T any](loop *stridedLoop, out, in []T) {
	s := loop.rowStride(1)
	loop.runParallel(loop.splitAxisElementwise(), func(off []int, n int) {
		dst := out[off[0] : off[0]+n]
		switch s {
		case 0:
			kernels.FillRow(dst, in[off[1]])
		case 1:
			copy(dst, in[off[1]:off[1]+n])
		default:
			for i := range dst {
				dst[i] = in[off[1]+i*s]
			}
		}
	})
}

// execFastWhere selects element by element like simplego (condition scalar or shaped like the output;
// each value scalar or shaped like the output), on every core.
func execFastWhere(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeWhere]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 3 {
		return orig(backend, node, inputs, inputsOwned)
	}
	outShape := nodeShape(node)
	var shp [3]shapes.Shape
	for i := range shp {
		var err error
		if shp[i], err = backend.BufferShape(inputs[i]); err != nil {
			return orig(backend, node, inputs, inputsOwned)
		}
	}
	if shp[0].IsScalar() || outShape.Size() < elementwiseGrain || !shp[0].Equal(shapes.Make(dtypes.Bool, outShape.Dimensions...)) {
		return orig(backend, node, inputs, inputsOwned) // Small or whole-tensor selections: simplego's is fine.
	}
	for _, s := range shp[1:] {
		if !s.IsScalar() && !s.Equal(outShape) {
			return orig(backend, node, inputs, inputsOwned)
		}
	}
	var flats [3]any
	for i := range flats {
		var err error
		if flats[i], err = backend.BufferData(inputs[i]); err != nil {
			return orig(backend, node, inputs, inputsOwned)
		}
	}
	var output *simplego.Buffer
	switch {
	case inputsOwned[1] && shp[1].Equal(outShape):
		output, inputs[1] = inputs[1], nil
	case inputsOwned[2] && shp[2].Equal(outShape):
		output, inputs[2] = inputs[2], nil
	default:
		output = backend.NewBuffer(outShape)
	}
	outFlat, err := backend.BufferData(output)
	if err != nil {
		return nil, err
	}
	cond := flats[0].([]bool)
	switch out := outFlat.(type) {
	case []float32:
		whereRows(cond, flats[1].([]float32), flats[2].([]float32), out)
	case []float64:
		whereRows(cond, flats[1].([]float64), flats[2].([]float64), out)
	case []int32:
		whereRows(cond, flats[1].([]int32), flats[2].([]int32), out)
	case []int64:
		whereRows(cond, flats[1].([]int64), flats[2].([]int64), out)
	default:
		// Not reached for the dtypes simplego's Where handles generically; put the inputs back first.
		if inputs[1] == nil {
			inputs[1] = output
		} else if inputs[2] == nil {
			inputs[2] = output
		} else {
			backend.BufferFinalize(output) //nolint:errcheck // Returned to the pool.
		}
		return orig(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// whereRows: out[i] = cond[i] ? t[i] : f[i], with t or f of length 1 for a scalar.
func whereRows[T any](cond []bool, t, f, out []T) {
	n := len(out)
	threads := runtime.GOMAXPROCS(0)
	chunks := min(n/elementwiseGrain, 4*threads)
	body := func(lo, hi int) {
		c, o := cond[lo:hi], out[lo:hi]
		if o32, ok := any(o).([]float32); ok { // The AVX2 kernels where the CPU has them.
			t32, f32 := any(t).([]float32), any(f).([]float32)
			st, sf := 0, 0
			if len(t) == n {
				t32, st = t32[lo:hi], 1
			}
			if len(f) == n {
				f32, sf = f32[lo:hi], 1
			}
			kernels.WhereRow(o32, c, t32, f32, 1, st, sf)
			return
		}
		switch {
		case len(t) == n && len(f) == n:
			tt, ff := t[lo:hi], f[lo:hi]
			for i, ci := range c {
				if ci {
					o[i] = tt[i]
				} else {
					o[i] = ff[i]
				}
			}
		case len(t) == n:
			tt, fv := t[lo:hi], f[0]
			for i, ci := range c {
				if ci {
					o[i] = tt[i]
				} else {
					o[i] = fv
				}
			}
		case len(f) == n:
			tv, ff := t[0], f[lo:hi]
			for i, ci := range c {
				if ci {
					o[i] = tv
				} else {
					o[i] = ff[i]
				}
			}
		default:
			tv, fv := t[0], f[0]
			for i, ci := range c {
				if ci {
					o[i] = tv
				} else {
					o[i] = fv
				}
			}
		}
	}
	if threads == 1 || chunks <= 1 || !kernels.WorthSplitting(float64(n)*kernels.ElementNs) {
		body(0, n)
		return
	}
	kernels.ParallelChunks(kernels.SplitRange(n, chunks, 1), min(threads, chunks), body)
}

// execFastReduceSum sums float32 or float64 rows: each output's terms are added in simplego's order
// (row-major over the reduced axes, starting from 0), and the work is split over kept axes only, so every
// output is summed by one goroutine and the result is bit-identical.
func execFastReduceSum(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	r, ok, err := newReduceRows(backend, node, inputs, backends.OpTypeReduceSum)
	if !ok {
		return sgExecutors[backends.OpTypeReduceSum](backend, node, inputs, inputsOwned)
	}
	if err != nil {
		return nil, err
	}
	switch in := r.in.(type) {
	case []float64:
		reduceSumRows(&r.loop, r.out.([]float64), in)
	case []float32:
		reduceSumRows(&r.loop, r.out.([]float32), in)
	}
	return r.output, nil
}

// execFastReduceMax takes the maxima of float32 or float64 rows (softmax's row maxima) as simplego
// does, value by value from -Inf (the dtype's lowest value) with Go's max, each output's terms in simplego's
// order, instead of its iterator step per value; the work is split over kept axes only.
func execFastReduceMax(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	r, ok, err := newReduceRows(backend, node, inputs, backends.OpTypeReduceMax)
	if !ok {
		return sgExecutors[backends.OpTypeReduceMax](backend, node, inputs, inputsOwned)
	}
	if err != nil {
		return nil, err
	}
	switch in := r.in.(type) {
	case []float64:
		reduceMaxRows(&r.loop, r.out.([]float64), in, math.Inf(-1))
	case []float32:
		reduceMaxRows(&r.loop, r.out.([]float32), in, float32(math.Inf(-1)))
	}
	return r.output, nil
}

// reduceRows is a float32 or float64 reduction laid out as rows: loop's operand 0 the output, 1 the
// input, each input row either reduced to one output (rowStride(0) 0) or matched value by value with
// an output row (1).
type reduceRows struct {
	loop    stridedLoop
	in, out any
	output  *simplego.Buffer
}

// newReduceRows lays out the reduction node (of type op) over inputs; ok is false where it leaves the
// node to simplego (another dtype, a layout it does not take).
func newReduceRows(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, op backends.OpType) (r reduceRows, ok bool, err error) {
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 1 || nodeOpType(node) != op {
		return r, false, nil
	}
	outShape := nodeShape(node)
	axes, ok := nodeDataOf(node).([]int)
	inShape, err := backend.BufferShape(inputs[0])
	dt := inShape.DType
	if !ok || len(axes) == 0 || err != nil || (dt != dtypes.Float32 && dt != dtypes.Float64) || outShape.DType != dt || inShape.Size() == 0 {
		return r, false, nil
	}
	reduced := make([]bool, inShape.Rank())
	for _, a := range axes {
		if a < 0 || a >= inShape.Rank() {
			return r, false, nil
		}
		reduced[a] = true
	}
	outStrides := make([]int, inShape.Rank())
	stride := 1
	for a := inShape.Rank() - 1; a >= 0; a-- {
		if !reduced[a] {
			outStrides[a] = stride
			stride *= inShape.Dimensions[a]
		}
	}
	if stride != outShape.Size() {
		return r, false, nil
	}
	r.loop = newStridedLoop(inShape.Dimensions, outStrides, kernels.RowMajorStrides(inShape.Dimensions))
	so := r.loop.rowStride(0)
	if r.loop.rowStride(1) != 1 && kernels.Prod(r.loop.dims) != 1 || so > 1 {
		return r, false, nil
	}
	if r.in, err = backend.BufferData(inputs[0]); err != nil {
		return r, false, nil
	}
	r.output = backend.NewBuffer(outShape)
	r.out, err = backend.BufferData(r.output)
	return r, true, err
}

// maxEachRow sets out[i] = max(out[i], row i of x's values, one at a time in order), for rows of n
// values, four rows at a time so their chains of dependent maxima overlap.
func maxEachRow[T kernels.Float](out, x []T, n int) {
	rows := len(out)
	if rows == 0 || n == 0 {
		return
	}
	_ = x[rows*n-1]
	i := 0
	for ; i+4 <= rows; i += 4 {
		x0 := x[i*n : i*n+n]
		x1, x2, x3 := x[(i+1)*n:][:len(x0)], x[(i+2)*n:][:len(x0)], x[(i+3)*n:][:len(x0)]
		a0, a1, a2, a3 := out[i], out[i+1], out[i+2], out[i+3]
		for j, v := range x0 {
			a0 = max(a0, v)
			a1 = max(a1, x1[j])
			a2 = max(a2, x2[j])
			a3 = max(a3, x3[j])
		}
		out[i], out[i+1], out[i+2], out[i+3] = a0, a1, a2, a3
	}
	for ; i < rows; i++ {
		acc := out[i]
		for _, v := range x[i*n : i*n+n] {
			acc = max(acc, v)
		}
		out[i] = acc
	}
}

// reduceMaxRows computes the ReduceMax laid out by loop (operand 0 the output, 1 the input), from
// lowest: out = max(out, v) for each term in order, as simplego does.
func reduceMaxRows[T kernels.Float](loop *stridedLoop, out, in []T, lowest T) {
	so := loop.rowStride(0)
	for i := range out {
		out[i] = lowest
	}
	if len(loop.dims) == 2 && so == 0 && loop.strides[0][0] == 1 && loop.strides[1][1] == 1 && loop.strides[1][0] == loop.dims[1] {
		// Contiguous rows each to the next output (softmax's row maxima): four rows at a time, each
		// still taken in order.
		n := loop.dims[1]
		loop.runChunks(0, func(lo, hi int) { maxEachRow(out[lo:hi], in[lo*n:hi*n], n) })
		return
	}
	row := func(off []int, n int) {
		x := in[off[1] : off[1]+n]
		if so == 0 {
			acc := out[off[0]]
			for _, v := range x {
				acc = max(acc, v)
			}
			out[off[0]] = acc
			return
		}
		o := out[off[0] : off[0]+n]
		for j, v := range x {
			o[j] = max(o[j], v)
		}
	}
	split := -1
	for a, d := range loop.dims {
		if loop.strides[0][a] != 0 && (split < 0 || d > loop.dims[split]) {
			split = a
		}
	}
	if split < 0 {
		loop.run(0, 0, loop.dims[0], row)
	} else {
		loop.runParallel(split, row)
	}
}

// reduceSumRows computes the ReduceSum laid out by loop (operand 0 the output, 1 the input).
func reduceSumRows[T kernels.Float](loop *stridedLoop, out, in []T) {
	so := loop.rowStride(0)
	clear(out)
	if last := len(loop.dims) - 1; last >= 1 && loop.strides[0][last] == 1 && loop.strides[0][last-1] == 0 && loop.strides[1][last-1] == loop.dims[last] {
		// Rows of kept values summed over the axis before (per-channel sums of NHWC): whole blocks
		// of rows per pass, the columns split over the cores.
		sumRowBlocks(loop, out, in)
		return
	}
	if len(loop.dims) == 2 && so == 0 && loop.strides[0][0] == 1 && loop.strides[1][1] == 1 && loop.strides[1][0] == loop.dims[1] {
		// Contiguous short rows each to the next output (a loss's per-example sums over the classes):
		// four rows at a time, each still summed in order, instead of one call per row.
		n := loop.dims[1]
		loop.runChunks(0, func(lo, hi int) { kernels.AddRowSums(out[lo:hi], in[lo*n:hi*n], n) })
		return
	}
	row := func(off []int, n int) {
		x := in[off[1] : off[1]+n]
		if so == 0 {
			acc := out[off[0]]
			for _, v := range x {
				acc += v
			}
			out[off[0]] = acc
			return
		}
		kernels.AccumulateRow(out[off[0]:off[0]+n], x)
	}
	// Split on the largest kept axis.
	split := -1
	for a, d := range loop.dims {
		if loop.strides[0][a] != 0 && (split < 0 || d > loop.dims[split]) {
			split = a
		}
	}
	if split < 0 {
		loop.run(0, 0, loop.dims[0], row)
	} else {
		loop.runParallel(split, row)
	}
}

// execFastGreaterThan compares float32 rows (ReLU's gradient mask) with the AVX2 kernels where the CPU
// has them (float64 rows in Go), broadcasting as the binary ops do; other dtypes go to simplego's.
func execFastGreaterThan(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeGreaterThan]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 2 {
		return orig(backend, node, inputs, inputsOwned)
	}
	outShape := nodeShape(node)
	lhsShape, err1 := backend.BufferShape(inputs[0])
	rhsShape, err2 := backend.BufferShape(inputs[1])
	dt := lhsShape.DType
	if err1 != nil || err2 != nil || outShape.DType != dtypes.Bool || (dt != dtypes.Float32 && dt != dtypes.Float64) || rhsShape.DType != dt {
		return orig(backend, node, inputs, inputsOwned)
	}
	sa, ok1 := broadcastStrides(lhsShape, outShape)
	sb, ok2 := broadcastStrides(rhsShape, outShape)
	if !ok1 || !ok2 || outShape.Size() == 0 {
		return orig(backend, node, inputs, inputsOwned)
	}
	loop := newStridedLoop(outShape.Dimensions, kernels.RowMajorStrides(outShape.Dimensions), sa, sb)
	ra, rb := loop.rowStride(1), loop.rowStride(2)
	lhsAny, err1 := backend.BufferData(inputs[0])
	rhsAny, err2 := backend.BufferData(inputs[1])
	if err1 != nil || err2 != nil || ra > 1 || rb > 1 {
		return orig(backend, node, inputs, inputsOwned)
	}
	output, outAny, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	if dt == dtypes.Float64 {
		greaterRows(&loop, outAny.([]bool), lhsAny.([]float64), rhsAny.([]float64), ra, rb)
	} else {
		greaterRows(&loop, outAny.([]bool), lhsAny.([]float32), rhsAny.([]float32), ra, rb)
	}
	return output, nil
}

// greaterRows runs kernels.GreaterRow over the loop's rows, split over the cores.
func greaterRows[T kernels.Float](loop *stridedLoop, out []bool, lhs, rhs []T, ra, rb int) {
	loop.runParallel(loop.splitAxisElementwise(), func(off []int, n int) {
		kernels.GreaterRow(out[off[0]:off[0]+n], lhs[off[1]:], rhs[off[2]:], ra, rb)
	})
}

// execFastEqual replaces simplego's Equal for int32, float32 and float64 operands broadcast along
// whole axes (the one-hot comparison of labels [batch, 1] with the classes [1, classes] in every
// classifier's loss): simplego walks such broadcasts through an index iterator, a few ns a value.
// Equality is Go's ==, as simplego's (NaN equals nothing).
func execFastEqual(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeEqual]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 2 {
		return orig(backend, node, inputs, inputsOwned)
	}
	outShape := nodeShape(node)
	lhsShape, err1 := backend.BufferShape(inputs[0])
	rhsShape, err2 := backend.BufferShape(inputs[1])
	dt := lhsShape.DType
	if err1 != nil || err2 != nil || outShape.DType != dtypes.Bool || (dt != dtypes.Int32 && dt != dtypes.Float32 && dt != dtypes.Float64) || rhsShape.DType != dt {
		return orig(backend, node, inputs, inputsOwned)
	}
	sa, ok1 := broadcastStrides(lhsShape, outShape)
	sb, ok2 := broadcastStrides(rhsShape, outShape)
	if !ok1 || !ok2 || outShape.Size() == 0 {
		return orig(backend, node, inputs, inputsOwned)
	}
	lhsAny, err1 := backend.BufferData(inputs[0])
	rhsAny, err2 := backend.BufferData(inputs[1])
	if err1 != nil || err2 != nil {
		return orig(backend, node, inputs, inputsOwned)
	}
	loop := newStridedLoop(outShape.Dimensions, kernels.RowMajorStrides(outShape.Dimensions), sa, sb)
	output, outAny, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	switch dt {
	case dtypes.Int32:
		equalRows(&loop, outAny.([]bool), lhsAny.([]int32), rhsAny.([]int32))
	case dtypes.Float64:
		equalRows(&loop, outAny.([]bool), lhsAny.([]float64), rhsAny.([]float64))
	default:
		equalRows(&loop, outAny.([]bool), lhsAny.([]float32), rhsAny.([]float32))
	}
	return output, nil
}

// equalRows compares the loop's rows value by value, split over the cores.
func equalRows[T int32 | float32 | float64](loop *stridedLoop, out []bool, lhs, rhs []T) {
	ra, rb := loop.rowStride(1), loop.rowStride(2)
	loop.runParallel(loop.splitAxisElementwise(), func(off []int, n int) {
		o, a, b := out[off[0]:off[0]+n], lhs[off[1]:], rhs[off[2]:]
		switch {
		case ra == 1 && rb == 1:
			a, b = a[:n], b[:n]
			for j := range o {
				o[j] = a[j] == b[j]
			}
		case ra == 1 && rb == 0:
			a, c := a[:n], b[0]
			for j := range o {
				o[j] = a[j] == c
			}
		case ra == 0 && rb == 1:
			c, b := a[0], b[:n]
			for j := range o {
				o[j] = c == b[j]
			}
		default:
			for j := range o {
				o[j] = a[j*ra] == b[j*rb]
			}
		}
	})
}

// execFastArgMinMax takes the index of each float32 or float64 row's maximum or minimum over the last
// axis (the predicted classes of a batch's logits) into int32s, as simplego does value by value: the
// first extreme wins a tie, and a NaN takes the place of any value before it (so the last NaN wins).
// simplego's loop carries a running best per position of the axes after the reduced one, which for the
// last axis is one position, at a few ns a value.
func execFastArgMinMax(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeArgMinMax]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 1 {
		return orig(backend, node, inputs, inputsOwned)
	}
	p, ok := readArgMinMaxParams(node)
	inShape, err := backend.BufferShape(inputs[0])
	outShape := nodeShape(node)
	dt := inShape.DType
	if !ok || err != nil || p.axis != inShape.Rank()-1 || outShape.DType != dtypes.Int32 || (dt != dtypes.Float32 && dt != dtypes.Float64) ||
		inShape.Size() == 0 || inShape.Dimensions[p.axis] >= 1<<31 {
		return orig(backend, node, inputs, inputsOwned)
	}
	inAny, err := backend.BufferData(inputs[0])
	if err != nil {
		return orig(backend, node, inputs, inputsOwned)
	}
	output, outAny, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	n := inShape.Dimensions[p.axis]
	if dt == dtypes.Float64 {
		argExtremeRows(outAny.([]int32), inAny.([]float64), n, p.isMin)
	} else {
		argExtremeRows(outAny.([]int32), inAny.([]float32), n, p.isMin)
	}
	return output, nil
}

// argExtremeRows sets out[i] to the index of the maximum (isMin: minimum) of row i of x's rows of n
// values, with simplego's rule for ties and NaNs.
func argExtremeRows[T kernels.Float](out []int32, x []T, n int, isMin bool) {
	for i := range out {
		row := x[i*n : i*n+n]
		best, arg := row[0], int32(0)
		for j := 1; j < len(row); j++ {
			v := row[j]
			if v != v || (isMin && v < best) || (!isMin && v > best) {
				best, arg = v, int32(j)
			}
		}
		out[i] = arg
	}
}

// execFastConvertDType converts bools to float32 or float64 (1 and 0: a one-hot mask, a count of
// correct predictions) in one plain loop; every other pair goes to simplego's.
func execFastConvertDType(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeConvertDType]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 1 {
		return orig(backend, node, inputs, inputsOwned)
	}
	inShape, err := backend.BufferShape(inputs[0])
	outShape := nodeShape(node)
	if err != nil || inShape.DType != dtypes.Bool || (outShape.DType != dtypes.Float32 && outShape.DType != dtypes.Float64) {
		return orig(backend, node, inputs, inputsOwned)
	}
	inAny, err := backend.BufferData(inputs[0])
	if err != nil {
		return orig(backend, node, inputs, inputsOwned)
	}
	output, outAny, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	if outShape.DType == dtypes.Float64 {
		boolsAsFloats(outAny.([]float64), inAny.([]bool))
	} else {
		boolsAsFloats(outAny.([]float32), inAny.([]bool))
	}
	return output, nil
}

// boolsAsFloats sets out[i] to 1 where in[i] holds and 0 elsewhere.
func boolsAsFloats[T kernels.Float](out []T, in []bool) {
	out = out[:len(in)]
	for i, b := range in {
		var v T
		if b {
			v = 1
		}
		out[i] = v
	}
}

// sumRowBlocks reduces a loop whose last two axes are (reduced, kept) with contiguous rows: for each
// index of the outer axes, the R rows of n values are summed into n outputs with kernels.SumRows (in row
// order, as simplego), on one core: sharing the columns out between two cores, each reading part of
// every row, was slower than one core reading whole rows (as for the fused column sums).
func sumRowBlocks[T kernels.Float](loop *stridedLoop, out, in []T) {
	last := len(loop.dims) - 1
	R, n := loop.dims[last-1], loop.dims[last]
	outer := stridedLoop{dims: append([]int{1}, loop.dims[:last-1]...), strides: [][]int{
		append([]int{0}, loop.strides[0][:last-1]...), append([]int{0}, loop.strides[1][:last-1]...)}}
	outer.run(0, 0, 1, func(off []int, rows int) {
		// The outer loop's row is its last axis; walk it here too.
		for i := range rows {
			o := off[0] + i*outer.rowStride(0)
			x := off[1] + i*outer.rowStride(1)
			kernels.SumRows(out[o:o+n], in[x:], R, n)
		}
	})
}
