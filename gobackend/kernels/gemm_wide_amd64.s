#include "textflag.h"
#include "gemm_amd64.h"

// The 7-row float32 tiles of AVX-512, 7×64 and 7×32 (gemm_amd64.go: gemmKernelAVX512Wide7x64,
// gemmKernelAVX512Half7x32), each in its packed and direct forms.

// func gemmKernelAVX512Wide(k int, a, b, c *float32, rows *int, store bool)
// c[rows[r]+j] += sum_p a[p*7+r] * b[p*64+j], for r < 7, j < 64; k >= 1.
// Z0-Z27 accumulate the tile (row r in Z4r-Z4r+3), Z28-Z31 hold a step of B; each FMA broadcasts its
// value of A from memory (no register is left for it).
TEXT ·gemmKernelAVX512Wide(SB), NOSPLIT, $0-41
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ rows+32(FP), R8
	CMPB store+40(FP), $0
	JEQ  avx512widenopf
	PREFETCHROWS7_4
avx512widenopf:

	ZEROZ28

wideloop:
	VMOVUPS (DI), Z28
	VMOVUPS 64(DI), Z29
	VMOVUPS 128(DI), Z30
	VMOVUPS 192(DI), Z31
	VFMADD231PS.BCST (SI), Z28, Z0
	VFMADD231PS.BCST (SI), Z29, Z1
	VFMADD231PS.BCST (SI), Z30, Z2
	VFMADD231PS.BCST (SI), Z31, Z3
	VFMADD231PS.BCST 4(SI), Z28, Z4
	VFMADD231PS.BCST 4(SI), Z29, Z5
	VFMADD231PS.BCST 4(SI), Z30, Z6
	VFMADD231PS.BCST 4(SI), Z31, Z7
	VFMADD231PS.BCST 8(SI), Z28, Z8
	VFMADD231PS.BCST 8(SI), Z29, Z9
	VFMADD231PS.BCST 8(SI), Z30, Z10
	VFMADD231PS.BCST 8(SI), Z31, Z11
	VFMADD231PS.BCST 12(SI), Z28, Z12
	VFMADD231PS.BCST 12(SI), Z29, Z13
	VFMADD231PS.BCST 12(SI), Z30, Z14
	VFMADD231PS.BCST 12(SI), Z31, Z15
	VFMADD231PS.BCST 16(SI), Z28, Z16
	VFMADD231PS.BCST 16(SI), Z29, Z17
	VFMADD231PS.BCST 16(SI), Z30, Z18
	VFMADD231PS.BCST 16(SI), Z31, Z19
	VFMADD231PS.BCST 20(SI), Z28, Z20
	VFMADD231PS.BCST 20(SI), Z29, Z21
	VFMADD231PS.BCST 20(SI), Z30, Z22
	VFMADD231PS.BCST 20(SI), Z31, Z23
	VFMADD231PS.BCST 24(SI), Z28, Z24
	VFMADD231PS.BCST 24(SI), Z29, Z25
	VFMADD231PS.BCST 24(SI), Z30, Z26
	VFMADD231PS.BCST 24(SI), Z31, Z27
	ADDQ $28, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  wideloop

	CMPB store+40(FP), $0
	JNE  widestore
	ADDTILE7x64
	VXORPS X15, X15, X15 // Z15 was an accumulator; the Go ABI expects X15 zero.
	VZEROUPPER
	RET

widestore:
	STORETILE7x64
	VXORPS X15, X15, X15 // Z15 was an accumulator; the Go ABI expects X15 zero.
	VZEROUPPER
	RET

// func gemmKernelAVX512WideDirect(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)
// gemmKernelAVX512Wide with A read in place: c[rows[r]+j] += sum_p data[rowsA[r]+koff[p]] * b[p*64+j],
// for r < 7, j < 64; k >= 1. The 7 rows' addresses stay in R8-R14. Each step prefetches the line after
// the one each row reads: the rows cross into their next lines at the same step, and a convolution's
// input comes from L2 or further (measured on Zen 4: CIFAR-8's 32-px convolutions 3-7% faster with it).
TEXT ·gemmKernelAVX512WideDirect(SB), NOSPLIT, $0-57
	CMPB store+56(FP), $0
	JEQ  avx512widedirectnopf
	MOVQ c+40(FP), DX
	MOVQ rows+48(FP), R8
	PREFETCHROWS7_4
