// Macros shared by the GEMM kernels' assembly (gemm_amd64.s, gemm_wide_amd64.s, gemm_f64_amd64.s).

// With store set (the first K block of an output that holds nothing yet) a kernel writes its tile without
// reading c: each vector is +0 plus its sum (a zeroed register added), the bits that clearing c and
// adding gave, a sum that underflowed to -0 included. The STORE macros write one row of the tile, row
// r's offset at off(R8), c at DX.
#define STOREY2(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS Y12, r0, r0; \
	VADDPS Y12, r1, r1; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 32(R9)
#define STOREZ2(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS Z28, r0, r0; \
	VADDPS Z28, r1, r1; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 64(R9)
#define STOREZ4(off, r0, r1, r2, r3) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS Z28, r0, r0; \
	VADDPS Z28, r1, r1; \
	VADDPS Z28, r2, r2; \
	VADDPS Z28, r3, r3; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 64(R9); \
	VMOVUPS r2, 128(R9); \
	VMOVUPS r3, 192(R9)
#define STOREY2D(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*8), R9; \
	VADDPD Y12, r0, r0; \
	VADDPD Y12, r1, r1; \
	VMOVUPD r0, (R9); \
	VMOVUPD r1, 32(R9)
#define STOREZ2D(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*8), R9; \
	VADDPD Z28, r0, r0; \
	VADDPD Z28, r1, r1; \
	VMOVUPD r0, (R9); \
	VMOVUPD r1, 64(R9)

// Without store (a later K block, or an output added into) a kernel adds its tile into c: the ADD
// macros do one row, as the STORE macros above.
#define ADDY2(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS (R9), r0, r0; \
	VADDPS 32(R9), r1, r1; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 32(R9)
#define ADDZ2(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS (R9), r0, r0; \
	VADDPS 64(R9), r1, r1; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 64(R9)
#define ADDZ4(off, r0, r1, r2, r3) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*4), R9; \
	VADDPS (R9), r0, r0; \
	VADDPS 64(R9), r1, r1; \
	VADDPS 128(R9), r2, r2; \
	VADDPS 192(R9), r3, r3; \
	VMOVUPS r0, (R9); \
	VMOVUPS r1, 64(R9); \
	VMOVUPS r2, 128(R9); \
	VMOVUPS r3, 192(R9)
#define ADDY2D(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*8), R9; \
	VADDPD (R9), r0, r0; \
	VADDPD 32(R9), r1, r1; \
	VMOVUPD r0, (R9); \
	VMOVUPD r1, 32(R9)
#define ADDZ2D(off, r0, r1) \
	MOVQ off(R8), R9; \
	LEAQ (DX)(R9*8), R9; \
	VADDPD (R9), r0, r0; \
	VADDPD 64(R9), r1, r1; \
	VMOVUPD r0, (R9); \
	VMOVUPD r1, 64(R9)

// A whole tile's store: the zeroed register, then each row (the 14×32, 7×32 and 7×64 AVX-512 tiles, the
// 6×16 AVX2 one).
#define STORETILE14x32 \
	VPXORD Z28, Z28, Z28; \
	STOREZ2(0, Z0, Z1); \
	STOREZ2(8, Z2, Z3); \
	STOREZ2(16, Z4, Z5); \
	STOREZ2(24, Z6, Z7); \
	STOREZ2(32, Z8, Z9); \
	STOREZ2(40, Z10, Z11); \
	STOREZ2(48, Z12, Z13); \
	STOREZ2(56, Z14, Z15); \
	STOREZ2(64, Z16, Z17); \
	STOREZ2(72, Z18, Z19); \
	STOREZ2(80, Z20, Z21); \
	STOREZ2(88, Z22, Z23); \
	STOREZ2(96, Z24, Z25); \
	STOREZ2(104, Z26, Z27)
#define STORETILE7x32 \
	VPXORD Z28, Z28, Z28; \
	STOREZ2(0, Z0, Z1); \
	STOREZ2(8, Z2, Z3); \
	STOREZ2(16, Z4, Z5); \
	STOREZ2(24, Z6, Z7); \
	STOREZ2(32, Z8, Z9); \
	STOREZ2(40, Z10, Z11); \
	STOREZ2(48, Z12, Z13)
#define STORETILE7x64 \
	VPXORD Z28, Z28, Z28; \
	STOREZ4(0, Z0, Z1, Z2, Z3); \
	STOREZ4(8, Z4, Z5, Z6, Z7); \
	STOREZ4(16, Z8, Z9, Z10, Z11); \
	STOREZ4(24, Z12, Z13, Z14, Z15); \
	STOREZ4(32, Z16, Z17, Z18, Z19); \
	STOREZ4(40, Z20, Z21, Z22, Z23); \
	STOREZ4(48, Z24, Z25, Z26, Z27)
#define STORETILE6x16 \
	VXORPS Y12, Y12, Y12; \
	STOREY2(0, Y0, Y1); \
	STOREY2(8, Y2, Y3); \
	STOREY2(16, Y4, Y5); \
	STOREY2(24, Y6, Y7); \
	STOREY2(32, Y8, Y9); \
	STOREY2(40, Y10, Y11)

