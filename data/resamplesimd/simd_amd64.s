#include "textflag.h"

// Pillow's fixed-point resampling with AVX2 (see simd.go): word pairs of pixels times
// split weights (VPMADDWD), lo and hi sums, total = lo + hi<<15 + 2²¹, >> 22, saturating packs
// to bytes (= Pillow's clip). Uses Y0-Y14 only.

// Word pairs (R0,R1) (G0,G1) (B0,B1) (0,0) from taps 0,1 (bytes 0-5) of an RGB run, in each lane.
DATA hmaskA<>+0(SB)/8, $0x8004800180038000
DATA hmaskA<>+8(SB)/8, $0x8080808080058002
DATA hmaskA<>+16(SB)/8, $0x8004800180038000
DATA hmaskA<>+24(SB)/8, $0x8080808080058002
GLOBL hmaskA<>(SB), RODATA|NOPTR, $32

// The same from taps 2,3 (bytes 6-11).
DATA hmaskB<>+0(SB)/8, $0x800A800780098006
DATA hmaskB<>+8(SB)/8, $0x80808080800B8008
DATA hmaskB<>+16(SB)/8, $0x800A800780098006
DATA hmaskB<>+24(SB)/8, $0x80808080800B8008
GLOBL hmaskB<>(SB), RODATA|NOPTR, $32

// 4 pixels RGBx -> 12 bytes RGB, in each lane.
DATA hcompact<>+0(SB)/8, $0x0908060504020100
DATA hcompact<>+8(SB)/8, $0x808080800E0D0C0A
DATA hcompact<>+16(SB)/8, $0x0908060504020100
DATA hcompact<>+24(SB)/8, $0x808080800E0D0C0A
GLOBL hcompact<>(SB), RODATA|NOPTR, $32

// Pillow's rounding bias, 1 << (22-1).
DATA rbias<>+0(SB)/4, $0x00200000
GLOBL rbias<>(SB), RODATA|NOPTR, $4

// Straight-line bodies for one register (2 pixels) of a group, for 1-5 tap pairs: R its result,
// Y9 the hi sum, q the offsets' displacement in BX, w the weights' in DX. Lane 0 reads at SI+AX,
// lane 1 at SI+R14.
#define HLOAD(off) \
	VMOVDQU     off(SI)(AX*1), X6; \
	VINSERTI128 $1, off(SI)(R14*1), Y6, Y6

#define H4FIRST(R, q, w) \
	MOVLQSX  q(BX), AX; \
	MOVLQSX  q+4(BX), R14; \
	HLOAD(0); \
	VPSHUFB  Y13, Y6, Y7; \
	VPSHUFB  Y14, Y6, Y6; \
	VPMADDWD w(DX), Y7, R; \
	VPMADDWD w+64(DX), Y6, Y8; \
	VPADDD   Y8, R, R; \
	VPMADDWD w+32(DX), Y7, Y9; \
	VPMADDWD w+96(DX), Y6, Y6; \
	VPADDD   Y6, Y9, Y9

#define H2FIRST(R, q, w) \
	MOVLQSX  q(BX), AX; \
	MOVLQSX  q+4(BX), R14; \
	HLOAD(0); \
	VPSHUFB  Y13, Y6, Y7; \
	VPMADDWD w(DX), Y7, R; \
	VPMADDWD w+32(DX), Y7, Y9

#define H2MORE(R, off, w) \
	HLOAD(off); \
	VPSHUFB  Y13, Y6, Y7; \
	VPMADDWD w(DX), Y7, Y8; \
	VPADDD   Y8, R, R; \
	VPMADDWD w+32(DX), Y7, Y7; \
	VPADDD   Y7, Y9, Y9

