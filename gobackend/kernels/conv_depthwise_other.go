//go:build !amd64

package kernels

// Off amd64 the direct depthwise convolution runs its Go loops only.
var hasDwAVX2 = false

func dwTapRowsVec[T Float](c int, dst []T, dstStep, count int, src []T, srcStep int, srcOffs []int, w []T, wOffs []int) int {
	return 0
}

func dwAccRowsVec[T Float](c int, acc []T, accOffs []int, x []T, xOffs []int, xStep int, v []T, v0, vStep, count int) int {
	return 0
}
