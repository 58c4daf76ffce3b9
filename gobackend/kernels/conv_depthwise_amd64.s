#include "textflag.h"

// AVX2+FMA kernels of the direct depthwise convolution (conv_depthwise.go): rows of channels, 4
// registers (32 float32 or 16 float64) at a time, then one register; the caller does the rest.
// Uses Y0-Y7 only.

// func dwTapsF32(c int, dst *float32, dstStep, count int, src *float32, srcStep int, srcOffs *int, w *float32, wOffs *int, taps int)
// For r < count and j < c: dst[r*dstStep+j] = sum_t src[srcOffs[t]+r*srcStep+j] * w[wOffs[t]+j], the
// sum in t order. c is a multiple of 8, count and taps at least 1; offsets and steps in elements.
TEXT ·dwTapsF32(SB), NOSPLIT, $0-80
	MOVQ srcOffs+48(FP), R9
	MOVQ wOffs+64(FP), R10
	MOVQ taps+72(FP), R11
	MOVQ count+24(FP), R12
	MOVQ srcStep+40(FP), R13
	SHLQ $2, R13
	MOVQ dstStep+16(FP), R14
	SHLQ $2, R14

dwTapsF32_position:
	MOVQ c+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+32(FP), SI
	MOVQ w+56(FP), R8

dwTapsF32_block32:
	CMPQ CX, $32
	JLT  dwTapsF32_block8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX

dwTapsF32_tap32:
	MOVQ (R9)(AX*8), BX
	MOVQ (R10)(AX*8), DX
	VMOVUPS (SI)(BX*4), Y4
	VMOVUPS 32(SI)(BX*4), Y5
	VMOVUPS 64(SI)(BX*4), Y6
	VMOVUPS 96(SI)(BX*4), Y7
	VFMADD231PS (R8)(DX*4), Y4, Y0
	VFMADD231PS 32(R8)(DX*4), Y5, Y1
	VFMADD231PS 64(R8)(DX*4), Y6, Y2
	VFMADD231PS 96(R8)(DX*4), Y7, Y3
	INCQ AX
	CMPQ AX, R11
	JLT  dwTapsF32_tap32

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	ADDQ $128, R8
	SUBQ $32, CX
	JMP  dwTapsF32_block32

dwTapsF32_block8:
	CMPQ CX, $8
	JLT  dwTapsF32_next
	VXORPS Y0, Y0, Y0
	XORQ AX, AX

dwTapsF32_tap8:
	MOVQ (R9)(AX*8), BX
	MOVQ (R10)(AX*8), DX
	VMOVUPS (SI)(BX*4), Y4
	VFMADD231PS (R8)(DX*4), Y4, Y0
	INCQ AX
	CMPQ AX, R11
	JLT  dwTapsF32_tap8

	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	SUBQ $8, CX
	JMP  dwTapsF32_block8

dwTapsF32_next:
	ADDQ R14, dst+8(FP)
	ADDQ R13, src+32(FP)
	DECQ R12
	JNZ  dwTapsF32_position
	VZEROUPPER
	RET

// func dwTapsF64(c int, dst *float64, dstStep, count int, src *float64, srcStep int, srcOffs *int, w *float64, wOffs *int, taps int)
// For r < count and j < c: dst[r*dstStep+j] = sum_t src[srcOffs[t]+r*srcStep+j] * w[wOffs[t]+j], the
// sum in t order. c is a multiple of 4, count and taps at least 1; offsets and steps in elements.
TEXT ·dwTapsF64(SB), NOSPLIT, $0-80
	MOVQ srcOffs+48(FP), R9
	MOVQ wOffs+64(FP), R10
	MOVQ taps+72(FP), R11
	MOVQ count+24(FP), R12
	MOVQ srcStep+40(FP), R13
	SHLQ $3, R13
	MOVQ dstStep+16(FP), R14
	SHLQ $3, R14

dwTapsF64_position:
	MOVQ c+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+32(FP), SI
	MOVQ w+56(FP), R8

dwTapsF64_block16:
	CMPQ CX, $16
	JLT  dwTapsF64_block4
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ AX, AX

