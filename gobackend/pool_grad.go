package gobackend

import (
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// SelectAndScatterMax/Min (max-pool's gradient) as nodes of their own: goBuilder.selectAndScatter checks
// the shapes, then turns a fresh node into a selectAndScatterMaxOpType (or Min) node whose data is a
// *poolGradSpec, run by execSelectAndScatter: one pass over the windows instead of the composition's
// strided slices, ArgMinMax and scatter. The result is the composition's bit for bit:
//
//   - in each window the first maximal (minimal) real cell in row-major window order is chosen, except
//     that a NaN replaces the choice, as simplego's ArgMinMax does (so the last NaN wins);
//   - windows add into a zeroed output in row-major window order; non-overlapping windows (strides equal
//     to the window) store the source value, as the composition's masked copy does (keeping -0).
//
// Padding cells are skipped rather than compared as -inf (+inf): the two differ only for a window whose
// real cells are all -inf (+inf), where the composition picks a padding cell and drops the source value.

// poolGradSpec is a SelectAndScatter node's parameters.
type poolGradSpec struct {
	window, strides, padLow []int
	isMin                   bool
	store                   bool // Windows don't overlap: each cell gets at most one value, stored.
}

// poolGradDType reports whether execSelectAndScatter handles dtype.
func poolGradDType(dtype dtypes.DType) bool {
	switch dtype {
	case dtypes.Float32, dtypes.Float64, dtypes.Int32, dtypes.Int64:
		return true
	}
	return false
}

// nativeSelectAndScatter builds the node (shapes already checked, strides and paddings filled in); ok is
// false where the composition must run instead: another dtype, or the executors not installed.
func (b *goBuilder) nativeSelectAndScatter(operand, source backends.Op, dtype dtypes.DType, window, strides []int, paddings [][2]int, isMin bool) (out backends.Op, ok bool, err error) {
	if !poolGradInstalled || !poolGradDType(dtype) {
		return nil, false, nil
	}
	if shape, err := b.Builder.OpShape(operand); err != nil || shape.Size() > math.MaxInt32 {
		return nil, false, err // The selected cells' offsets are int32.
	}
	xn, okX := operand.(*simplego.Node)
	sn, okS := source.(*simplego.Node)
	if !okX || !okS {
		return nil, false, nil
	}
	placeholder, err := b.Builder.Identity(operand) // A fresh node of the operand's shape.
	if err != nil {
		return nil, false, err
	}
	n, okN := placeholder.(*simplego.Node)
	if !okN {
		return nil, false, nil
	}
	spec := &poolGradSpec{window: slices.Clone(window), strides: slices.Clone(strides), padLow: make([]int, len(window)),
		isMin: isMin, store: slices.Equal(strides, window)}
	for a, p := range paddings {
		spec.padLow[a] = p[0]
	}
	opType := selectAndScatterMaxOpType
	if isMin {
		opType = selectAndScatterMinOpType
	}
	setNodeOpData(n, opType, spec)
	setNodeInputs(n, []*simplego.Node{xn, sn})
	return n, true, nil
}

// execSelectAndScatter runs a SelectAndScatterMax/Min node (inputs: operand, source).
func execSelectAndScatter(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, _ []bool) (*simplego.Buffer, error) {
	spec, ok := nodeDataOf(node).(*poolGradSpec)
	if !ok || len(inputs) != 2 {
		return nil, errors.New("SelectAndScatter node without its parameters")
	}
	xShape, err1 := backend.BufferShape(inputs[0])
	srcShape, err2 := backend.BufferShape(inputs[1])
	xFlat, err3 := backend.BufferData(inputs[0])
	srcFlat, err4 := backend.BufferData(inputs[1])
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return nil, err
		}
	}
	if srcShape.Rank() != xShape.Rank() || len(spec.window) != xShape.Rank() {
		return nil, errors.Errorf("SelectAndScatter: operand %s, source %s, window %v", xShape, srcShape, spec.window)
	}
	output, outFlat, err := newOutput(backend, xShape)
	if err != nil {
		return nil, err
	}
	g := newPoolGeometry(xShape.Dimensions, srcShape.Dimensions, spec.window, spec.strides, spec.padLow)
	switch x := xFlat.(type) {
	case []float32:
		runSelectAndScatter(x, srcFlat.([]float32), outFlat.([]float32), &g, spec)
	case []float64:
		runSelectAndScatter(x, srcFlat.([]float64), outFlat.([]float64), &g, spec)
	case []int32:
		runSelectAndScatter(x, srcFlat.([]int32), outFlat.([]int32), &g, spec)
	case []int64:
		runSelectAndScatter(x, srcFlat.([]int64), outFlat.([]int64), &g, spec)
	default:
		return nil, errors.Errorf("SelectAndScatter of %s: not handled natively", xShape)
	}
	return output, nil
}

