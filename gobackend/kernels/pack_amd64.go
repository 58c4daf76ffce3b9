package kernels

//go:noescape
func copyRows16(n int, dst, src *float32, offs *int)

//go:noescape
func copyRows6(n int, dst, src *float32, offs *int)

const hasCopyRows = true
