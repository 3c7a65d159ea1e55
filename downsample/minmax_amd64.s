//go:build amd64 && !purego

#include "textflag.h"

// BLOCK folds the 16 values at SI+BX*8 into the lanes: Y0, Y1 hold each
// lane's (index mod 4) min and max, Y2, Y3 the start of the first block
// that reached them, Y4 the start of this block in every lane, Y5 the
// lanes that met a NaN. The lanes are updated without a branch.
#define BLOCK \
	VMOVUPD   (SI)(BX*8), Y7       \
	VMOVUPD   32(SI)(BX*8), Y8     \
	VMOVUPD   64(SI)(BX*8), Y9     \
	VMOVUPD   96(SI)(BX*8), Y10    \
	VCMPPD    $3, Y8, Y7, Y11      \ // unordered: either is NaN
	VCMPPD    $3, Y10, Y9, Y12     \
	VORPD     Y11, Y5, Y5          \
	VORPD     Y12, Y5, Y5          \
	VMINPD    Y8, Y7, Y11          \
	VMINPD    Y10, Y9, Y12         \
	VMINPD    Y12, Y11, Y11        \ // the block's minima
	VMAXPD    Y8, Y7, Y12          \
	VMAXPD    Y10, Y9, Y13         \
	VMAXPD    Y13, Y12, Y12        \ // the block's maxima
	VCMPPD    $1, Y0, Y11, Y13     \ // block minimum < lane minimum
	VCMPPD    $14, Y1, Y12, Y14    \ // block maximum > lane maximum
	VMINPD    Y0, Y11, Y0          \
	VMAXPD    Y1, Y12, Y1          \
	VBLENDVPD Y13, Y4, Y2, Y2      \
	VBLENDVPD Y14, Y4, Y3, Y3

// FIRST sets Y7 to the extreme in every lane of ext (extX is its low half) (found by op,
// VMINPD or VMAXPD), then dst to the index of its first occurrence: the
// smallest block start among the lanes holding it, plus the position of
// the first equal value in that block's 16.
#define FIRST(op, extX, ext, blk, dst) \
	VEXTRACTF128 $1, ext, X7      \
	op           X7, extX, X7     \
	VPERMILPD    $1, X7, X8       \
	op           X8, X7, X7       \
	VBROADCASTSD X7, Y7           \
	VCMPPD       $0, Y7, ext, Y8  \ // lanes at the extreme
	VBLENDVPD    Y8, blk, Y15, Y10 \ // their block starts, MaxInt64 elsewhere
	VEXTRACTI128 $1, Y10, X11     \
	VPCMPGTQ     X11, X10, X12    \
	VBLENDVPD    X12, X11, X10, X10 \
	VPSHUFD      $0x4e, X10, X11  \
	VPCMPGTQ     X11, X10, X12    \
	VBLENDVPD    X12, X11, X10, X10 \
	VMOVQ        X10, R8          \
	VCMPPD       $0, (SI)(R8*8), Y7, Y12   \
	VMOVMSKPD    Y12, AX          \
	VCMPPD       $0, 32(SI)(R8*8), Y7, Y12 \
	VMOVMSKPD    Y12, R9          \
	SHLQ         $4, R9           \
	ORQ          R9, AX           \
	VCMPPD       $0, 64(SI)(R8*8), Y7, Y12 \
	VMOVMSKPD    Y12, R9          \
	SHLQ         $8, R9           \
	ORQ          R9, AX           \
	VCMPPD       $0, 96(SI)(R8*8), Y7, Y12 \
	VMOVMSKPD    Y12, R9          \
	SHLQ         $12, R9          \
	ORQ          R9, AX           \
	BSFQ         AX, AX           \
	ADDQ         R8, AX           \
	MOVQ         AX, dst

// func minMaxIdxAVX2(vs []float64) (iMin, iMax int, nan bool)
//
// Needs len(vs) >= 16. Whole blocks of 16 are scanned in order; a shorter
// tail is scanned as the block of the last 16 values, which overlaps the
// one before: a value seen twice never counts as a new extreme, so the
// first occurrences stand. If nan is true, iMin and iMax mean nothing.
TEXT ·minMaxIdxAVX2(SB), NOSPLIT, $0-41
	MOVQ    vs_base+0(FP), SI
	MOVQ    vs_len+8(FP), DX
	MOVQ    DX, CX
	ANDQ    $-16, CX
	MOVQ    $16, AX
	VMOVQ   AX, X6
	VPBROADCASTQ X6, Y6
	VMOVUPD (SI), Y0
	VMOVAPD Y0, Y1
	VPXOR   Y2, Y2, Y2
	VPXOR   Y3, Y3, Y3
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	XORQ    BX, BX

loop:
	BLOCK
	ADDQ    $16, BX
	VPADDQ  Y6, Y4, Y4
	CMPQ    BX, CX
	JB      loop
	CMPQ    BX, DX
	JEQ     reduce
	LEAQ    -16(DX), BX
	VMOVQ   BX, X4
	VPBROADCASTQ X4, Y4
	BLOCK

reduce:
	VPTEST  Y5, Y5
	SETNE   nan+40(FP)
	VPCMPEQQ Y15, Y15, Y15
	VPSRLQ  $1, Y15, Y15
	FIRST(VMINPD, X0, Y0, Y2, iMin+24(FP))
	FIRST(VMAXPD, X1, Y1, Y3, iMax+32(FP))
	VZEROUPPER
	RET
