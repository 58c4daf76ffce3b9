// The body of horizontalAVX2 and horizontalVNNI (simd_amd64.s), whose MADD differs.

	MOVQ dst+0(FP), DI
	MOVQ src+16(FP), SI
	MOVQ rows+32(FP), R10
	MOVQ pairs+64(FP), R11
	VMOVDQU hmaskA<>(SB), Y13
	VMOVDQU hmaskB<>(SB), Y14
	VMOVDQU hcompact<>(SB), Y11
	VPBROADCASTD rbias<>(SB), Y12
	MOVQ srcStride+24(FP), R9
	SHLQ $1, R9

hrow:
	MOVQ offs+40(FP), BX
	MOVQ wts+48(FP), DX
	MOVQ groups+56(FP), CX
	MOVQ DI, R12
	CMPQ R11, $1
	JEQ  hp1
	CMPQ R11, $2
	JEQ  hp2
	CMPQ R11, $3
	JEQ  hp3
	CMPQ R11, $4
	JEQ  hp4
	CMPQ R11, $5
	JEQ  hp5
	JMP  hgroup

hp1:
	// Up to 2 taps (an enlargement, bilinear): a RandomResizedCrop box narrower than its output.
	HPREFETCH
	H2FIRST(Y0, 0, 0)
	HEND(Y0)
	H2FIRST(Y1, 8, 64)
	HEND(Y1)
	H2FIRST(Y2, 16, 128)
	HEND(Y2)
	H2FIRST(Y3, 24, 192)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $256, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  hp1
	JMP  hnext

hp2:
	HPREFETCH
	H4FIRST(Y0, 0, 0)
	HEND(Y0)
	H4FIRST(Y1, 8, 128)
	HEND(Y1)
	H4FIRST(Y2, 16, 256)
	HEND(Y2)
	H4FIRST(Y3, 24, 384)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $512, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  hp2
	JMP  hnext

hp3:
	HPREFETCH
	H4FIRST(Y0, 0, 0)
	H2MORE(Y0, 12, 128)
	HEND(Y0)
	H4FIRST(Y1, 8, 192)
	H2MORE(Y1, 12, 320)
	HEND(Y1)
	H4FIRST(Y2, 16, 384)
	H2MORE(Y2, 12, 512)
	HEND(Y2)
	H4FIRST(Y3, 24, 576)
	H2MORE(Y3, 12, 704)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $768, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  hp3
	JMP  hnext

hp4:
	HPREFETCH
	H4FIRST(Y0, 0, 0)
	H4MORE(Y0, 12, 128)
	HEND(Y0)
	H4FIRST(Y1, 8, 256)
	H4MORE(Y1, 12, 384)
	HEND(Y1)
	H4FIRST(Y2, 16, 512)
	H4MORE(Y2, 12, 640)
	HEND(Y2)
	H4FIRST(Y3, 24, 768)
	H4MORE(Y3, 12, 896)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $1024, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  hp4
	JMP  hnext

hp5:
	HPREFETCH
	H4FIRST(Y0, 0, 0)
	H4MORE(Y0, 12, 128)
	H2MORE(Y0, 24, 256)
	HEND(Y0)
	H4FIRST(Y1, 8, 320)
	H4MORE(Y1, 12, 448)
	H2MORE(Y1, 24, 576)
	HEND(Y1)
	H4FIRST(Y2, 16, 640)
	H4MORE(Y2, 12, 768)
	H2MORE(Y2, 24, 896)
	HEND(Y2)
	H4FIRST(Y3, 24, 960)
	H4MORE(Y3, 12, 1088)
	H2MORE(Y3, 24, 1216)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $1280, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  hp5
	JMP  hnext

hgroup:
	// Any number of pairs: a loop per register.
	HPREFETCH
	MOVQ $4, R13

hreg:
	MOVLQSX (BX), AX
	MOVLQSX 4(BX), R14
	ADDQ    SI, AX
	ADDQ    SI, R14
	VMOVDQA Y12, Y4
	VPXOR   Y5, Y5, Y5
	MOVQ    R11, R8
	CMPQ    R8, $2
	JLT     htail

hpairs:
	// Four taps from one 16-byte load per lane.
	VMOVDQU     (AX), X6
	VINSERTI128 $1, (R14), Y6, Y6
	VPSHUFB     Y13, Y6, Y7
	MADD((DX), Y7, Y4, Y8)
	MADD(32(DX), Y7, Y5, Y7)
	VPSHUFB     Y14, Y6, Y7
	MADD(64(DX), Y7, Y4, Y8)
	MADD(96(DX), Y7, Y5, Y7)
	ADDQ        $128, DX
	ADDQ        $12, AX
	ADDQ        $12, R14
	SUBQ        $2, R8
	CMPQ        R8, $2
	JGE         hpairs

htail:
	TESTQ       R8, R8
	JZ          hsum
	VMOVDQU     (AX), X6
	VINSERTI128 $1, (R14), Y6, Y6
	VPSHUFB     Y13, Y6, Y7
	MADD((DX), Y7, Y4, Y8)
	MADD(32(DX), Y7, Y5, Y7)
	ADDQ        $64, DX

hsum:
	VPSLLD  $15, Y5, Y5
	VPADDD  Y5, Y4, Y4
	VPSRAD  $22, Y4, Y4
	// Y0..Y3 end up holding pixels (0,4), (1,5), (2,6), (3,7).
	VMOVDQA Y1, Y0
	VMOVDQA Y2, Y1
	VMOVDQA Y3, Y2
	VMOVDQA Y4, Y3
	ADDQ    $8, BX
	DECQ    R13
	JNZ     hreg

	HSTORE
	ADDQ $24, R12
	DECQ CX
	JNZ  hgroup

hnext:
	ADDQ dstStride+8(FP), DI
	ADDQ srcStride+24(FP), SI
	DECQ R10
	JNZ  hrow
	VZEROUPPER
	RET