dwTapsF64_tap16:
	MOVQ (R9)(AX*8), BX
	MOVQ (R10)(AX*8), DX
	VMOVUPD (SI)(BX*8), Y4
	VMOVUPD 32(SI)(BX*8), Y5
	VMOVUPD 64(SI)(BX*8), Y6
	VMOVUPD 96(SI)(BX*8), Y7
	VFMADD231PD (R8)(DX*8), Y4, Y0
	VFMADD231PD 32(R8)(DX*8), Y5, Y1
	VFMADD231PD 64(R8)(DX*8), Y6, Y2
	VFMADD231PD 96(R8)(DX*8), Y7, Y3
	INCQ AX
	CMPQ AX, R11
	JLT  dwTapsF64_tap16

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	ADDQ $128, R8
	SUBQ $16, CX
	JMP  dwTapsF64_block16

dwTapsF64_block4:
	CMPQ CX, $4
	JLT  dwTapsF64_next
	VXORPD Y0, Y0, Y0
	XORQ AX, AX

dwTapsF64_tap4:
	MOVQ (R9)(AX*8), BX
	MOVQ (R10)(AX*8), DX
	VMOVUPD (SI)(BX*8), Y4
	VFMADD231PD (R8)(DX*8), Y4, Y0
	INCQ AX
	CMPQ AX, R11
	JLT  dwTapsF64_tap4

	VMOVUPD Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	SUBQ $4, CX
	JMP  dwTapsF64_block4

dwTapsF64_next:
	ADDQ R14, dst+8(FP)
	ADDQ R13, src+32(FP)
	DECQ R12
	JNZ  dwTapsF64_position
	VZEROUPPER
	RET

// func dwAccF32(c int, acc *float32, accOffs *int, x *float32, xOffs *int, v *float32, pairs, count, xStep, vStep int)
// For r < count, t < pairs and j < c: acc[accOffs[t]+j] += x[xOffs[t]+r*xStep+j] * v[r*vStep+j], in r
// then t order. c is a multiple of 8, pairs and count at least 1; offsets and steps in elements.
TEXT ·dwAccF32(SB), NOSPLIT, $0-80
	MOVQ accOffs+16(FP), R9
	MOVQ xOffs+32(FP), R10
	MOVQ pairs+48(FP), R11
	MOVQ count+56(FP), R12
	MOVQ xStep+64(FP), R13
	SHLQ $2, R13
	MOVQ vStep+72(FP), R14
	SHLQ $2, R14

dwAccF32_row:
	MOVQ c+0(FP), CX
	MOVQ acc+8(FP), DI
	MOVQ x+24(FP), SI
	MOVQ v+40(FP), R8

dwAccF32_block32:
	CMPQ CX, $32
	JLT  dwAccF32_block8
	VMOVUPS (R8), Y0
	VMOVUPS 32(R8), Y1
	VMOVUPS 64(R8), Y2
	VMOVUPS 96(R8), Y3
	XORQ AX, AX

dwAccF32_pair32:
	MOVQ (R10)(AX*8), BX
	MOVQ (R9)(AX*8), DX
	VMOVUPS (DI)(DX*4), Y4
	VMOVUPS 32(DI)(DX*4), Y5
	VMOVUPS 64(DI)(DX*4), Y6
	VMOVUPS 96(DI)(DX*4), Y7
	VFMADD231PS (SI)(BX*4), Y0, Y4
	VFMADD231PS 32(SI)(BX*4), Y1, Y5
	VFMADD231PS 64(SI)(BX*4), Y2, Y6
	VFMADD231PS 96(SI)(BX*4), Y3, Y7
	VMOVUPS Y4, (DI)(DX*4)
	VMOVUPS Y5, 32(DI)(DX*4)
	VMOVUPS Y6, 64(DI)(DX*4)
	VMOVUPS Y7, 96(DI)(DX*4)
	INCQ AX
	CMPQ AX, R11
	JLT  dwAccF32_pair32

	ADDQ $128, DI
	ADDQ $128, SI
	ADDQ $128, R8
	SUBQ $32, CX
	JMP  dwAccF32_block32

