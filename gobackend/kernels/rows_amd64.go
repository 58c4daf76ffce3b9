package kernels

import "golang.org/x/sys/cpu"

// AVX2 row kernels for the element-wise executors (rows_amd64.s, written by gen_rows.go: 8 floats per
// step, the caller finishing the last n%8 values). rows.go picks them when the CPU has AVX2 (and BMI2
// for the comparisons' mask expansion); TestRowKernelsMatchGo, TestPackColumns8 and TestSumRows check
// them against Go loops value by value.
//
//go:generate go run gen_rows.go
var (
	hasRowsAVX2    = cpu.X86.HasAVX2
	hasGreaterAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasBMI2
)

//go:noescape
func rowAddVV(n int, dst, a, b *float32)

//go:noescape
func rowAddVS(n int, dst, a, b *float32)

//go:noescape
func rowAddSV(n int, dst, a, b *float32)

//go:noescape
func rowSubVV(n int, dst, a, b *float32)

//go:noescape
func rowSubVS(n int, dst, a, b *float32)

//go:noescape
func rowSubSV(n int, dst, a, b *float32)

//go:noescape
func rowMulVV(n int, dst, a, b *float32)

//go:noescape
func rowMulVS(n int, dst, a, b *float32)

//go:noescape
func rowMulSV(n int, dst, a, b *float32)

//go:noescape
func rowDivVV(n int, dst, a, b *float32)

//go:noescape
func rowDivVS(n int, dst, a, b *float32)

//go:noescape
func rowDivSV(n int, dst, a, b *float32)

//go:noescape
func rowMaxVV(n int, dst, a, b *float32)

//go:noescape
func rowMaxVS(n int, dst, a, b *float32)

//go:noescape
func rowMaxSV(n int, dst, a, b *float32)

//go:noescape
func rowMinVV(n int, dst, a, b *float32)

//go:noescape
func rowMinVS(n int, dst, a, b *float32)

//go:noescape
func rowMinSV(n int, dst, a, b *float32)

//go:noescape
func rowWhereVV(n int, dst *float32, cond *bool, t, f *float32)

//go:noescape
func rowWhereVS(n int, dst *float32, cond *bool, t, f *float32)

//go:noescape
func rowWhereSV(n int, dst *float32, cond *bool, t, f *float32)

//go:noescape
func rowWhereSS(n int, dst *float32, cond *bool, t, f *float32)

//go:noescape
func rowGreaterVV(n int, dst *bool, a, b *float32)

//go:noescape
func rowGreaterVS(n int, dst *bool, a, b *float32)

//go:noescape
func rowGreaterSV(n int, dst *bool, a, b *float32)

//go:noescape
func transpose8(src *float32, rows *int, n int, dst *float32, w int)

//go:noescape
func rowSumRows(n, rows int, dst, src *float32, stride int)