avx512widedirectnopf:
	MOVQ k+0(FP), CX
	MOVQ data+8(FP), AX
	MOVQ rowsA+16(FP), BX
	ROWADDRS7
	MOVQ koff+24(FP), SI
	MOVQ b+32(FP), DI

	ZEROZ28

widedirectloop:
	MOVQ (SI), DX
	VMOVUPS (DI), Z28
	VMOVUPS 64(DI), Z29
	VMOVUPS 128(DI), Z30
	VMOVUPS 192(DI), Z31
	VFMADD231PS.BCST (R8)(DX*4), Z28, Z0
	PREFETCHT0 64(R8)(DX*4)
	VFMADD231PS.BCST (R8)(DX*4), Z29, Z1
	VFMADD231PS.BCST (R8)(DX*4), Z30, Z2
	VFMADD231PS.BCST (R8)(DX*4), Z31, Z3
	VFMADD231PS.BCST (R9)(DX*4), Z28, Z4
	PREFETCHT0 64(R9)(DX*4)
	VFMADD231PS.BCST (R9)(DX*4), Z29, Z5
	VFMADD231PS.BCST (R9)(DX*4), Z30, Z6
	VFMADD231PS.BCST (R9)(DX*4), Z31, Z7
	VFMADD231PS.BCST (R10)(DX*4), Z28, Z8
	PREFETCHT0 64(R10)(DX*4)
	VFMADD231PS.BCST (R10)(DX*4), Z29, Z9
	VFMADD231PS.BCST (R10)(DX*4), Z30, Z10
	VFMADD231PS.BCST (R10)(DX*4), Z31, Z11
	VFMADD231PS.BCST (R11)(DX*4), Z28, Z12
	PREFETCHT0 64(R11)(DX*4)
	VFMADD231PS.BCST (R11)(DX*4), Z29, Z13
	VFMADD231PS.BCST (R11)(DX*4), Z30, Z14
	VFMADD231PS.BCST (R11)(DX*4), Z31, Z15
	VFMADD231PS.BCST (R12)(DX*4), Z28, Z16
	PREFETCHT0 64(R12)(DX*4)
	VFMADD231PS.BCST (R12)(DX*4), Z29, Z17
	VFMADD231PS.BCST (R12)(DX*4), Z30, Z18
	VFMADD231PS.BCST (R12)(DX*4), Z31, Z19
	VFMADD231PS.BCST (R13)(DX*4), Z28, Z20
	PREFETCHT0 64(R13)(DX*4)
	VFMADD231PS.BCST (R13)(DX*4), Z29, Z21
	VFMADD231PS.BCST (R13)(DX*4), Z30, Z22
	VFMADD231PS.BCST (R13)(DX*4), Z31, Z23
	VFMADD231PS.BCST (R14)(DX*4), Z28, Z24
	PREFETCHT0 64(R14)(DX*4)
	VFMADD231PS.BCST (R14)(DX*4), Z29, Z25
	VFMADD231PS.BCST (R14)(DX*4), Z30, Z26
	VFMADD231PS.BCST (R14)(DX*4), Z31, Z27
	ADDQ $8, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  widedirectloop

	MOVQ c+40(FP), DX
	MOVQ rows+48(FP), R8
	CMPB store+56(FP), $0
	JNE  widedirectstore
	ADDTILE7x64
	VXORPS X15, X15, X15 // Z15 was an accumulator; the Go ABI expects X15 zero.
	VZEROUPPER
	RET

widedirectstore:
	STORETILE7x64
	VXORPS X15, X15, X15 // Z15 was an accumulator; the Go ABI expects X15 zero.
	VZEROUPPER
	RET

// func gemmKernelAVX512Half(k int, a, b, c *float32, rows *int, store bool)
// c[rows[r]+j] += sum_p a[p*7+r] * b[p*32+j], for r < 7, j < 32; k >= 1.
// Z0-Z13 accumulate the tile (row r in Z2r-Z2r+1), Z28-Z29 hold a step of B, Z30-Z31 the broadcast values of A.
TEXT ·gemmKernelAVX512Half(SB), NOSPLIT, $0-41
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ rows+32(FP), R8
	CMPB store+40(FP), $0
	JEQ  avx512halfnopf
	PREFETCHROWS7_2
avx512halfnopf:

	ZEROZ14

