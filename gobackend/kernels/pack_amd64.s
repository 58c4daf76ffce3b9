#include "textflag.h"

// Panel copies for the GEMM's packing (pack_narrow.go): n rows of w float32 values from src at
// element offsets offs[i] to dst, one after another. A call per row to memmove cost more than the copy.

// func copyRows16(n int, dst, src *float32, offs *int)
TEXT ·copyRows16(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ offs+24(FP), BX
	TESTQ CX, CX
	JZ done16
loop16:
	MOVQ (BX), AX
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $8, BX
	ADDQ $64, DI
	DECQ CX
	JNZ loop16
done16:
	VZEROUPPER
	RET

// func copyRows6(n int, dst, src *float32, offs *int)
TEXT ·copyRows6(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ offs+24(FP), BX
	TESTQ CX, CX
	JZ done6
loop6:
	MOVQ (BX), AX
	MOVUPS (SI)(AX*4), X0
	MOVQ 16(SI)(AX*4), X1
	MOVUPS X0, (DI)
	MOVQ X1, 16(DI)
	ADDQ $8, BX
	ADDQ $24, DI
	DECQ CX
	JNZ loop6
done6:
	RET
