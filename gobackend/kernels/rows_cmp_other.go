//go:build !amd64

package kernels

func rowGreaterEqVV(n int, dst *bool, a, b *float32) {
	panic("no AVX2 comparison kernels on this architecture")
}
func rowGreaterEqVS(n int, dst *bool, a, b *float32) {
	panic("no AVX2 comparison kernels on this architecture")
}
func rowGreaterEqSV(n int, dst *bool, a, b *float32) {
	panic("no AVX2 comparison kernels on this architecture")
}
