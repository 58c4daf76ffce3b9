//go:build !amd64

package gobackend

// Off amd64 the portable Go micro-kernel is used.
const hasAVX2FMA, hasAVX512 = false, false

func gemmAsmKernels() []*gemmKernel { return nil }

func gemmAsmKernels64() []*gemmKernel64 { return nil }
