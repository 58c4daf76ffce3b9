package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Pooling (ReduceWindow) of float32 and float64 as one pass over the windows: goBuilder.ReduceWindow
// builds simplego's own ReduceWindow node (for its shape) and puts a *poolSpec in its data;
// execReduceWindow, which takes simplego's place in the executor table, runs those nodes and hands every
// other ReduceWindow node to simplego's executor. It replaces the composition (a padded copy of the
// operand, one strided Slice per window position, a fused chain of Max/Min/Add/Mul), whose result it
// gives bit for bit: each window's cells are combined in the same row-major order with the same row
// kernels, a padding cell counting as the fill value the padded copy holds.

// poolSpec is a native ReduceWindow node's parameters (every slice of the operand's rank).
type poolSpec struct {
	window, strides, padLow, winDil []int
	op                              kernels.BinOp
	fill                            float64 // The padding cells' value: the reduction's identity.
}

// poolMinInner is the shortest inner block (values per window cell, NHWC's channels) the native node
// takes: its row kernels work on whole groups of 8, and shorter rows run faster as the composition's
// whole-tensor rows.
const poolMinInner = 8

// nativeReduceWindow builds the node where it applies (float32 or float64, no base dilation, an inner
// block of at least poolMinInner values); ok is false where the composition must run instead.
func (b *goBuilder) nativeReduceWindow(x backends.Op, reduction backends.ReduceOpType, shape, outShape shapes.Shape, op kernels.BinOp, fill float64,
	window, strides, baseDil, winDil []int, paddings [][2]int) (out backends.Op, ok bool, err error) {
	if !b.nativePool || !poolInstalled || (shape.DType != dtypes.Float32 && shape.DType != dtypes.Float64) {
		return nil, false, nil
	}
	rank := shape.Rank()
	if slices.ContainsFunc(baseDil, func(d int) bool { return d != 1 }) {
		return nil, false, nil
	}
	padLow := make([]int, rank)
	for a := range paddings {
		padLow[a] = paddings[a][0]
	}
	if g := newPoolGeometry(shape.Dimensions, outShape.Dimensions, window, strides, padLow); g.inner < poolMinInner {
		return nil, false, nil
	}
	built, err := b.Builder.ReduceWindow(x, reduction, window, strides, baseDil, winDil, paddings)
	if err != nil {
		return nil, false, err
	}
	n, isNode := built.(*simplego.Node)
	if !isNode || !nodeShape(n).Equal(outShape) {
		return nil, false, nil
	}
	setNodeOpData(n, backends.OpTypeReduceWindow, &poolSpec{window: slices.Clone(window), strides: slices.Clone(strides),
		padLow: padLow, winDil: slices.Clone(winDil), op: op, fill: fill})
	return n, true, nil
}

// execReduceWindow runs the native ReduceWindow nodes and gives the others to simplego's executor.
func execReduceWindow(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	spec, ok := nodeDataOf(node).(*poolSpec)
	if !ok {
		return sgExecutors[backends.OpTypeReduceWindow](backend, node, inputs, inputsOwned)
	}
	if len(inputs) != 1 {
		return nil, errors.New("ReduceWindow node without its operand")
	}
	xShape, err := backend.BufferShape(inputs[0])
	if err != nil {
		return nil, err
	}
	xFlat, err := backend.BufferData(inputs[0])
	if err != nil {
		return nil, err
	}
	outShape := nodeShape(node)
	if len(spec.window) != xShape.Rank() || outShape.Rank() != xShape.Rank() {
		return nil, errors.Errorf("ReduceWindow: operand %s, output %s, window %v", xShape, outShape, spec.window)
	}
	output, outFlat, err := newOutput(backend, outShape)
	if err != nil {
		return nil, err
	}
	g := newPoolGeometry(xShape.Dimensions, outShape.Dimensions, spec.window, spec.strides, spec.padLow)
	switch x := xFlat.(type) {
	case []float32:
		runPool(x, outFlat.([]float32), &g, spec)
	case []float64:
		runPool(x, outFlat.([]float64), &g, spec)
	default:
		return nil, errors.Errorf("ReduceWindow of %s: not handled natively", xShape)
	}
	return output, nil
}

// runPool fills out, one inner block per window, from the windows of x. Windows are independent, so
// any range of them can go to a goroutine.
func runPool[T kernels.Float](x, out []T, g *poolGeometry, spec *poolSpec) {
	lead := len(g.dims)
	n := g.inner
	numCells := kernels.Prod(spec.window[:lead])
	cellPos := make([]int, numCells*lead) // Offsets of the window's cells from its origin, row-major.
	for k := range numCells {
		rem := k
		for a := lead - 1; a >= 0; a-- {
			cellPos[k*lead+a] = rem % spec.window[a] * spec.winDil[a]
			rem /= spec.window[a]
		}
	}
	fill := []T{T(spec.fill)}
	run := func(lo, hi int) {
		widx := make([]int, lead)
		rem := lo
		for a := lead - 1; a >= 0; a-- {
			widx[a] = rem % g.numWindows[a]
			rem /= g.numWindows[a]
		}
		for w := lo; w < hi; w++ {
			o := out[w*n : (w+1)*n]
			for k := range numCells {
				off := 0
				inside := true
				for a := range lead {
					p := widx[a]*spec.strides[a] - spec.padLow[a] + cellPos[k*lead+a]
					if p < 0 || p >= g.dims[a] {
						inside = false
						break
					}
					off += p * g.xStrides[a]
				}
				switch {
				case k == 0 && inside:
					copy(o, x[off:off+n])
				case k == 0:
					kernels.FillRow(o, fill[0])
				case inside:
					kernels.BinaryRow(spec.op, o, o, x[off:off+n], 1, 1)
				default:
					kernels.BinaryRow(spec.op, o, o, fill, 1, 0)
				}
			}
			for a := lead - 1; a >= 0; a-- { // Next window, row-major.
				widx[a]++
				if widx[a] < g.numWindows[a] || a == 0 {
					break
				}
				widx[a] = 0
			}
		}
	}
	kernels.ForChunks(len(out)/n, n*numCells, run)
}
