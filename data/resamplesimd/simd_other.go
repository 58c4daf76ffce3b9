//go:build !amd64

package resamplesimd

// available is false off amd64: package data runs its portable Go passes.
const available = false

func horizontalAVX2(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}

func verticalAVX2(dst *byte, n int, src *byte, pairs *Pair, npairs int) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}

func normalizeAVX2(dst *float32, pix *byte, n int, ms *float32) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}

const fmaAvailable = false

func normalizeFMA(dst *float32, pix *byte, n int, ms *float32) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}

var vnni = false

func verticalVNNI(dst *byte, n int, src *byte, pairs *Pair, npairs int) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}

func horizontalVNNI(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int) {
	panic("resamplesimd: no AVX2 kernels on this architecture")
}
