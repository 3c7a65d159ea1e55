//go:build amd64 && !purego

#include "textflag.h"

// AREA folds the 8 samples at SI/DI+BX*8 (off bytes on) into one
// accumulator: each lane keeps its largest |dx*(v-ay) + float64(t-ta)*dy|,
// strictly larger only (so the first on a tie), in best, and that sample's
// index in idx; cur holds the samples' indices and steps by step. mask
// selects the lanes in play (K0 would be all of them, but K0 cannot mask,
// so the full blocks pass K7, set to all ones).
#define AREA(off, mask, best, idx, cur, step) \
	VMOVDQU64.Z off(SI)(BX*8), mask, Z14 \
	VPSUBQ      Z20, Z14, Z14            \
	VCVTQQ2PD   Z14, Z14                 \
	VMULPD      Z23, Z14, Z14            \
	VMOVUPD.Z   off(DI)(BX*8), mask, Z15 \
	VSUBPD      Z21, Z15, Z15            \
	VMULPD      Z22, Z15, Z15            \
	VADDPD      Z14, Z15, Z15            \
	VANDPD      Z24, Z15, Z15            \
	VCMPPD      $0x1e, best, Z15, mask, K1 \
	VMOVAPD     Z15, K1, best            \
	VMOVDQA64   cur, K1, idx             \
	VPADDQ      step, cur, cur

// MERGE folds accumulator (b2, i2) into (b1, i1): a lane takes b2 if it is
// larger, or equal with a smaller index.
#define MERGE(b1, i1, b2, i2) \
	VCMPPD    $0x1e, b1, b2, K1 \
	VCMPPD    $0x00, b1, b2, K2 \
	VPCMPQ    $1, i1, i2, K3    \
	KANDB     K3, K2, K2        \
	KORB      K2, K1, K1        \
	VMOVAPD   b2, K1, b1        \
	VMOVDQA64 i2, K1, i1

// func pickAreasAVX512(ct []int64, cv []float64, ta int64, ay, dx, dy float64) (pick int, best float64)
//
// Returns the index of the first sample with the largest area
// |dx*(v-ay) + float64(t-ta)*dy| and that area, or -1 and -1 if no area
// compares (all NaN) or ct is empty. Four accumulators of eight lanes take
// blocks of 32, one takes the blocks of 8 left, and a masked block the last
// few. Z0-Z3: areas; Z4-Z7: their indices; Z8-Z11: the indices in hand;
// Z12: 32 in every lane; Z13: 8; Z20-Z24: ta, ay, dx, dy and the
// sign-clearing mask.
TEXT ·pickAreasAVX512(SB), NOSPLIT, $0-96
	MOVQ ct_base+0(FP), SI
	MOVQ ct_len+8(FP), DX
	MOVQ cv_base+24(FP), DI
	VPBROADCASTQ ta+48(FP), Z20
	VBROADCASTSD ay+56(FP), Z21
	VBROADCASTSD dx+64(FP), Z22
	VBROADCASTSD dy+72(FP), Z23
	MOVQ $0x7fffffffffffffff, AX
	VPBROADCASTQ AX, Z24
	MOVQ $0xbff0000000000000, AX // -1.0
	VPBROADCASTQ AX, Z0
	VMOVAPD Z0, Z1
	VMOVAPD Z0, Z2
	VMOVAPD Z0, Z3
	MOVQ $-1, AX
	VPBROADCASTQ AX, Z4
	VMOVDQA64 Z4, Z5
	VMOVDQA64 Z4, Z6
	VMOVDQA64 Z4, Z7
	VMOVDQU64 lanes<>+0(SB), Z8
	MOVQ $8, AX
	VPBROADCASTQ AX, Z13
	VPADDQ Z13, Z8, Z9
	VPADDQ Z13, Z9, Z10
	VPADDQ Z13, Z10, Z11
	MOVQ $32, AX
	VPBROADCASTQ AX, Z12
	KXNORB K7, K7, K7
	XORQ BX, BX
	MOVQ DX, CX
	ANDQ $-32, CX

blocks32:
	CMPQ BX, CX
	JAE  blocks8
	AREA(0, K7, Z0, Z4, Z8, Z12)
	AREA(64, K7, Z1, Z5, Z9, Z12)
	AREA(128, K7, Z2, Z6, Z10, Z12)
	AREA(192, K7, Z3, Z7, Z11, Z12)
	ADDQ $32, BX
	JMP  blocks32

blocks8:
	MOVQ DX, CX
	ANDQ $-8, CX

loop8:
	CMPQ BX, CX
	JAE  tail
	AREA(0, K7, Z0, Z4, Z8, Z13)
	ADDQ $8, BX
	JMP  loop8

tail:
	MOVQ DX, CX
	SUBQ BX, CX
	JEQ  reduce
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVB AX, K6
	AREA(0, K6, Z0, Z4, Z8, Z13)

reduce:
	MERGE(Z0, Z4, Z1, Z5)
	MERGE(Z2, Z6, Z3, Z7)
	MERGE(Z0, Z4, Z2, Z6)
	VSHUFF64X2 $0x4e, Z0, Z0, Z1 // swap the 256-bit halves
	VSHUFI64X2 $0x4e, Z4, Z4, Z5
	MERGE(Z0, Z4, Z1, Z5)
	VSHUFF64X2 $0xb1, Z0, Z0, Z1 // swap the 128-bit lanes in each half
	VSHUFI64X2 $0xb1, Z4, Z4, Z5
	MERGE(Z0, Z4, Z1, Z5)
	VPERMILPD  $0x55, Z0, Z1     // swap the two values in each 128 bits
	VPSHUFD    $0x4e, Z4, Z5
	MERGE(Z0, Z4, Z1, Z5)
	VMOVQ      X4, pick+80(FP)
	VMOVSD     X0, best+88(FP)
	VZEROUPPER
	RET

DATA lanes<>+0(SB)/8, $0
DATA lanes<>+8(SB)/8, $1
DATA lanes<>+16(SB)/8, $2
DATA lanes<>+24(SB)/8, $3
DATA lanes<>+32(SB)/8, $4
DATA lanes<>+40(SB)/8, $5
DATA lanes<>+48(SB)/8, $6
DATA lanes<>+56(SB)/8, $7
GLOBL lanes<>(SB), RODATA|NOPTR, $64
