// The body of verticalAVX2 and verticalVNNI (simd_amd64.s), whose MADD differs.

	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  src+16(FP), SI
	MOVQ  pairs+24(FP), R8
	MOVQ  npairs+32(FP), R9
	VPXOR Y14, Y14, Y14
	XORQ  R10, R10
	SUBQ  $32, CX // the last chunk's offset

vchunk:
	// 32 output bytes at R10: Y0-Y3 the lo sums of bytes 0-3|16-19, 4-7|20-23, 8-11|24-27,
	// 12-15|28-31 (the unpacks' lane order, undone by the packs), Y4-Y7 the hi sums.
	VPBROADCASTD rbias<>(SB), Y0
	VMOVDQA      Y0, Y1
	VMOVDQA      Y0, Y2
	VMOVDQA      Y0, Y3
	VPXOR        Y4, Y4, Y4
	VPXOR        Y5, Y5, Y5
	VPXOR        Y6, Y6, Y6
	VPXOR        Y7, Y7, Y7
	MOVQ         R8, BX
	MOVQ         R9, DX

vpairs:
	MOVQ         (BX), AX
	MOVQ         8(BX), R11
	ADDQ         SI, AX
	ADDQ         SI, R11
	VPBROADCASTD 16(BX), Y12
	VPBROADCASTD 20(BX), Y13
	VMOVDQU      (AX)(R10*1), Y8
	VMOVDQU      (R11)(R10*1), Y9
	VPUNPCKLBW   Y9, Y8, Y10     // a0 b0 a1 b1 ... | a16 b16 ...
	VPUNPCKHBW   Y9, Y8, Y11     // a8 b8 ... | a24 b24 ...
	VPUNPCKLBW   Y14, Y10, Y8    // words a0 b0 a1 b1 a2 b2 a3 b3 | a16 ...
	MADD(Y12, Y8, Y0, Y9)
	MADD(Y13, Y8, Y4, Y8)
	VPUNPCKHBW   Y14, Y10, Y8
	MADD(Y12, Y8, Y1, Y9)
	MADD(Y13, Y8, Y5, Y8)
	VPUNPCKLBW   Y14, Y11, Y8
	MADD(Y12, Y8, Y2, Y9)
	MADD(Y13, Y8, Y6, Y8)
	VPUNPCKHBW   Y14, Y11, Y8
	MADD(Y12, Y8, Y3, Y9)
	MADD(Y13, Y8, Y7, Y8)
	ADDQ         $24, BX
	DECQ         DX
	JNZ          vpairs

	VPSLLD    $15, Y4, Y4
	VPADDD    Y4, Y0, Y0
	VPSRAD    $22, Y0, Y0
	VPSLLD    $15, Y5, Y5
	VPADDD    Y5, Y1, Y1
	VPSRAD    $22, Y1, Y1
	VPSLLD    $15, Y6, Y6
	VPADDD    Y6, Y2, Y2
	VPSRAD    $22, Y2, Y2
	VPSLLD    $15, Y7, Y7
	VPADDD    Y7, Y3, Y3
	VPSRAD    $22, Y3, Y3
	VPACKSSDW Y1, Y0, Y0         // words 0-7 | 16-23
	VPACKSSDW Y3, Y2, Y2         // 8-15 | 24-31
	VPACKUSWB Y2, Y0, Y0         // bytes 0-31
	VMOVDQU   Y0, (DI)(R10*1)

	CMPQ R10, CX
	JGE  vdone
	ADDQ $32, R10
	CMPQ R10, CX
	JLE  vchunk
	MOVQ CX, R10 // a last, overlapping chunk
	JMP  vchunk

vdone:
	VZEROUPPER
	RET
