package resamplesimd

import "golang.org/x/sys/cpu"

// available: x/sys/cpu also checks that the OS saves the ymm registers.
var available = cpu.X86.HasAVX2

// fmaAvailable: the division-free normalisation's fused multiply-adds (FMA3, every AVX2 CPU but a
// few early ones).
var fmaAvailable = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func horizontalAVX2(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)

//go:noescape
func verticalAVX2(dst *byte, n int, src *byte, pairs *Pair, npairs int)

//go:noescape
func normalizeAVX2(dst *float32, pix *byte, n int, ms *float32)

//go:noescape
func normalizeFMA(dst *float32, pix *byte, n int, ms *float32)
