package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// execFastTranspose replaces simplego's Transpose executor (an iterator step per element, a quarter
// of a ResNet step on this backend) for the backends that enabled the fast ops: the output is walked
// row-major with a tight loop over its last axis, a run copy when that axis is contiguous in the input,
// and 32×32 tiles over the last two axes otherwise so both sides stay in cache.
func execFastTranspose(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	if !ownsFastOps(backend) || len(inputs) != 1 {
		return sgTranspose(backend, node, inputs, inputsOwned)
	}
	perm, ok := nodeInts(node)
	inShape, err := backend.BufferShape(inputs[0])
	if !ok || err != nil || len(perm) != inShape.Rank() {
		return sgTranspose(backend, node, inputs, inputsOwned)
	}
	outDims := make([]int, len(perm))
	for i, p := range perm {
		outDims[i] = inShape.Dimensions[p]
	}
	inFlat, output, outFlat, err := newCopyOutput(backend, inputs[0], shapes.Make(inShape.DType, outDims...))
	if err != nil {
		return nil, err
	}
	switch in := inFlat.(type) {
	case []float32:
		transposeCopy(outFlat.([]float32), in, inShape.Dimensions, perm)
	case []float64:
		transposeCopy(outFlat.([]float64), in, inShape.Dimensions, perm)
	case []int32:
		transposeCopy(outFlat.([]int32), in, inShape.Dimensions, perm)
	case []int64:
		transposeCopy(outFlat.([]int64), in, inShape.Dimensions, perm)
	default:
		backend.BufferFinalize(output) //nolint:errcheck // Returned to the pool; simplego handles the dtype.
		return sgTranspose(backend, node, inputs, inputsOwned)
	}
	return output, nil
}

// transposeCopy writes dst[o] = src[in(o)] where output axis i is input axis perm[i]. Axes of size 1
// are dropped and output axes that follow each other in the input too are merged first (NHWC's H and W
// under a move of C: a [N, C, H·W] ↔ [N, H·W, C] transpose in tiles of 32×32, not of 7×7), and the
// outer indices are shared out between the cores.
func transposeCopy[T any](dst, src []T, inDims, perm []int) {
	if len(dst) == 0 {
		return
	}
	inDims, perm = mergeTransposeAxes(inDims, perm)
	rank := len(perm)
	if rank == 0 {
		dst[0] = src[0]
		return
	}
	inStrides := kernels.RowMajorStrides(inDims)
	outDims := make([]int, rank)
	stride := make([]int, rank) // input offset of one step along each output axis
	for i, p := range perm {
		outDims[i] = inDims[p]
		stride[i] = inStrides[p]
	}
	last := rank - 1
	if rank == 1 || stride[last] == 1 {
		// The last output axis is contiguous in the input: copy runs of it.
		run := outDims[last]
		kernels.ForChunks(kernels.Prod(outDims[:last]), run, func(lo, hi int) {
			forEachOuter(outDims[:last], stride[:last], lo, hi, func(outOff, inOff int) {
				copy(dst[outOff*run:(outOff+1)*run], src[inOff:inOff+run])
			})
		})
		return
	}
	// Tile the last two output axes: rows a (input stride sa), columns b (input stride sb).
	rows, cols := outDims[last-1], outDims[last]
	sa, sb := stride[last-1], stride[last]
	if d32, ok := any(dst).([]float32); ok && sa == 1 && cols >= 8 {
		// The output's rows are contiguous in the input (a channels move): 8 input rows at a time become
		// 8 output columns through 8×8 register transposes.
		s32 := any(src).([]float32)
		kernels.ForChunks(kernels.Prod(outDims[:last-1]), rows*cols, func(lo, hi int) {
			forEachOuter(outDims[:last-1], stride[:last-1], lo, hi, func(outOff, inOff int) {
				transposeRows8(d32[outOff*rows*cols:(outOff+1)*rows*cols], s32, inOff, rows, cols, sb)
			})
		})
		return
	}
	const tile = 32
	kernels.ForChunks(kernels.Prod(outDims[:last-1]), rows*cols, func(lo, hi int) {
		forEachOuter(outDims[:last-1], stride[:last-1], lo, hi, func(outOff, inOff int) {
			out := dst[outOff*rows*cols : (outOff+1)*rows*cols]
			for a0 := 0; a0 < rows; a0 += tile {
				a1 := min(a0+tile, rows)
				for b0 := 0; b0 < cols; b0 += tile {
					b1 := min(b0+tile, cols)
					for a := a0; a < a1; a++ {
						row := out[a*cols : (a+1)*cols]
						base := inOff + a*sa
						for b := b0; b < b1; b++ {
							row[b] = src[base+b*sb]
						}
					}
				}
			}
		})
	})
}

