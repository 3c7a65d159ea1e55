//go:build amd64 && !purego

#include "textflag.h"

// func pickAreasAVX512(ct []int64, cv []float64, ta int64, ay, dx, dy float64, out *pickLanes)
//
// For the first len(ct)&^31 samples, four accumulators of eight lanes keep
// each lane's largest |dx*(v-ay) + float64(t-ta)*dy| (strictly larger
// only, so the first on a tie) and its index. Z0-Z3: the areas; Z4-Z7:
// their indices; Z8-Z11: the indices of the samples in hand; Z12: 32 in
// every lane; Z20-Z24: ta, ay, dx, dy and the sign-clearing mask.
TEXT ·pickAreasAVX512(SB), NOSPLIT, $0-88
	MOVQ ct_base+0(FP), SI
	MOVQ ct_len+8(FP), CX
	MOVQ cv_base+24(FP), DI
	MOVQ out+80(FP), R8
	ANDQ $-32, CX
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
	XORQ BX, BX

loop:
	CMPQ BX, CX
	JAE  done

#define AREA(off, best, idx, cur) \
	VMOVDQU64 off(SI)(BX*8), Z14 \
	VPSUBQ    Z20, Z14, Z14      \
	VCVTQQ2PD Z14, Z14           \
	VMULPD    Z23, Z14, Z14      \
	VMOVUPD   off(DI)(BX*8), Z15 \
	VSUBPD    Z21, Z15, Z15      \
	VMULPD    Z22, Z15, Z15      \
	VADDPD    Z14, Z15, Z15      \
	VANDPD    Z24, Z15, Z15      \
	VCMPPD    $0x1e, best, Z15, K1 \
	VMOVAPD   Z15, K1, best      \
	VMOVDQA64 cur, K1, idx       \
	VPADDQ    Z12, cur, cur

	AREA(0, Z0, Z4, Z8)
	AREA(64, Z1, Z5, Z9)
	AREA(128, Z2, Z6, Z10)
	AREA(192, Z3, Z7, Z11)
	ADDQ $32, BX
	JMP  loop

done:
	VMOVUPD   Z0, 0(R8)
	VMOVUPD   Z1, 64(R8)
	VMOVUPD   Z2, 128(R8)
	VMOVUPD   Z3, 192(R8)
	VMOVDQU64 Z4, 256(R8)
	VMOVDQU64 Z5, 320(R8)
	VMOVDQU64 Z6, 384(R8)
	VMOVDQU64 Z7, 448(R8)
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