#define H4MORE(R, off, w) \
	HLOAD(off); \
	VPSHUFB  Y13, Y6, Y7; \
	VPSHUFB  Y14, Y6, Y6; \
	VPMADDWD w(DX), Y7, Y8; \
	VPADDD   Y8, R, R; \
	VPMADDWD w+32(DX), Y7, Y7; \
	VPADDD   Y7, Y9, Y9; \
	VPMADDWD w+64(DX), Y6, Y8; \
	VPADDD   Y8, R, R; \
	VPMADDWD w+96(DX), Y6, Y6; \
	VPADDD   Y6, Y9, Y9

#define HEND(R) \
	VPSLLD $15, Y9, Y9; \
	VPADDD Y12, R, R; \
	VPADDD Y9, R, R; \
	VPSRAD $22, R, R

// Brings the input of the group at BX two rows ahead (R9 = 2·srcStride) into the cache: the rows
// of a box read where it lies in a larger decoded image are not there yet.
#define HPREFETCH \
	MOVLQSX    (BX), AX; \
	ADDQ       SI, AX; \
	PREFETCHT0 (AX)(R9*1); \
	PREFETCHT0 64(AX)(R9*1)

// Y0..Y3 hold pixels (0,4), (1,5), (2,6), (3,7) of a group: 24 bytes of RGB (and 4 of junk) at R12.
#define HSTORE \
	VPACKSSDW    Y1, Y0, Y8; \
	VPACKSSDW    Y3, Y2, Y9; \
	VPACKUSWB    Y9, Y8, Y8; \
	VPSHUFB      Y11, Y8, Y8; \
	VMOVDQU      X8, (R12); \
	VEXTRACTI128 $1, Y8, 12(R12)

// func horizontalAVX2(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)
TEXT ·horizontalAVX2(SB), NOSPLIT, $0-72
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
	VPMADDWD    (DX), Y7, Y8
	VPADDD      Y8, Y4, Y4
	VPMADDWD    32(DX), Y7, Y7
	VPADDD      Y7, Y5, Y5
	VPSHUFB     Y14, Y6, Y7
	VPMADDWD    64(DX), Y7, Y8
	VPADDD      Y8, Y4, Y4
	VPMADDWD    96(DX), Y7, Y7
	VPADDD      Y7, Y5, Y5
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
	VPMADDWD    (DX), Y7, Y8
	VPADDD      Y8, Y4, Y4
	VPMADDWD    32(DX), Y7, Y7
	VPADDD      Y7, Y5, Y5
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


// The macros above with VPDPWSSD for each multiply-add and its addition, for horizontalVNNI.
#define N4FIRST(R, q, w) \
	MOVLQSX  q(BX), AX; \
	MOVLQSX  q+4(BX), R14; \
	HLOAD(0); \
	VPSHUFB  Y13, Y6, Y7; \
	VPSHUFB  Y14, Y6, Y6; \
	VPMADDWD w(DX), Y7, R; \
	VPDPWSSD w+64(DX), Y6, R; \
	VPMADDWD w+32(DX), Y7, Y9; \
	VPDPWSSD w+96(DX), Y6, Y9

#define N2MORE(R, off, w) \
	HLOAD(off); \
	VPSHUFB  Y13, Y6, Y7; \
	VPDPWSSD w(DX), Y7, R; \
	VPDPWSSD w+32(DX), Y7, Y9

#define N4MORE(R, off, w) \
	HLOAD(off); \
	VPSHUFB  Y13, Y6, Y7; \
	VPSHUFB  Y14, Y6, Y6; \
	VPDPWSSD w(DX), Y7, R; \
	VPDPWSSD w+32(DX), Y7, Y9; \
	VPDPWSSD w+64(DX), Y6, R; \
	VPDPWSSD w+96(DX), Y6, Y9

// func horizontalVNNI(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)
// horizontalAVX2 with each multiply-add of word pairs and the addition after it as one VPDPWSSD
// (AVX-512 VNNI on ymm registers; the N macros): the same wrapping int32 sums.
TEXT ·horizontalVNNI(SB), NOSPLIT, $0-72
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

