package resamplesimd

import "golang.org/x/sys/cpu"

// available: x/sys/cpu also checks that the OS saves the ymm registers.
var available = cpu.X86.HasAVX2

// fmaAvailable: the division-free normalisation's fused multiply-adds (FMA3, every AVX2 CPU but a
// few early ones).
var fmaAvailable = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// vnni: Horizontal's and Vertical's sums as VPDPWSSD (AVX-512 VNNI on ymm registers: Intel since Ice Lake, AMD since
// Zen 4). A variable so that tests can run both kernels.
var vnni = cpu.X86.HasAVX2 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL

//go:noescape
func horizontalAVX2(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)

//go:noescape
func verticalAVX2(dst *byte, n int, src *byte, pairs *Pair, npairs int)

//go:noescape
func normalizeAVX2(dst *float32, pix *byte, n int, ms *float32)

//go:noescape
func normalizeFMA(dst *float32, pix *byte, n int, ms *float32)

//go:noescape
func verticalVNNI(dst *byte, n int, src *byte, pairs *Pair, npairs int)

//go:noescape
func horizontalVNNI(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)
