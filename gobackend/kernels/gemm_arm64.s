#include "textflag.h"

// NEON micro-kernels for arm64 (gemm_arm64.go): the float32 12×8 and float64 6×8 tiles in 24 of the 32
// vector registers. Like gemmKernelGo, each of the tile's sums adds its products in p order (one fused
// multiply-add per step), then the tile is added into c.
//
// Go's arm64 assembler has no by-element FMLA and no vector FADD, so those two are spelled as
// instruction words (Arm ARM C7.2: "FMLA (by element)" and "FADD (vector)"; `go tool objdump` decodes
// them back); vd, vn, vm are V register numbers.

// FMLA_S4: Vd.4S += Vn.4S * Vm.S[lane].
#define FMLA_S4(vd, vn, vm, lane) WORD $(0x4f801000 | (((lane)&1)<<21) | (((lane)>>1)<<11) | ((vm)<<16) | ((vn)<<5) | (vd))

// FMLA_D2: Vd.2D += Vn.2D * Vm.D[lane].
#define FMLA_D2(vd, vn, vm, lane) WORD $(0x4fc01000 | ((lane)<<11) | ((vm)<<16) | ((vn)<<5) | (vd))

// FADD_S4, FADD_D2: Vd = Vn + Vm, four floats or two doubles.
#define FADD_S4(vd, vn, vm) WORD $(0x4e20d400 | ((vm)<<16) | ((vn)<<5) | (vd))
#define FADD_D2(vd, vn, vm) WORD $(0x4e60d400 | ((vm)<<16) | ((vn)<<5) | (vd))

// func gemmKernelNEON(k int, a, b, c *float32, rows *int)
// c[rows[r]+j] += sum_p a[p*12+r] * b[p*8+j], for r < 12, j < 8; k >= 1.
// V0-V23 accumulate the tile (row r in V2r, V2r+1), V24-V26 hold a step of A, V28-V29 a step of B.
TEXT ·gemmKernelNEON(SB), NOSPLIT, $0-40
	MOVD	k+0(FP), R0
	MOVD	a+8(FP), R1
	MOVD	b+16(FP), R2
	MOVD	c+24(FP), R3
	MOVD	rows+32(FP), R4

	VEOR	V0.B16, V0.B16, V0.B16
	VEOR	V1.B16, V1.B16, V1.B16
	VEOR	V2.B16, V2.B16, V2.B16
	VEOR	V3.B16, V3.B16, V3.B16
	VEOR	V4.B16, V4.B16, V4.B16
	VEOR	V5.B16, V5.B16, V5.B16
	VEOR	V6.B16, V6.B16, V6.B16
	VEOR	V7.B16, V7.B16, V7.B16
	VEOR	V8.B16, V8.B16, V8.B16
	VEOR	V9.B16, V9.B16, V9.B16
	VEOR	V10.B16, V10.B16, V10.B16
	VEOR	V11.B16, V11.B16, V11.B16
	VEOR	V12.B16, V12.B16, V12.B16
	VEOR	V13.B16, V13.B16, V13.B16
	VEOR	V14.B16, V14.B16, V14.B16
	VEOR	V15.B16, V15.B16, V15.B16
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	VEOR	V20.B16, V20.B16, V20.B16
	VEOR	V21.B16, V21.B16, V21.B16
	VEOR	V22.B16, V22.B16, V22.B16
	VEOR	V23.B16, V23.B16, V23.B16