nhrow:
	MOVQ offs+40(FP), BX
	MOVQ wts+48(FP), DX
	MOVQ groups+56(FP), CX
	MOVQ DI, R12
	CMPQ R11, $1
	JEQ  nhp1
	CMPQ R11, $2
	JEQ  nhp2
	CMPQ R11, $3
	JEQ  nhp3
	CMPQ R11, $4
	JEQ  nhp4
	CMPQ R11, $5
	JEQ  nhp5
	JMP  nhgroup

nhp1:
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
	JNZ  nhp1
	JMP  nhnext

nhp2:
	HPREFETCH
	N4FIRST(Y0, 0, 0)
	HEND(Y0)
	N4FIRST(Y1, 8, 128)
	HEND(Y1)
	N4FIRST(Y2, 16, 256)
	HEND(Y2)
	N4FIRST(Y3, 24, 384)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $512, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  nhp2
	JMP  nhnext

nhp3:
	HPREFETCH
	N4FIRST(Y0, 0, 0)
	N2MORE(Y0, 12, 128)
	HEND(Y0)
	N4FIRST(Y1, 8, 192)
	N2MORE(Y1, 12, 320)
	HEND(Y1)
	N4FIRST(Y2, 16, 384)
	N2MORE(Y2, 12, 512)
	HEND(Y2)
	N4FIRST(Y3, 24, 576)
	N2MORE(Y3, 12, 704)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $768, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  nhp3
	JMP  nhnext

nhp4:
	HPREFETCH
	N4FIRST(Y0, 0, 0)
	N4MORE(Y0, 12, 128)
	HEND(Y0)
	N4FIRST(Y1, 8, 256)
	N4MORE(Y1, 12, 384)
	HEND(Y1)
	N4FIRST(Y2, 16, 512)
	N4MORE(Y2, 12, 640)
	HEND(Y2)
	N4FIRST(Y3, 24, 768)
	N4MORE(Y3, 12, 896)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $1024, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  nhp4
	JMP  nhnext

nhp5:
	HPREFETCH
	N4FIRST(Y0, 0, 0)
	N4MORE(Y0, 12, 128)
	N2MORE(Y0, 24, 256)
	HEND(Y0)
	N4FIRST(Y1, 8, 320)
	N4MORE(Y1, 12, 448)
	N2MORE(Y1, 24, 576)
	HEND(Y1)
	N4FIRST(Y2, 16, 640)
	N4MORE(Y2, 12, 768)
	N2MORE(Y2, 24, 896)
	HEND(Y2)
	N4FIRST(Y3, 24, 960)
	N4MORE(Y3, 12, 1088)
	N2MORE(Y3, 24, 1216)
	HEND(Y3)
	HSTORE
	ADDQ $32, BX
	ADDQ $1280, DX
	ADDQ $24, R12
	DECQ CX
	JNZ  nhp5
	JMP  nhnext

nhgroup:
	// Any number of pairs: a loop per register.
	HPREFETCH
	MOVQ $4, R13

nhreg:
	MOVLQSX (BX), AX
	MOVLQSX 4(BX), R14
	ADDQ    SI, AX
	ADDQ    SI, R14
	VMOVDQA Y12, Y4
	VPXOR   Y5, Y5, Y5
	MOVQ    R11, R8
	CMPQ    R8, $2
	JLT     nhtail

nhpairs:
	// Four taps from one 16-byte load per lane.
	VMOVDQU     (AX), X6
	VINSERTI128 $1, (R14), Y6, Y6
	VPSHUFB     Y13, Y6, Y7
	VPDPWSSD    (DX), Y7, Y4
	VPDPWSSD    32(DX), Y7, Y5
	VPSHUFB     Y14, Y6, Y7
	VPDPWSSD    64(DX), Y7, Y4
	VPDPWSSD    96(DX), Y7, Y5
	ADDQ        $128, DX
	ADDQ        $12, AX
	ADDQ        $12, R14
	SUBQ        $2, R8
	CMPQ        R8, $2
	JGE         nhpairs

