//go:build !amd64

package pjrt

// hasAVX2FMA is false off amd64: the portable Go micro-kernel is used.
const hasAVX2FMA = false

func gemmKernelAVX2Go(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	gemmKernelGo(k, a, b, tile)
}
