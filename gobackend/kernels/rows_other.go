//go:build !amd64

package kernels

// Off amd64 the element-wise executors use their Go loops only.
const hasRowsAVX2, hasGreaterAVX2 = false, false

func rowAddVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowAddVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowAddSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowSubVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowSubVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowSubSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMulVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMulVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMulSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowDivVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowDivVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowDivSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMaxVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMaxVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMaxSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMinVV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMinVS(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowMinSV(n int, dst, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowWhereVV(n int, dst *float32, cond *bool, t, f *float32) {
	panic("no AVX2 row kernels on this architecture")
}
func rowWhereVS(n int, dst *float32, cond *bool, t, f *float32) {
	panic("no AVX2 row kernels on this architecture")
}
func rowWhereSV(n int, dst *float32, cond *bool, t, f *float32) {
	panic("no AVX2 row kernels on this architecture")
}
func rowWhereSS(n int, dst *float32, cond *bool, t, f *float32) {
	panic("no AVX2 row kernels on this architecture")
}
func rowGreaterVV(n int, dst *bool, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowGreaterVS(n int, dst *bool, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func rowGreaterSV(n int, dst *bool, a, b *float32) { panic("no AVX2 row kernels on this architecture") }
func transpose8(src *float32, rows *int, n int, dst *float32, w int) {
	panic("no AVX2 row kernels on this architecture")
}
func rowSumRows(n, rows int, dst, src *float32, stride int) {
	panic("no AVX2 row kernels on this architecture")
}
