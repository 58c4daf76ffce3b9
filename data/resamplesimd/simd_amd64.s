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

// The normalisation kernels' arguments, with the 24 means (Y10-Y12) and stds (Y13-Y15) in registers;
// 24 bytes at SI as floats in Y0-Y2; those stored at DI without the caches, and the pointers advanced.
#define NORMARGS \
	MOVQ    dst+0(FP), DI; \
	MOVQ    pix+8(FP), SI; \
	MOVQ    n+16(FP), CX; \
	MOVQ    ms+24(FP), DX; \
	VMOVUPS (DX), Y10; \
	VMOVUPS 32(DX), Y11; \
	VMOVUPS 64(DX), Y12; \
	VMOVUPS 96(DX), Y13; \
	VMOVUPS 128(DX), Y14; \
	VMOVUPS 160(DX), Y15

#define NORMLOAD \
	VPMOVZXBD (SI), Y0; \
	VPMOVZXBD 8(SI), Y1; \
	VPMOVZXBD 16(SI), Y2; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y1, Y1; \
	VCVTDQ2PS Y2, Y2

#define NORMSTORE \
	VMOVNTPS Y0, (DI); \
	VMOVNTPS Y1, 32(DI); \
	VMOVNTPS Y2, 64(DI); \
	ADDQ     $24, SI; \
	ADDQ     $96, DI; \
	SUBQ     $24, CX

// acc += the word-pair products of m and src (VPMADDWD into tmp, then VPADDD); redefined as one
// VPDPWSSD for the VNNI kernels below.
#define MADD(m, src, acc, tmp) VPMADDWD m, src, tmp; VPADDD tmp, acc, acc

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
	MADD(w+64(DX), Y6, R, Y8); \
	VPMADDWD w+32(DX), Y7, Y9; \
	MADD(w+96(DX), Y6, Y9, Y6)

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
	MADD(w(DX), Y7, R, Y8); \
	MADD(w+32(DX), Y7, Y9, Y7)

#define H4MORE(R, off, w) \
	HLOAD(off); \
	VPSHUFB  Y13, Y6, Y7; \
	VPSHUFB  Y14, Y6, Y6; \
	MADD(w(DX), Y7, R, Y8); \
	MADD(w+32(DX), Y7, Y9, Y7); \
	MADD(w+64(DX), Y6, R, Y8); \
	MADD(w+96(DX), Y6, Y9, Y6)

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
#include "horizontal_amd64.h"

#undef MADD
#define MADD(m, src, acc, tmp) VPDPWSSD m, src, acc

// func horizontalVNNI(dst *byte, dstStride int, src *byte, srcStride int, rows int, offs, wts *int32, groups, pairs int)
// horizontalAVX2 with each multiply-add of word pairs and the addition after it as one VPDPWSSD
// (AVX-512 VNNI on ymm registers, the MADD above): the same wrapping int32 sums.
TEXT ·horizontalVNNI(SB), NOSPLIT, $0-72
#include "horizontal_amd64.h"

#undef MADD
#define MADD(m, src, acc, tmp) VPMADDWD m, src, tmp; VPADDD tmp, acc, acc

// func verticalAVX2(dst *byte, n int, src *byte, pairs *Pair, npairs int)
// Pair: A int64 at 0, B int64 at 8, Lo int32 at 16, Hi int32 at 20 (24 bytes).
TEXT ·verticalAVX2(SB), NOSPLIT, $0-40
#include "vertical_amd64.h"

#undef MADD
#define MADD(m, src, acc, tmp) VPDPWSSD m, src, acc

// func verticalVNNI(dst *byte, n int, src *byte, pairs *Pair, npairs int)
// verticalAVX2 with each multiply-add of word pairs and the addition after it as one VPDPWSSD
// (AVX-512 VNNI on ymm registers): the same wrapping int32 sums, half the instructions.
// Pair: A int64 at 0, B int64 at 8, Lo int32 at 16, Hi int32 at 20 (24 bytes).
TEXT ·verticalVNNI(SB), NOSPLIT, $0-40
#include "vertical_amd64.h"

// func normalizeAVX2(dst *float32, pix *byte, n int, ms *float32)
// dst[i] = (float32(pix[i])/255 - m[i mod 24])/s[i mod 24] for i < n, n a multiple of 24, dst
// 32-byte aligned; ms holds the 24 m then the 24 s. IEEE division and subtraction round exactly,
// as Go's float32 ones do: the same floats. Streaming stores (the batch is far larger than the caches).
TEXT ·normalizeAVX2(SB), NOSPLIT, $0-32
	NORMARGS
	VBROADCASTSS f255<>(SB), Y9

nloop:
	NORMLOAD
	VDIVPS    Y9, Y0, Y0
	VDIVPS    Y9, Y1, Y1
	VDIVPS    Y9, Y2, Y2
	VSUBPS    Y10, Y0, Y0
	VSUBPS    Y11, Y1, Y1
	VSUBPS    Y12, Y2, Y2
	VDIVPS    Y13, Y0, Y0
	VDIVPS    Y14, Y1, Y1
	VDIVPS    Y15, Y2, Y2
	NORMSTORE
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
	NORMARGS
	VBROADCASTSS f255<>(SB), Y6
	VBROADCASTSS r255<>(SB), Y7

floop:
	NORMLOAD
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
	NORMSTORE
	JNZ          floop
	SFENCE
	VZEROUPPER
	RET

// 1/255 rounded to float32.
DATA r255<>+0(SB)/4, $0x3b808081
GLOBL r255<>(SB), RODATA|NOPTR, $4
