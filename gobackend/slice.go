package gobackend

import (
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// execFastSlice replaces simplego's Slice executor (one index update per element) for the backends
// that enabled it: the trailing axes that are contiguous in both tensors are copied as runs, so
// im2col's slabs ([N, out..., C] windows of the padded input) copy C values at a time.
func execFastSlice(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	if !ownsFastOps(backend) || len(inputs) != 1 {
		return sgSlice(backend, node, inputs, inputsOwned)
	}
	p, ok := readSliceParams(node)
	if !ok {
		return sgSlice(backend, node, inputs, inputsOwned)
	}
	starts, limits, strides := p.starts, p.limits, p.strides
	inShape, err := backend.BufferShape(inputs[0])
	if err != nil || len(starts) != inShape.Rank() || len(limits) != inShape.Rank() || len(strides) != inShape.Rank() {
		return sgSlice(backend, node, inputs, inputsOwned)
	}
	outDims := make([]int, inShape.Rank())
	for a := range outDims {
		outDims[a] = (limits[a] - starts[a] + strides[a] - 1) / strides[a]
	}
	inFlat, output, outFlat, err := newCopyOutput(backend, inputs[0], shapes.Make(inShape.DType, outDims...))
	if err != nil {
		return nil, err
	}
	switch in := inFlat.(type) {
	case []float32:
		sliceCopy(outFlat.([]float32), in, inShape.Dimensions, outDims, starts, strides)
	case []float64:
		sliceCopy(outFlat.([]float64), in, inShape.Dimensions, outDims, starts, strides)
	case []int32:
		sliceCopy(outFlat.([]int32), in, inShape.Dimensions, outDims, starts, strides)
	case []int64:
		sliceCopy(outFlat.([]int64), in, inShape.Dimensions, outDims, starts, strides)
	default:
		backend.BufferFinalize(output) //nolint:errcheck // Returned to the pool; simplego handles the dtype.
		return sgSlice(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// sliceCopy copies the strided window of src (dims inDims) starting at starts into dst (dims outDims).
func sliceCopy[T any](dst, src []T, inDims, outDims, starts, strides []int) {
	rank := len(inDims)
	if len(dst) == 0 {
		return
	}
	inStrides := kernels.RowMajorStrides(inDims)
	base := 0
	for a := range rank {
		base += starts[a] * inStrides[a]
	}
	// The run: trailing axes taken whole (contiguous in src and dst), then one more with stride 1.
	run, outer := 1, rank-1
	for outer >= 0 && strides[outer] == 1 && outDims[outer] == inDims[outer] {
		run *= inDims[outer]
		outer--
	}
	if outer >= 0 && strides[outer] == 1 {
		run *= outDims[outer]
		outer--
	}
	// Iterate the remaining (outer) axes 0..outer row-major; step[a] is the src offset of one step on a.
	n := outer + 1
	step := make([]int, n)
	for a := range n {
		step[a] = strides[a] * inStrides[a]
	}
	idx := make([]int, n)
	off := base
	for o := 0; o < len(dst); o += run {
		if run == 1 {
			dst[o] = src[off]
		} else {
			copy(dst[o:o+run], src[off:off+run])
		}
		for a := n - 1; a >= 0; a-- {
			idx[a]++
			off += step[a]
			if idx[a] < outDims[a] {
				break
			}
			off -= idx[a] * step[a]
			idx[a] = 0
		}
	}
}

// newCopyOutput returns the flat data of a copying op's input and a new output buffer of shape out
// with its flat data, for the executors that move values without arithmetic (Slice, Transpose).
func newCopyOutput(backend *simplego.Backend, input *simplego.Buffer, out shapes.Shape) (inFlat any, output *simplego.Buffer, outFlat any, err error) {
	if inFlat, err = backend.BufferData(input); err != nil {
		return nil, nil, nil, err
	}
	output = backend.NewBuffer(out)
	if outFlat, err = backend.BufferData(output); err != nil {
		return nil, nil, nil, err
	}
	return inFlat, output, outFlat, nil
}