dwAccF32_block8:
	CMPQ CX, $8
	JLT  dwAccF32_next
	VMOVUPS (R8), Y0
	XORQ AX, AX

dwAccF32_pair8:
	MOVQ (R10)(AX*8), BX
	MOVQ (R9)(AX*8), DX
	VMOVUPS (DI)(DX*4), Y4
	VFMADD231PS (SI)(BX*4), Y0, Y4
	VMOVUPS Y4, (DI)(DX*4)
	INCQ AX
	CMPQ AX, R11
	JLT  dwAccF32_pair8

	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	SUBQ $8, CX
	JMP  dwAccF32_block8

dwAccF32_next:
	ADDQ R13, x+24(FP)
	ADDQ R14, v+40(FP)
	DECQ R12
	JNZ  dwAccF32_row
	VZEROUPPER
	RET

// func dwAccF64(c int, acc *float64, accOffs *int, x *float64, xOffs *int, v *float64, pairs, count, xStep, vStep int)
// For r < count, t < pairs and j < c: acc[accOffs[t]+j] += x[xOffs[t]+r*xStep+j] * v[r*vStep+j], in r
// then t order. c is a multiple of 4, pairs and count at least 1; offsets and steps in elements.
TEXT ·dwAccF64(SB), NOSPLIT, $0-80
	MOVQ accOffs+16(FP), R9
	MOVQ xOffs+32(FP), R10
	MOVQ pairs+48(FP), R11
	MOVQ count+56(FP), R12
	MOVQ xStep+64(FP), R13
	SHLQ $3, R13
	MOVQ vStep+72(FP), R14
	SHLQ $3, R14

dwAccF64_row:
	MOVQ c+0(FP), CX
	MOVQ acc+8(FP), DI
	MOVQ x+24(FP), SI
	MOVQ v+40(FP), R8

dwAccF64_block16:
	CMPQ CX, $16
	JLT  dwAccF64_block4
	VMOVUPD (R8), Y0
	VMOVUPD 32(R8), Y1
	VMOVUPD 64(R8), Y2
	VMOVUPD 96(R8), Y3
	XORQ AX, AX

dwAccF64_pair16:
	MOVQ (R10)(AX*8), BX
	MOVQ (R9)(AX*8), DX
	VMOVUPD (DI)(DX*8), Y4
	VMOVUPD 32(DI)(DX*8), Y5
	VMOVUPD 64(DI)(DX*8), Y6
	VMOVUPD 96(DI)(DX*8), Y7
	VFMADD231PD (SI)(BX*8), Y0, Y4
	VFMADD231PD 32(SI)(BX*8), Y1, Y5
	VFMADD231PD 64(SI)(BX*8), Y2, Y6
	VFMADD231PD 96(SI)(BX*8), Y3, Y7
	VMOVUPD Y4, (DI)(DX*8)
	VMOVUPD Y5, 32(DI)(DX*8)
	VMOVUPD Y6, 64(DI)(DX*8)
	VMOVUPD Y7, 96(DI)(DX*8)
	INCQ AX
	CMPQ AX, R11
	JLT  dwAccF64_pair16

	ADDQ $128, DI
	ADDQ $128, SI
	ADDQ $128, R8
	SUBQ $16, CX
	JMP  dwAccF64_block16

dwAccF64_block4:
	CMPQ CX, $4
	JLT  dwAccF64_next
	VMOVUPD (R8), Y0
	XORQ AX, AX

dwAccF64_pair4:
	MOVQ (R10)(AX*8), BX
	MOVQ (R9)(AX*8), DX
	VMOVUPD (DI)(DX*8), Y4
	VFMADD231PD (SI)(BX*8), Y0, Y4
	VMOVUPD Y4, (DI)(DX*8)
	INCQ AX
	CMPQ AX, R11
	JLT  dwAccF64_pair4

	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	SUBQ $4, CX
	JMP  dwAccF64_block4

dwAccF64_next:
	ADDQ R13, x+24(FP)
	ADDQ R14, v+40(FP)
	DECQ R12
	JNZ  dwAccF64_row
	VZEROUPPER
	RET