nhtail:
	TESTQ       R8, R8
	JZ          nhsum
	VMOVDQU     (AX), X6
	VINSERTI128 $1, (R14), Y6, Y6
	VPSHUFB     Y13, Y6, Y7
	VPDPWSSD    (DX), Y7, Y4
	VPDPWSSD    32(DX), Y7, Y5
	ADDQ        $64, DX

nhsum:
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
	JNZ     nhreg

	HSTORE
	ADDQ $24, R12
	DECQ CX
	JNZ  nhgroup

nhnext:
	ADDQ dstStride+8(FP), DI
	ADDQ srcStride+24(FP), SI
	DECQ R10
	JNZ  nhrow
	VZEROUPPER
	RET

// func verticalAVX2(dst *byte, n int, src *byte, pairs *Pair, npairs int)
// Pair: A int64 at 0, B int64 at 8, Lo int32 at 16, Hi int32 at 20 (24 bytes).
TEXT ·verticalAVX2(SB), NOSPLIT, $0-40
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
	VPMADDWD     Y12, Y8, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y4, Y4
	VPUNPCKHBW   Y14, Y10, Y8
	VPMADDWD     Y12, Y8, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y5, Y5
	VPUNPCKLBW   Y14, Y11, Y8
	VPMADDWD     Y12, Y8, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y6, Y6
	VPUNPCKHBW   Y14, Y11, Y8
	VPMADDWD     Y12, Y8, Y9
	VPADDD       Y9, Y3, Y3
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y7, Y7
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

