//go:build !amd64

package kernels

func selectMaxWindow(n int, x *float32, offs *int32, cells int, arg *int32) {
	panic("no AVX2 pooling kernels on this architecture")
}

func selectMinWindow(n int, x *float32, offs *int32, cells int, arg *int32) {
	panic("no AVX2 pooling kernels on this architecture")
}
