package kernels

import "unsafe"

// AVX2+FMA kernels of the direct depthwise convolution (conv_depthwise_amd64.s): whole groups of 8
// float32 or 4 float64 channels; the Go loops of conv_depthwise.go do the rest. hasDwAVX2 is false
// without AVX2 and FMA (or when a test turns the kernels off to compare).
var hasDwAVX2 = hasAVX2FMA

//go:noescape
func dwTapsF32(c int, dst *float32, dstStep, count int, src *float32, srcStep int, srcOffs *int, w *float32, wOffs *int, taps int)

//go:noescape
func dwTapsF64(c int, dst *float64, dstStep, count int, src *float64, srcStep int, srcOffs *int, w *float64, wOffs *int, taps int)

//go:noescape
func dwAccF32(c int, acc *float32, accOffs *int, x *float32, xOffs *int, v *float32, pairs, count, xStep, vStep int)

//go:noescape
func dwAccF64(c int, acc *float64, accOffs *int, x *float64, xOffs *int, v *float64, pairs, count, xStep, vStep int)

// dwVecWidth is how many channels the kernels take at a time.
func dwVecWidth[T Float]() int {
	if IsFloat64[T]() {
		return 4
	}
	return 8
}

// dwTapRowsVec runs dwTapRows' first c/width·width channels through the kernel and returns how many
// it did (0 when the kernels are off). The slices are checked to hold every value the kernel reads.
func dwTapRowsVec[T Float](c int, dst []T, dstStep, count int, src []T, srcStep int, srcOffs []int, w []T, wOffs []int) int {
	cv := c &^ (dwVecWidth[T]() - 1)
	if !hasDwAVX2 || cv == 0 || count == 0 || len(srcOffs) == 0 {
		return 0
	}
	lo, hi := dwOffsetRange(srcOffs, srcStep, count)
	wlo, whi := dwOffsetRange(wOffs, 0, 1)
	if lo < 0 || wlo < 0 || dstStep < 0 || len(wOffs) != len(srcOffs) {
		panic("dwTapRows: negative offset")
	}
	_, _, _ = src[hi+cv-1], w[whi+cv-1], dst[(count-1)*dstStep+cv-1]
	if IsFloat64[T]() {
		dwTapsF64(cv, (*float64)(unsafe.Pointer(&dst[0])), dstStep, count, (*float64)(unsafe.Pointer(&src[0])), srcStep,
			&srcOffs[0], (*float64)(unsafe.Pointer(&w[0])), &wOffs[0], len(srcOffs))
	} else {
		dwTapsF32(cv, (*float32)(unsafe.Pointer(&dst[0])), dstStep, count, (*float32)(unsafe.Pointer(&src[0])), srcStep,
			&srcOffs[0], (*float32)(unsafe.Pointer(&w[0])), &wOffs[0], len(srcOffs))
	}
	return cv
}

// dwAccRowsVec runs dwAccRows' first c/width·width channels through the kernel and returns how many it
// did (0 when the kernels are off). The slices are checked to hold every value the kernel touches.
func dwAccRowsVec[T Float](c int, acc []T, accOffs []int, x []T, xOffs []int, xStep int, v []T, v0, vStep, count int) int {
	cv := c &^ (dwVecWidth[T]() - 1)
	if !hasDwAVX2 || cv == 0 || count == 0 || len(accOffs) == 0 {
		return 0
	}
	alo, ahi := dwOffsetRange(accOffs, 0, 1)
	xlo, xhi := dwOffsetRange(xOffs, xStep, count)
	vlo, vhi := dwOffsetRange([]int{v0}, vStep, count)
	if alo < 0 || xlo < 0 || vlo < 0 || len(xOffs) != len(accOffs) {
		panic("dwAccRows: negative offset")
	}
	_, _, _ = acc[ahi+cv-1], x[xhi+cv-1], v[vhi+cv-1]
	if IsFloat64[T]() {
		dwAccF64(cv, (*float64)(unsafe.Pointer(&acc[0])), &accOffs[0], (*float64)(unsafe.Pointer(&x[0])), &xOffs[0],
			(*float64)(unsafe.Pointer(&v[v0])), len(accOffs), count, xStep, vStep)
	} else {
		dwAccF32(cv, (*float32)(unsafe.Pointer(&acc[0])), &accOffs[0], (*float32)(unsafe.Pointer(&x[0])), &xOffs[0],
			(*float32)(unsafe.Pointer(&v[v0])), len(accOffs), count, xStep, vStep)
	}
	return cv
}