// mergeTransposeAxes returns the dims and permutation of the same transpose without the axes of size 1
// and with every run of output axes that are consecutive input axes, in order, as one axis.
func mergeTransposeAxes(inDims, perm []int) ([]int, []int) {
	kept := make([]int, len(inDims)) // Input axis -> its index among the axes of size > 1, or -1.
	n := 0
	for a, d := range inDims {
		kept[a] = -1
		if d != 1 {
			kept[a] = n
			n++
		}
	}
	var p []int // The permutation over the kept axes.
	dims := make([]int, 0, n)
	for _, d := range inDims {
		if d != 1 {
			dims = append(dims, d)
		}
	}
	for _, a := range perm {
		if kept[a] >= 0 {
			p = append(p, kept[a])
		}
	}
	// Groups of output axes whose input axes follow each other.
	var starts, ends []int // Input axis ranges [start, end] of each group, in output order.
	for i, a := range p {
		if i > 0 && a == ends[len(ends)-1]+1 {
			ends[len(ends)-1] = a
			continue
		}
		starts, ends = append(starts, a), append(ends, a)
	}
	// The merged input axes are the groups in input order.
	order := make([]int, len(starts)) // Group indices sorted by their first input axis.
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return starts[x] - starts[y] })
	mergedDims := make([]int, len(order))
	newPerm := make([]int, len(order))
	for rank, g := range order {
		mergedDims[rank] = kernels.Prod(dims[starts[g] : ends[g]+1])
		newPerm[g] = rank
	}
	return mergedDims, newPerm
}

// forEachOuter calls fn for the indices [lo, hi) of the outer axes (row-major) with its position among
// them (outOff) and its input offset (inOff).
func forEachOuter(dims, stride []int, lo, hi int, fn func(outOff, inOff int)) {
	idx := make([]int, len(dims))
	inOff := 0
	for a, r := len(dims)-1, lo; a >= 0; a-- {
		idx[a] = r % dims[a]
		r /= dims[a]
		inOff += idx[a] * stride[a]
	}
	for outOff := lo; outOff < hi; outOff++ {
		fn(outOff, inOff)
		for a := len(dims) - 1; a >= 0; a-- {
			idx[a]++
			inOff += stride[a]
			if idx[a] < dims[a] {
				break
			}
			inOff -= idx[a] * stride[a]
			idx[a] = 0
		}
	}
}

// transposeRows8 writes out[a·cols + b] = src[inOff + a + b·sb] (rows × cols), 8 columns at a time,
// in blocks of 256 rows; the last cols mod 8 columns value by value.
func transposeRows8(out, src []float32, inOff, rows, cols, sb int) {
	const block = 256
	var offs [8]int
	for a0 := 0; a0 < rows; a0 += block {
		n := min(block, rows-a0)
		b0 := 0
		for ; b0+8 <= cols; b0 += 8 {
			for i := range offs {
				offs[i] = inOff + a0 + (b0+i)*sb
			}
			kernels.Transpose8Rows(out[a0*cols+b0:], cols, src, &offs, n)
		}
		for a := a0; a < a0+n; a++ {
			row := out[a*cols : (a+1)*cols]
			for b := b0; b < cols; b++ {
				row[b] = src[inOff+a+b*sb]
			}
		}
	}
}
