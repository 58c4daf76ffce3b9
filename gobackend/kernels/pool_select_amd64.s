#include "textflag.h"

// SelectWindow's AVX2 kernels (pool_select.go). For each group of 8 j < n: the first cell's values and
// indices, then for each further cell c a lane takes the cell where x[offs[c]+j] > best (< for min;
// ordered and quiet, so false on NaN) or x[offs[c]+j] is NaN; arg[j] = offs[chosen]+j.

DATA iota8<>+0(SB)/4, $0
DATA iota8<>+4(SB)/4, $1
DATA iota8<>+8(SB)/4, $2
DATA iota8<>+12(SB)/4, $3
DATA iota8<>+16(SB)/4, $4
DATA iota8<>+20(SB)/4, $5
DATA iota8<>+24(SB)/4, $6
DATA iota8<>+28(SB)/4, $7
GLOBL iota8<>(SB), RODATA|NOPTR, $32

// func selectMaxWindow(n int, x *float32, offs *int32, cells int, arg *int32)
TEXT ·selectMaxWindow(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ offs+16(FP), DX
	MOVQ cells+24(FP), R10
	MOVQ arg+32(FP), DI
	VMOVDQU iota8<>(SB), Y7 // j + lane, for the group at j
	MOVL $8, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	SHRQ $3, CX
	JZ done
group:
	MOVLQSX (DX), AX
	LEAQ (SI)(AX*4), R8
	VMOVUPS (R8), Y1 // best
	VPBROADCASTD (DX), Y4
	VPADDD Y7, Y4, Y4 // arg
	LEAQ 4(DX), R9
	MOVQ R10, R11
	DECQ R11
	JZ store
cell:
	MOVLQSX (R9), AX
	LEAQ (SI)(AX*4), R8
	VMOVUPS (R8), Y0
	VCMPPS $0x1e, Y1, Y0, Y2 // x > best, ordered and quiet
	VCMPPS $3, Y0, Y0, Y3 // x is NaN
	VORPS Y3, Y2, Y2
	VBLENDVPS Y2, Y0, Y1, Y1
	VPBROADCASTD (R9), Y5
	VPADDD Y7, Y5, Y5
	VBLENDVPS Y2, Y5, Y4, Y4
	ADDQ $4, R9
	DECQ R11
	JNZ cell
store:
	VMOVDQU Y4, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	VPADDD Y6, Y7, Y7
	DECQ CX
	JNZ group
done:
	VZEROUPPER
	RET

// func selectMinWindow(n int, x *float32, offs *int32, cells int, arg *int32)
TEXT ·selectMinWindow(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ offs+16(FP), DX
	MOVQ cells+24(FP), R10
	MOVQ arg+32(FP), DI
	VMOVDQU iota8<>(SB), Y7 // j + lane, for the group at j
	MOVL $8, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	SHRQ $3, CX
	JZ done
group:
	MOVLQSX (DX), AX
	LEAQ (SI)(AX*4), R8
	VMOVUPS (R8), Y1 // best
	VPBROADCASTD (DX), Y4
	VPADDD Y7, Y4, Y4 // arg
	LEAQ 4(DX), R9
	MOVQ R10, R11
	DECQ R11
	JZ store
cell:
	MOVLQSX (R9), AX
	LEAQ (SI)(AX*4), R8
	VMOVUPS (R8), Y0
	VCMPPS $0x11, Y1, Y0, Y2 // x < best, ordered and quiet
	VCMPPS $3, Y0, Y0, Y3 // x is NaN
	VORPS Y3, Y2, Y2
	VBLENDVPS Y2, Y0, Y1, Y1
	VPBROADCASTD (R9), Y5
	VPADDD Y7, Y5, Y5
	VBLENDVPS Y2, Y5, Y4, Y4
	ADDQ $4, R9
	DECQ R11
	JNZ cell
store:
	VMOVDQU Y4, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	VPADDD Y6, Y7, Y7
	DECQ CX
	JNZ group
done:
	VZEROUPPER
	RET
