#include "textflag.h"

// AVX2 kernels of GreaterOrEqual for the fused chains' comparisons (rows_bool.go), written like
// rows_amd64.s's GreaterThan (VCMPPS with the ordered, quiet >= predicate: false on NaN, as Go's >=);
// the caller does the last n%8 values. Needs AVX2 and BMI2 (PDEP), as the GreaterThan kernels.

// func rowGreaterEqVV(n int, dst *bool, a, b *float32)
TEXT ·rowGreaterEqVV(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ $0x0101010101010101, R9
	SHRQ $3, CX
	JZ doneg
loopg:
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	VCMPPS $0x1d, Y1, Y0, Y0 // a >= b, ordered and quiet
	VMOVMSKPS Y0, AX
	PDEPQ R9, AX, AX
	MOVQ AX, (DI)
	ADDQ $8, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ loopg
doneg:
	VZEROUPPER
	RET

// func rowGreaterEqVS(n int, dst *bool, a, b *float32)
TEXT ·rowGreaterEqVS(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ $0x0101010101010101, R9
	VBROADCASTSS (DX), Y8
	SHRQ $3, CX
	JZ doneg
loopg:
	VMOVUPS (SI), Y0
	VMOVAPS Y8, Y1
	VCMPPS $0x1d, Y1, Y0, Y0 // a >= b, ordered and quiet
	VMOVMSKPS Y0, AX
	PDEPQ R9, AX, AX
	MOVQ AX, (DI)
	ADDQ $8, DI
	ADDQ $32, SI
	DECQ CX
	JNZ loopg
doneg:
	VZEROUPPER
	RET

// func rowGreaterEqSV(n int, dst *bool, a, b *float32)
TEXT ·rowGreaterEqSV(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ $0x0101010101010101, R9
	VBROADCASTSS (SI), Y8
	SHRQ $3, CX
	JZ doneg
loopg:
	VMOVAPS Y8, Y0
	VMOVUPS (DX), Y1
	VCMPPS $0x1d, Y1, Y0, Y0 // a >= b, ordered and quiet
	VMOVMSKPS Y0, AX
	PDEPQ R9, AX, AX
	MOVQ AX, (DI)
	ADDQ $8, DI
	ADDQ $32, DX
	DECQ CX
	JNZ loopg
doneg:
	VZEROUPPER
	RET
