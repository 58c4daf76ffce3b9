package gobackend

import "golang.org/x/sys/cpu"

// hasExpAVX2: the vector exp and logistic (exp_amd64.s) reproduce math.Exp's FMA path, which the math
// package takes when the CPU has AVX and FMA; they need AVX2 for the integer lanes.
var hasExpAVX2 = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func expF32(n int, dst, src *float32, logistic bool) int

//go:noescape
func expF64(n int, dst, src *float64, logistic bool) int
