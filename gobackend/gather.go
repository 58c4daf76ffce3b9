package gobackend

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/trainer/trainer/gobackend/kernels"
)

// execFastGather replaces simplego's Gather executor (a byte copy per element through an index
// iterator) for the row gathers: indices pick positions along the operand's leading axes and each
// slice is the whole rest of the operand, so every index vector copies one contiguous run. Reverse
// (a kernel flip) and SelectAndScatter's offset table are such gathers. Indices are clamped into range
// as XLA (and simplego) do.
func execFastGather(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeGather]
	if !nodeFieldsOK || !ownsFastOps(backend) || len(inputs) != 2 {
		return orig(backend, node, inputs, inputsOwned)
	}
	p, ok := readGatherParams(node)
	if !ok {
		return orig(backend, node, inputs, inputsOwned)
	}
	offsetAxes, collapsed, startMap, sliceSizes := p.offsetOutputAxes, p.collapsedSlicesAxes, p.startIndexMap, p.sliceSizes
	opShape, err1 := backend.BufferShape(inputs[0])
	idxShape, err2 := backend.BufferShape(inputs[1])
	outShape := nodeShape(node)
	if err1 != nil || err2 != nil || idxShape.Rank() == 0 || p.indexVectorAxis != idxShape.Rank()-1 {
		return orig(backend, node, inputs, inputsOwned)
	}
	// Leading axes indexed and collapsed, the rest taken whole and placed after the batch axes.
	c, r, nb := len(startMap), opShape.Rank(), idxShape.Rank()-1
	if idxShape.Dimensions[nb] != c || len(collapsed) != c || len(sliceSizes) != r || len(offsetAxes) != r-c || c > r {
		return orig(backend, node, inputs, inputsOwned)
	}
	for a := range c {
		if startMap[a] != a || collapsed[a] != a || sliceSizes[a] != 1 {
			return orig(backend, node, inputs, inputsOwned)
		}
	}
	for a := c; a < r; a++ {
		if sliceSizes[a] != opShape.Dimensions[a] || offsetAxes[a-c] != nb+a-c {
			return orig(backend, node, inputs, inputsOwned)
		}
	}
	run := kernels.Prod(opShape.Dimensions[c:])
	count := kernels.Prod(idxShape.Dimensions[:nb])
	if outShape.Size() != count*run {
		return orig(backend, node, inputs, inputsOwned)
	}
	idxFlat, err := backend.BufferData(inputs[1])
	if err != nil {
		return orig(backend, node, inputs, inputsOwned)
	}
	var starts []int // Flat offset of each index vector's run.
	switch idx := idxFlat.(type) {
	case []int32:
		starts = gatherStarts(idx, opShape.Dimensions[:c], run)
	case []int64:
		starts = gatherStarts(idx, opShape.Dimensions[:c], run)
	default:
		return orig(backend, node, inputs, inputsOwned)
	}
	opFlat, output, outFlat, err := newCopyOutput(backend, inputs[0], outShape)
	if err != nil {
		return nil, err
	}
	switch src := opFlat.(type) {
	case []float32:
		gatherRuns(outFlat.([]float32), src, starts, run)
	case []float64:
		gatherRuns(outFlat.([]float64), src, starts, run)
	case []int32:
		gatherRuns(outFlat.([]int32), src, starts, run)
	case []int64:
		gatherRuns(outFlat.([]int64), src, starts, run)
	default:
		backend.BufferFinalize(output) //nolint:errcheck // Returned to the pool; simplego handles the dtype.
		return orig(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// gatherStarts turns index vectors over the leading dims into flat offsets (runs of run elements),
// each index clamped to [0, dim-1].
func gatherStarts[I int32 | int64](idx []I, dims []int, run int) []int {
	c := len(dims)
	strides := make([]int, c)
	s := run
	for a := c - 1; a >= 0; a-- {
		strides[a] = s
		s *= dims[a]
	}
	starts := make([]int, len(idx)/max(c, 1))
	for b := range starts {
		off := 0
		for a, d := range dims {
			off += max(0, min(d-1, int(idx[b*c+a]))) * strides[a]
		}
		starts[b] = off
	}
	return starts
}

func gatherRuns[T any](dst, src []T, starts []int, run int) {
	for b, off := range starts {
		copy(dst[b*run:(b+1)*run], src[off:off+run])
	}
}