// poolGeometry splits the operand's axes into the leading ones, which windows walk, and the trailing
// run of axes no window touches (window 1, stride 1, no padding: NHWC's channels), handled as one
// contiguous inner block of inner cells. The max-pool (pool.go) and its gradient share it.
type poolGeometry struct {
	dims, numWindows []int // Leading axes only.
	xStrides         []int // Elements between neighbours along each leading axis.
	inner            int
	splitFirst       bool // Axis 0 is untouched by windows: its indices can be shared out between goroutines.
}

func newPoolGeometry(dims, numWindows, window, strides, padLow []int) poolGeometry {
	lead := len(dims)
	inner := 1
	untouched := func(a int) bool { return window[a] == 1 && strides[a] == 1 && padLow[a] == 0 }
	for lead > 1 && untouched(lead-1) && numWindows[lead-1] == dims[lead-1] {
		lead--
		inner *= dims[lead]
	}
	g := poolGeometry{dims: dims[:lead], numWindows: numWindows[:lead], xStrides: make([]int, lead), inner: inner,
		splitFirst: lead > 1 && untouched(0) && numWindows[0] == dims[0]}
	stride := inner
	for a := lead - 1; a >= 0; a-- {
		g.xStrides[a] = stride
		stride *= dims[a]
	}
	return g
}

// runSelectAndScatter fills out (shaped like x) from the windows' source values src. Each output cell
// gets its values from one goroutine, in row-major window order: goroutines split axis 0 only where no
// window crosses it. kernels.SelectWindow picks each window's cells (offsets into x, below 2³¹: the
// builder checks).
func runSelectAndScatter[T kernels.Ordered](x, src, out []T, g *poolGeometry, spec *poolGradSpec) {
	clear(out)
	lead := len(g.dims)
	// The window's cells, row-major: offsets from the window's origin along each leading axis.
	numCells := kernels.Prod(spec.window[:lead])
	cellPos := make([]int, numCells*lead)
	for k := range numCells {
		rem := k
		for a := lead - 1; a >= 0; a-- {
			cellPos[k*lead+a] = rem % spec.window[a]
			rem /= spec.window[a]
		}
	}
	windowsPerFirst := kernels.Prod(g.numWindows[1:]) // Windows per index of axis 0.
	run := func(lo, hi int) {
		offs := make([]int32, numCells) // The window's real cells (padding skipped), in row-major order.
		arg := make([]int32, g.inner)
		widx := make([]int, lead)
		widx[0] = lo
		for w := lo * windowsPerFirst; w < hi*windowsPerFirst; w++ {
			found := 0
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
				if inside {
					offs[found] = int32(off)
					found++
				}
			}
			if found > 0 {
				kernels.SelectWindow(x, offs[:found], arg, spec.isMin)
				values := src[w*g.inner : (w+1)*g.inner]
				if spec.store {
					for j, v := range values {
						out[arg[j]] = v
					}
				} else {
					for j, v := range values {
						out[arg[j]] += v
					}
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
	first := g.numWindows[0]
	if !g.splitFirst {
		run(0, first)
		return
	}
	kernels.ForChunks(first, len(x)/first, run) // axis 0 is then whole in x: len(x)/first values per index
}
