#include "textflag.h"

// Vectorised exp and logistic, bit for bit what the math package computes one value at a time: Go's
// amd64 math.Exp (math/exp_amd64.s, its FMA path, taken when the CPU has AVX and FMA) on 4 float64
// lanes, every operation the same IEEE operation in the same order, and simplego's logistic
// (1/(1+exp(-x)) for x >= 0, exp(x)/(1+exp(x)) otherwise) around it. A group of 4 with a value
// outside [-700, 700] (or NaN) is left to the caller, which computes it with math.Exp: there
// math.Exp leaves its main path (overflow, subnormal results, infinities).

// 4 copies of each constant (32 bytes apart).
DATA expconst<>+0x000(SB)/8, $0.5
DATA expconst<>+0x008(SB)/8, $0.5
DATA expconst<>+0x010(SB)/8, $0.5
DATA expconst<>+0x018(SB)/8, $0.5
DATA expconst<>+0x020(SB)/8, $1.0
DATA expconst<>+0x028(SB)/8, $1.0
DATA expconst<>+0x030(SB)/8, $1.0
DATA expconst<>+0x038(SB)/8, $1.0
DATA expconst<>+0x040(SB)/8, $2.0
DATA expconst<>+0x048(SB)/8, $2.0
DATA expconst<>+0x050(SB)/8, $2.0
DATA expconst<>+0x058(SB)/8, $2.0
DATA expconst<>+0x060(SB)/8, $1.6666666666666666667e-1
DATA expconst<>+0x068(SB)/8, $1.6666666666666666667e-1
DATA expconst<>+0x070(SB)/8, $1.6666666666666666667e-1
DATA expconst<>+0x078(SB)/8, $1.6666666666666666667e-1
DATA expconst<>+0x080(SB)/8, $4.1666666666666666667e-2
DATA expconst<>+0x088(SB)/8, $4.1666666666666666667e-2
DATA expconst<>+0x090(SB)/8, $4.1666666666666666667e-2
DATA expconst<>+0x098(SB)/8, $4.1666666666666666667e-2
DATA expconst<>+0x0a0(SB)/8, $8.3333333333333333333e-3
DATA expconst<>+0x0a8(SB)/8, $8.3333333333333333333e-3
DATA expconst<>+0x0b0(SB)/8, $8.3333333333333333333e-3
DATA expconst<>+0x0b8(SB)/8, $8.3333333333333333333e-3
DATA expconst<>+0x0c0(SB)/8, $1.3888888888888888889e-3
DATA expconst<>+0x0c8(SB)/8, $1.3888888888888888889e-3
DATA expconst<>+0x0d0(SB)/8, $1.3888888888888888889e-3
DATA expconst<>+0x0d8(SB)/8, $1.3888888888888888889e-3
DATA expconst<>+0x0e0(SB)/8, $1.9841269841269841270e-4
DATA expconst<>+0x0e8(SB)/8, $1.9841269841269841270e-4
DATA expconst<>+0x0f0(SB)/8, $1.9841269841269841270e-4
DATA expconst<>+0x0f8(SB)/8, $1.9841269841269841270e-4
DATA expconst<>+0x100(SB)/8, $2.4801587301587301587e-5
DATA expconst<>+0x108(SB)/8, $2.4801587301587301587e-5
DATA expconst<>+0x110(SB)/8, $2.4801587301587301587e-5
DATA expconst<>+0x118(SB)/8, $2.4801587301587301587e-5
DATA expconst<>+0x120(SB)/8, $1.4426950408889634073599246810018920
DATA expconst<>+0x128(SB)/8, $1.4426950408889634073599246810018920
DATA expconst<>+0x130(SB)/8, $1.4426950408889634073599246810018920
DATA expconst<>+0x138(SB)/8, $1.4426950408889634073599246810018920
DATA expconst<>+0x140(SB)/8, $0.69314718055966295651160180568695068359375
DATA expconst<>+0x148(SB)/8, $0.69314718055966295651160180568695068359375
DATA expconst<>+0x150(SB)/8, $0.69314718055966295651160180568695068359375
DATA expconst<>+0x158(SB)/8, $0.69314718055966295651160180568695068359375
DATA expconst<>+0x160(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expconst<>+0x168(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expconst<>+0x170(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expconst<>+0x178(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expconst<>+0x180(SB)/8, $0.0625
DATA expconst<>+0x188(SB)/8, $0.0625
DATA expconst<>+0x190(SB)/8, $0.0625
DATA expconst<>+0x198(SB)/8, $0.0625
DATA expconst<>+0x1a0(SB)/8, $700.0
DATA expconst<>+0x1a8(SB)/8, $700.0
DATA expconst<>+0x1b0(SB)/8, $700.0
DATA expconst<>+0x1b8(SB)/8, $700.0
DATA expconst<>+0x1c0(SB)/8, $0x7fffffffffffffff
DATA expconst<>+0x1c8(SB)/8, $0x7fffffffffffffff
DATA expconst<>+0x1d0(SB)/8, $0x7fffffffffffffff
DATA expconst<>+0x1d8(SB)/8, $0x7fffffffffffffff
DATA expconst<>+0x1e0(SB)/8, $0x8000000000000000
DATA expconst<>+0x1e8(SB)/8, $0x8000000000000000
DATA expconst<>+0x1f0(SB)/8, $0x8000000000000000
DATA expconst<>+0x1f8(SB)/8, $0x8000000000000000
DATA expconst<>+0x200(SB)/8, $1023
DATA expconst<>+0x208(SB)/8, $1023
DATA expconst<>+0x210(SB)/8, $1023
DATA expconst<>+0x218(SB)/8, $1023
GLOBL expconst<>(SB), RODATA, $0x220

#define HALF 0x000
#define ONE 0x020
#define TWO 0x040
#define C6 0x060
#define C24 0x080
#define C120 0x0a0
#define C720 0x0c0
#define C5040 0x0e0
#define C40320 0x100
#define LOG2E 0x120
#define LN2U 0x140
#define LN2L 0x160
#define SIXTEENTH 0x180
#define LIMIT 0x1a0
#define ABS 0x1c0
#define SIGN 0x1e0
#define BIAS 0x200

// EXP4 computes Y3 = exp(Y3) on 4 lanes within [-700, 700], as math/exp_amd64.s's FMA path does;
// clobbers Y4-Y7, uses R8 as the constants' base.
#define EXP4 \
	VMULPD LOG2E(R8), Y3, Y4 \
	VCVTPD2DQY Y4, X5 \
	VCVTDQ2PD X5, Y4 \
	VFNMADD231PD LN2U(R8), Y4, Y3 \
	VFNMADD231PD LN2L(R8), Y4, Y3 \
	VMULPD SIXTEENTH(R8), Y3, Y3 \
	VMOVUPD C40320(R8), Y6 \
	VFMADD213PD C5040(R8), Y3, Y6 \
	VFMADD213PD C720(R8), Y3, Y6 \
	VFMADD213PD C120(R8), Y3, Y6 \
	VFMADD213PD C24(R8), Y3, Y6 \
	VFMADD213PD C6(R8), Y3, Y6 \
	VFMADD213PD HALF(R8), Y3, Y6 \
	VFMADD213PD ONE(R8), Y3, Y6 \
	VMULPD Y6, Y3, Y3 \
	VADDPD TWO(R8), Y3, Y6 \
	VMULPD Y6, Y3, Y3 \
	VADDPD TWO(R8), Y3, Y6 \
	VMULPD Y6, Y3, Y3 \
	VADDPD TWO(R8), Y3, Y6 \
	VMULPD Y6, Y3, Y3 \
	VADDPD TWO(R8), Y3, Y6 \
	VFMADD213PD ONE(R8), Y6, Y3 \
	VPMOVSXDQ X5, Y7 \
	VPADDQ BIAS(R8), Y7, Y7 \
	VPSLLQ $52, Y7, Y7 \
	VMULPD Y7, Y3, Y3

// SPECIAL4 sets AX to the mask of the lanes of Y0 outside [-700, 700] or NaN.
#define SPECIAL4 \
	VANDPD ABS(R8), Y0, Y1 \
	VCMPPD $0x16, LIMIT(R8), Y1, Y2 \
	VMOVMSKPD Y2, AX

// LOGISTIC4 computes Y3 = logistic(Y0) from x in Y0: y = x >= 0 ? -x : x, e = exp(y),
// (x >= 0 ? 1 : e) / (1 + e).
#define LOGISTIC4 \
	VXORPD Y1, Y1, Y1 \
	VCMPPD $0x1d, Y1, Y0, Y2 \
	VANDPD SIGN(R8), Y2, Y1 \
	VXORPD Y1, Y0, Y3 \
	EXP4 \
	VADDPD ONE(R8), Y3, Y4 \
	VMOVUPD ONE(R8), Y1 \
	VBLENDVPD Y2, Y1, Y3, Y1 \
	VDIVPD Y4, Y1, Y3

// func expF32(n int, dst, src *float32, logistic bool) int
// Computes groups of 4 values until n/4*4 or a group with a value outside [-700, 700]; returns how
// many values it did.
TEXT ·expF32(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVBLZX logistic+24(FP), R9
	LEAQ expconst<>(SB), R8
	XORQ DX, DX
	SHRQ $2, CX
	JZ f32done
f32loop:
	VCVTPS2PD (SI)(DX*4), Y0
	SPECIAL4
	TESTQ AX, AX
	JNZ f32done
	TESTQ R9, R9
	JNZ f32logistic
	VMOVAPD Y0, Y3
	EXP4
	JMP f32store
f32logistic:
	LOGISTIC4
f32store:
	VCVTPD2PSY Y3, X3
	VMOVUPS X3, (DI)(DX*4)
	ADDQ $4, DX
	DECQ CX
	JNZ f32loop
f32done:
	MOVQ DX, ret+32(FP)
	VZEROUPPER
	RET

// func expF64(n int, dst, src *float64, logistic bool) int
// As expF32 on float64 values.
TEXT ·expF64(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVBLZX logistic+24(FP), R9
	LEAQ expconst<>(SB), R8
	XORQ DX, DX
	SHRQ $2, CX
	JZ f64done
f64loop:
	VMOVUPD (SI)(DX*8), Y0
	SPECIAL4
	TESTQ AX, AX
	JNZ f64done
	TESTQ R9, R9
	JNZ f64logistic
	VMOVAPD Y0, Y3
	EXP4
	JMP f64store
f64logistic:
	LOGISTIC4
f64store:
	VMOVUPD Y3, (DI)(DX*8)
	ADDQ $4, DX
	DECQ CX
	JNZ f64loop
f64done:
	MOVQ DX, ret+32(FP)
	VZEROUPPER
	RET