halfloop:
	VMOVUPS (DI), Z28
	VMOVUPS 64(DI), Z29
	VBROADCASTSS (SI), Z30
	VFMADD231PS Z28, Z30, Z0
	VFMADD231PS Z29, Z30, Z1
	VBROADCASTSS 4(SI), Z31
	VFMADD231PS Z28, Z31, Z2
	VFMADD231PS Z29, Z31, Z3
	VBROADCASTSS 8(SI), Z30
	VFMADD231PS Z28, Z30, Z4
	VFMADD231PS Z29, Z30, Z5
	VBROADCASTSS 12(SI), Z31
	VFMADD231PS Z28, Z31, Z6
	VFMADD231PS Z29, Z31, Z7
	VBROADCASTSS 16(SI), Z30
	VFMADD231PS Z28, Z30, Z8
	VFMADD231PS Z29, Z30, Z9
	VBROADCASTSS 20(SI), Z31
	VFMADD231PS Z28, Z31, Z10
	VFMADD231PS Z29, Z31, Z11
	VBROADCASTSS 24(SI), Z30
	VFMADD231PS Z28, Z30, Z12
	VFMADD231PS Z29, Z30, Z13
	ADDQ $28, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  halfloop

	CMPB store+40(FP), $0
	JNE  halfstore
	ADDTILE7x32
	VZEROUPPER
	RET

halfstore:
	STORETILE7x32
	VZEROUPPER
	RET

// func gemmKernelAVX512HalfDirect(k int, data *float32, rowsA, koff *int, b, c *float32, rows *int, store bool)
// gemmKernelAVX512Half with A read in place: c[rows[r]+j] += sum_p data[rowsA[r]+koff[p]] * b[p*32+j],
// for r < 7, j < 32; k >= 1. The 7 rows' addresses stay in R8-R14; each step prefetches the line after
// the one each row reads, as the 7×64 kernel does.
TEXT ·gemmKernelAVX512HalfDirect(SB), NOSPLIT, $0-57
	CMPB store+56(FP), $0
	JEQ  avx512halfdirectnopf
	MOVQ c+40(FP), DX
	MOVQ rows+48(FP), R8
	PREFETCHROWS7_2
avx512halfdirectnopf:
	MOVQ k+0(FP), CX
	MOVQ data+8(FP), AX
	MOVQ rowsA+16(FP), BX
	ROWADDRS7
	MOVQ koff+24(FP), SI
	MOVQ b+32(FP), DI

	ZEROZ14

halfdirectloop:
	MOVQ (SI), DX
	VMOVUPS (DI), Z28
	VMOVUPS 64(DI), Z29
	VBROADCASTSS (R8)(DX*4), Z30
	PREFETCHT0 64(R8)(DX*4)
	VFMADD231PS Z28, Z30, Z0
	VFMADD231PS Z29, Z30, Z1
	VBROADCASTSS (R9)(DX*4), Z31
	PREFETCHT0 64(R9)(DX*4)
	VFMADD231PS Z28, Z31, Z2
	VFMADD231PS Z29, Z31, Z3
	VBROADCASTSS (R10)(DX*4), Z30
	PREFETCHT0 64(R10)(DX*4)
	VFMADD231PS Z28, Z30, Z4
	VFMADD231PS Z29, Z30, Z5
	VBROADCASTSS (R11)(DX*4), Z31
	PREFETCHT0 64(R11)(DX*4)
	VFMADD231PS Z28, Z31, Z6
	VFMADD231PS Z29, Z31, Z7
	VBROADCASTSS (R12)(DX*4), Z30
	PREFETCHT0 64(R12)(DX*4)
	VFMADD231PS Z28, Z30, Z8
	VFMADD231PS Z29, Z30, Z9
	VBROADCASTSS (R13)(DX*4), Z31
	PREFETCHT0 64(R13)(DX*4)
	VFMADD231PS Z28, Z31, Z10
	VFMADD231PS Z29, Z31, Z11
	VBROADCASTSS (R14)(DX*4), Z30
	PREFETCHT0 64(R14)(DX*4)
	VFMADD231PS Z28, Z30, Z12
	VFMADD231PS Z29, Z30, Z13
	ADDQ $8, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  halfdirectloop

	MOVQ c+40(FP), DX
	MOVQ rows+48(FP), R8
	CMPB store+56(FP), $0
	JNE  halfdirectstore
	ADDTILE7x32
	VZEROUPPER
	RET

halfdirectstore:
	STORETILE7x32
	VZEROUPPER
	RET