// A whole tile's addition into c, row by row (the tiles as STORETILE's).
#define ADDTILE14x32 \
	ADDZ2(0, Z0, Z1); \
	ADDZ2(8, Z2, Z3); \
	ADDZ2(16, Z4, Z5); \
	ADDZ2(24, Z6, Z7); \
	ADDZ2(32, Z8, Z9); \
	ADDZ2(40, Z10, Z11); \
	ADDZ2(48, Z12, Z13); \
	ADDZ2(56, Z14, Z15); \
	ADDZ2(64, Z16, Z17); \
	ADDZ2(72, Z18, Z19); \
	ADDZ2(80, Z20, Z21); \
	ADDZ2(88, Z22, Z23); \
	ADDZ2(96, Z24, Z25); \
	ADDZ2(104, Z26, Z27)
#define ADDTILE7x64 \
	ADDZ4(0, Z0, Z1, Z2, Z3); \
	ADDZ4(8, Z4, Z5, Z6, Z7); \
	ADDZ4(16, Z8, Z9, Z10, Z11); \
	ADDZ4(24, Z12, Z13, Z14, Z15); \
	ADDZ4(32, Z16, Z17, Z18, Z19); \
	ADDZ4(40, Z20, Z21, Z22, Z23); \
	ADDZ4(48, Z24, Z25, Z26, Z27)
#define ADDTILE7x32 \
	ADDZ2(0, Z0, Z1); \
	ADDZ2(8, Z2, Z3); \
	ADDZ2(16, Z4, Z5); \
	ADDZ2(24, Z6, Z7); \
	ADDZ2(32, Z8, Z9); \
	ADDZ2(40, Z10, Z11); \
	ADDZ2(48, Z12, Z13)
#define ADDTILE6x16 \
	ADDY2(0, Y0, Y1); \
	ADDY2(8, Y2, Y3); \
	ADDY2(16, Y4, Y5); \
	ADDY2(24, Y6, Y7); \
	ADDY2(32, Y8, Y9); \
	ADDY2(40, Y10, Y11)

// A store first fetches the tile's lines of c (PREFETCHROW: row r's offset at off(R8), c at DX), so
// that they arrive during the FMA loop: c is not read, but the stores still need its lines, and an
// output written for the first time is not in the cache (clearing it first used to bring it there).
// PREFETCHROWSn_w fetches w lines of each of a tile's n rows.
#define PREFETCHROW1(off) \
	MOVQ off(R8), R9; \
	PREFETCHT0 (DX)(R9*4)
#define PREFETCHROW2(off) \
	MOVQ off(R8), R9; \
	PREFETCHT0 (DX)(R9*4); \
	PREFETCHT0 64(DX)(R9*4)
#define PREFETCHROW4(off) \
	MOVQ off(R8), R9; \
	PREFETCHT0 (DX)(R9*4); \
	PREFETCHT0 64(DX)(R9*4); \
	PREFETCHT0 128(DX)(R9*4); \
	PREFETCHT0 192(DX)(R9*4)
#define PREFETCHROWS6_1 \
	PREFETCHROW1(0); PREFETCHROW1(8); PREFETCHROW1(16); PREFETCHROW1(24); PREFETCHROW1(32); PREFETCHROW1(40)
#define PREFETCHROWS7_2 \
	PREFETCHROW2(0); PREFETCHROW2(8); PREFETCHROW2(16); PREFETCHROW2(24); PREFETCHROW2(32); PREFETCHROW2(40); \
	PREFETCHROW2(48)
#define PREFETCHROWS14_2 \
	PREFETCHROWS7_2; \
	PREFETCHROW2(56); PREFETCHROW2(64); PREFETCHROW2(72); PREFETCHROW2(80); PREFETCHROW2(88); PREFETCHROW2(96); \
	PREFETCHROW2(104)
#define PREFETCHROWS7_4 \
	PREFETCHROW4(0); PREFETCHROW4(8); PREFETCHROW4(16); PREFETCHROW4(24); PREFETCHROW4(32); PREFETCHROW4(40); \
	PREFETCHROW4(48)

// A tile's accumulators cleared (ZERO: Z0-Z27, Z0-Z13, Y0-Y11), and a direct kernel's first 7 rows of A
// addressed (ROWADDRS7: data at AX, their offsets at BX, into R8-R14).
#define ZEROZ28 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27
#define ZEROZ14 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13
#define ZEROY12 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11
#define ROWADDRS7 \
	MOVQ 0(BX), R8; \
	LEAQ (AX)(R8*4), R8; \
	MOVQ 8(BX), R9; \
	LEAQ (AX)(R9*4), R9; \
	MOVQ 16(BX), R10; \
	LEAQ (AX)(R10*4), R10; \
	MOVQ 24(BX), R11; \
	LEAQ (AX)(R11*4), R11; \
	MOVQ 32(BX), R12; \
	LEAQ (AX)(R12*4), R12; \
	MOVQ 40(BX), R13; \
	LEAQ (AX)(R13*4), R13; \
	MOVQ 48(BX), R14; \
	LEAQ (AX)(R14*4), R14