loop32:
	VLD1.P	48(R1), [V24.S4, V25.S4, V26.S4]
	VLD1.P	32(R2), [V28.S4, V29.S4]
	FMLA_S4(0, 28, 24, 0)
	FMLA_S4(1, 29, 24, 0)
	FMLA_S4(2, 28, 24, 1)
	FMLA_S4(3, 29, 24, 1)
	FMLA_S4(4, 28, 24, 2)
	FMLA_S4(5, 29, 24, 2)
	FMLA_S4(6, 28, 24, 3)
	FMLA_S4(7, 29, 24, 3)
	FMLA_S4(8, 28, 25, 0)
	FMLA_S4(9, 29, 25, 0)
	FMLA_S4(10, 28, 25, 1)
	FMLA_S4(11, 29, 25, 1)
	FMLA_S4(12, 28, 25, 2)
	FMLA_S4(13, 29, 25, 2)
	FMLA_S4(14, 28, 25, 3)
	FMLA_S4(15, 29, 25, 3)
	FMLA_S4(16, 28, 26, 0)
	FMLA_S4(17, 29, 26, 0)
	FMLA_S4(18, 28, 26, 1)
	FMLA_S4(19, 29, 26, 1)
	FMLA_S4(20, 28, 26, 2)
	FMLA_S4(21, 29, 26, 2)
	FMLA_S4(22, 28, 26, 3)
	FMLA_S4(23, 29, 26, 3)
	SUBS	$1, R0
	BNE	loop32

	// Add the tile into c, row r at c + rows[r].
	MOVD	0(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(0, 0, 28)
	FADD_S4(1, 1, 29)
	VST1	[V0.S4, V1.S4], (R5)
	MOVD	8(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(2, 2, 28)
	FADD_S4(3, 3, 29)
	VST1	[V2.S4, V3.S4], (R5)
	MOVD	16(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(4, 4, 28)
	FADD_S4(5, 5, 29)
	VST1	[V4.S4, V5.S4], (R5)
	MOVD	24(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(6, 6, 28)
	FADD_S4(7, 7, 29)
	VST1	[V6.S4, V7.S4], (R5)
	MOVD	32(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(8, 8, 28)
	FADD_S4(9, 9, 29)
	VST1	[V8.S4, V9.S4], (R5)
	MOVD	40(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(10, 10, 28)
	FADD_S4(11, 11, 29)
	VST1	[V10.S4, V11.S4], (R5)
	MOVD	48(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(12, 12, 28)
	FADD_S4(13, 13, 29)
	VST1	[V12.S4, V13.S4], (R5)
	MOVD	56(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(14, 14, 28)
	FADD_S4(15, 15, 29)
	VST1	[V14.S4, V15.S4], (R5)
	MOVD	64(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(16, 16, 28)
	FADD_S4(17, 17, 29)
	VST1	[V16.S4, V17.S4], (R5)
	MOVD	72(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(18, 18, 28)
	FADD_S4(19, 19, 29)
	VST1	[V18.S4, V19.S4], (R5)
	MOVD	80(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(20, 20, 28)
	FADD_S4(21, 21, 29)
	VST1	[V20.S4, V21.S4], (R5)
	MOVD	88(R4), R5
	ADD	R5<<2, R3, R5
	VLD1	(R5), [V28.S4, V29.S4]
	FADD_S4(22, 22, 28)
	FADD_S4(23, 23, 29)
	VST1	[V22.S4, V23.S4], (R5)
	RET

// func gemmKernelNEONF64(k int, a, b, c *float64, rows *int)
// c[rows[r]+j] += sum_p a[p*6+r] * b[p*8+j], for r < 6, j < 8 (float64); k >= 1.
// V0-V23 accumulate the tile (row r in V4r..V4r+3), V24-V26 hold a step of A, V28-V31 a step of B.
TEXT ·gemmKernelNEONF64(SB), NOSPLIT, $0-40
	MOVD	k+0(FP), R0
	MOVD	a+8(FP), R1
	MOVD	b+16(FP), R2
	MOVD	c+24(FP), R3
	MOVD	rows+32(FP), R4

	VEOR	V0.B16, V0.B16, V0.B16
	VEOR	V1.B16, V1.B16, V1.B16
	VEOR	V2.B16, V2.B16, V2.B16
	VEOR	V3.B16, V3.B16, V3.B16
	VEOR	V4.B16, V4.B16, V4.B16
	VEOR	V5.B16, V5.B16, V5.B16
	VEOR	V6.B16, V6.B16, V6.B16
	VEOR	V7.B16, V7.B16, V7.B16
	VEOR	V8.B16, V8.B16, V8.B16
	VEOR	V9.B16, V9.B16, V9.B16
	VEOR	V10.B16, V10.B16, V10.B16
	VEOR	V11.B16, V11.B16, V11.B16
	VEOR	V12.B16, V12.B16, V12.B16
	VEOR	V13.B16, V13.B16, V13.B16
	VEOR	V14.B16, V14.B16, V14.B16
	VEOR	V15.B16, V15.B16, V15.B16
	VEOR	V16.B16, V16.B16, V16.B16
	VEOR	V17.B16, V17.B16, V17.B16
	VEOR	V18.B16, V18.B16, V18.B16
	VEOR	V19.B16, V19.B16, V19.B16
	VEOR	V20.B16, V20.B16, V20.B16
	VEOR	V21.B16, V21.B16, V21.B16
	VEOR	V22.B16, V22.B16, V22.B16
	VEOR	V23.B16, V23.B16, V23.B16

loop64:
	VLD1.P	48(R1), [V24.D2, V25.D2, V26.D2]
	VLD1.P	64(R2), [V28.D2, V29.D2, V30.D2, V31.D2]
	FMLA_D2(0, 28, 24, 0)
	FMLA_D2(1, 29, 24, 0)
	FMLA_D2(2, 30, 24, 0)
	FMLA_D2(3, 31, 24, 0)
	FMLA_D2(4, 28, 24, 1)
	FMLA_D2(5, 29, 24, 1)
	FMLA_D2(6, 30, 24, 1)
	FMLA_D2(7, 31, 24, 1)
	FMLA_D2(8, 28, 25, 0)
	FMLA_D2(9, 29, 25, 0)
	FMLA_D2(10, 30, 25, 0)
	FMLA_D2(11, 31, 25, 0)
	FMLA_D2(12, 28, 25, 1)
	FMLA_D2(13, 29, 25, 1)
	FMLA_D2(14, 30, 25, 1)
	FMLA_D2(15, 31, 25, 1)
	FMLA_D2(16, 28, 26, 0)
	FMLA_D2(17, 29, 26, 0)
	FMLA_D2(18, 30, 26, 0)
	FMLA_D2(19, 31, 26, 0)
	FMLA_D2(20, 28, 26, 1)
	FMLA_D2(21, 29, 26, 1)
	FMLA_D2(22, 30, 26, 1)
	FMLA_D2(23, 31, 26, 1)
	SUBS	$1, R0
	BNE	loop64

	// Add the tile into c, row r at c + rows[r].
	MOVD	0(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(0, 0, 24)
	FADD_D2(1, 1, 25)
	FADD_D2(2, 2, 26)
	FADD_D2(3, 3, 27)
	VST1	[V0.D2, V1.D2, V2.D2, V3.D2], (R5)
	MOVD	8(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(4, 4, 24)
	FADD_D2(5, 5, 25)
	FADD_D2(6, 6, 26)
	FADD_D2(7, 7, 27)
	VST1	[V4.D2, V5.D2, V6.D2, V7.D2], (R5)
	MOVD	16(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(8, 8, 24)
	FADD_D2(9, 9, 25)
	FADD_D2(10, 10, 26)
	FADD_D2(11, 11, 27)
	VST1	[V8.D2, V9.D2, V10.D2, V11.D2], (R5)
	MOVD	24(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(12, 12, 24)
	FADD_D2(13, 13, 25)
	FADD_D2(14, 14, 26)
	FADD_D2(15, 15, 27)
	VST1	[V12.D2, V13.D2, V14.D2, V15.D2], (R5)
	MOVD	32(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(16, 16, 24)
	FADD_D2(17, 17, 25)
	FADD_D2(18, 18, 26)
	FADD_D2(19, 19, 27)
	VST1	[V16.D2, V17.D2, V18.D2, V19.D2], (R5)
	MOVD	40(R4), R5
	ADD	R5<<3, R3, R5
	VLD1	(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	FADD_D2(20, 20, 24)
	FADD_D2(21, 21, 25)
	FADD_D2(22, 22, 26)
	FADD_D2(23, 23, 27)
	VST1	[V20.D2, V21.D2, V22.D2, V23.D2], (R5)
	RET