// func verticalVNNI(dst *byte, n int, src *byte, pairs *Pair, npairs int)
// verticalAVX2 with each multiply-add of word pairs and the addition after it as one VPDPWSSD
// (AVX-512 VNNI on ymm registers): the same wrapping int32 sums, half the instructions.
// Pair: A int64 at 0, B int64 at 8, Lo int32 at 16, Hi int32 at 20 (24 bytes).
TEXT ·verticalVNNI(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  src+16(FP), SI
	MOVQ  pairs+24(FP), R8
	MOVQ  npairs+32(FP), R9
	VPXOR Y14, Y14, Y14
	XORQ  R10, R10
	SUBQ  $32, CX // the last chunk's offset

wchunk:
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

wpairs:
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
	VPDPWSSD     Y12, Y8, Y0
	VPDPWSSD     Y13, Y8, Y4
	VPUNPCKHBW   Y14, Y10, Y8
	VPDPWSSD     Y12, Y8, Y1
	VPDPWSSD     Y13, Y8, Y5
	VPUNPCKLBW   Y14, Y11, Y8
	VPDPWSSD     Y12, Y8, Y2
	VPDPWSSD     Y13, Y8, Y6
	VPUNPCKHBW   Y14, Y11, Y8
	VPDPWSSD     Y12, Y8, Y3
	VPDPWSSD     Y13, Y8, Y7
	ADDQ         $24, BX
	DECQ         DX
	JNZ          wpairs

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
	JGE  wdone
	ADDQ $32, R10
	CMPQ R10, CX
	JLE  wchunk
	MOVQ CX, R10 // a last, overlapping chunk
	JMP  wchunk

wdone:
	VZEROUPPER
	RET

// func normalizeAVX2(dst *float32, pix *byte, n int, ms *float32)
// dst[i] = (float32(pix[i])/255 - m[i mod 24])/s[i mod 24] for i < n, n a multiple of 24, dst
// 32-byte aligned; ms holds the 24 m then the 24 s. IEEE division and subtraction round exactly,
// as Go's float32 ones do: the same floats. Streaming stores (the batch is far larger than the caches).
TEXT ·normalizeAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         pix+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         ms+24(FP), DX
	VMOVUPS      (DX), Y10
	VMOVUPS      32(DX), Y11
	VMOVUPS      64(DX), Y12
	VMOVUPS      96(DX), Y13
	VMOVUPS      128(DX), Y14
	VMOVUPS      160(DX), Y15
	VBROADCASTSS f255<>(SB), Y9

nloop:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD 16(SI), Y2
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VDIVPS    Y9, Y0, Y0
	VDIVPS    Y9, Y1, Y1
	VDIVPS    Y9, Y2, Y2
	VSUBPS    Y10, Y0, Y0
	VSUBPS    Y11, Y1, Y1
	VSUBPS    Y12, Y2, Y2
	VDIVPS    Y13, Y0, Y0
	VDIVPS    Y14, Y1, Y1
	VDIVPS    Y15, Y2, Y2
	VMOVNTPS  Y0, (DI)
	VMOVNTPS  Y1, 32(DI)
	VMOVNTPS  Y2, 64(DI)
	ADDQ      $24, SI
	ADDQ      $96, DI
	SUBQ      $24, CX
	JNZ       nloop
	SFENCE
	VZEROUPPER
	RET

DATA f255<>+0(SB)/4, $255.0
GLOBL f255<>(SB), RODATA|NOPTR, $4

// func normalizeFMA(dst *float32, pix *byte, n int, ms *float32)
// normalizeAVX2 without its two divisions: a/b as q = a·y, then q + (a - q·b)·y with y = 1/b
// rounded to float32 and both corrections fused (Markstein's correction, which gives the rounded
// quotient a/b for such b and a's range; NewNormalizer checks every input byte of every channel
// against Go's division before choosing this kernel). ms holds the 24 m, 24 s, 24 1/s.
TEXT ·normalizeFMA(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         pix+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         ms+24(FP), DX
	VMOVUPS      (DX), Y10
	VMOVUPS      32(DX), Y11
	VMOVUPS      64(DX), Y12
	VMOVUPS      96(DX), Y13
	VMOVUPS      128(DX), Y14
	VMOVUPS      160(DX), Y15
	VBROADCASTSS f255<>(SB), Y6
	VBROADCASTSS r255<>(SB), Y7

floop:
	VPMOVZXBD    (SI), Y0
	VPMOVZXBD    8(SI), Y1
	VPMOVZXBD    16(SI), Y2
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	// t = v/255: q = v·(1/255), r = v - q·255 (exact), t = q + r·(1/255).
	VMULPS       Y7, Y0, Y3
	VMULPS       Y7, Y1, Y4
	VMULPS       Y7, Y2, Y5
	VFNMADD231PS Y6, Y3, Y0
	VFNMADD231PS Y6, Y4, Y1
	VFNMADD231PS Y6, Y5, Y2
	VFMADD231PS  Y7, Y0, Y3
	VFMADD231PS  Y7, Y1, Y4
	VFMADD231PS  Y7, Y2, Y5
	// d = t - m, then d/s the same way.
	VSUBPS       Y10, Y3, Y3
	VSUBPS       Y11, Y4, Y4
	VSUBPS       Y12, Y5, Y5
	VMULPS       192(DX), Y3, Y0
	VMULPS       224(DX), Y4, Y1
	VMULPS       256(DX), Y5, Y2
	VFNMADD231PS Y13, Y0, Y3
	VFNMADD231PS Y14, Y1, Y4
	VFNMADD231PS Y15, Y2, Y5
	VFMADD231PS  192(DX), Y3, Y0
	VFMADD231PS  224(DX), Y4, Y1
	VFMADD231PS  256(DX), Y5, Y2
	VMOVNTPS     Y0, (DI)
	VMOVNTPS     Y1, 32(DI)
	VMOVNTPS     Y2, 64(DI)
	ADDQ         $24, SI
	ADDQ         $96, DI
	SUBQ         $24, CX
	JNZ          floop
	SFENCE
	VZEROUPPER
	RET

// 1/255 rounded to float32.
DATA r255<>+0(SB)/4, $0x3b808081
GLOBL r255<>(SB), RODATA|NOPTR, $4
