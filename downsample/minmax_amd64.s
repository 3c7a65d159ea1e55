//go:build amd64 && !purego

#include "textflag.h"

// func minMaxLanesAVX2(vs []float64, st *minMaxLanes) (nan bool)
//
// Y0, Y1: per-lane min and max; Y2, Y3: the block starts where they were
// reached; Y4: the current block start in every lane; Y5: NaN lanes;
// Y6: the block size in every lane. Each block of 16 values is reduced to
// a vector of 4 minima and 4 maxima, which then update the lanes without
// a branch.
TEXT ·minMaxLanesAVX2(SB), NOSPLIT, $0-33
	MOVQ vs_base+0(FP), SI
	MOVQ vs_len+8(FP), CX
	MOVQ st+24(FP), DI
	ANDQ $-16, CX
	VMOVUPD (SI), Y0
	VMOVAPD Y0, Y1
	VPXOR   Y2, Y2, Y2
	VPXOR   Y3, Y3, Y3
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	MOVQ    $16, AX
	MOVQ    AX, X6
	VPBROADCASTQ X6, Y6
	XORQ    BX, BX

loop:
	CMPQ    BX, CX
	JAE     done
	VMOVUPD (SI)(BX*8), Y7
	VMOVUPD 32(SI)(BX*8), Y8
	VMOVUPD 64(SI)(BX*8), Y9
	VMOVUPD 96(SI)(BX*8), Y10
	VCMPPD  $3, Y8, Y7, Y11  // unordered: either is NaN
	VCMPPD  $3, Y10, Y9, Y12
	VORPD   Y11, Y5, Y5
	VORPD   Y12, Y5, Y5
	VMINPD  Y8, Y7, Y11
	VMINPD  Y10, Y9, Y12
	VMINPD  Y12, Y11, Y11    // the block's minima
	VMAXPD  Y8, Y7, Y12
	VMAXPD  Y10, Y9, Y13
	VMAXPD  Y13, Y12, Y12    // the block's maxima
	VCMPPD  $1, Y0, Y11, Y13 // block minimum < lane minimum
	VCMPPD  $14, Y1, Y12, Y14 // block maximum > lane maximum
	VMINPD  Y0, Y11, Y0
	VMAXPD  Y1, Y12, Y1
	VBLENDVPD Y13, Y4, Y2, Y2
	VBLENDVPD Y14, Y4, Y3, Y3
	VPADDQ  Y6, Y4, Y4
	ADDQ    $16, BX
	JMP     loop

done:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	VPTEST  Y5, Y5
	SETNE   nan+32(FP)
	VZEROUPPER
	RET
