//go:build !amd64 && !arm64

package kernels

// Off amd64 and arm64 the portable Go micro-kernel is used.
func gemmAsmKernels() []*gemmKernel { return nil }

func gemmAsmKernels64() []*gemmKernel64 { return nil }
