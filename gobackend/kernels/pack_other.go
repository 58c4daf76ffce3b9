//go:build !amd64

package kernels

func copyRows16(n int, dst, src *float32, offs *int) {
	panic("no row copy kernels on this architecture")
}
func copyRows6(n int, dst, src *float32, offs *int) {
	panic("no row copy kernels on this architecture")
}

const hasCopyRows = false
