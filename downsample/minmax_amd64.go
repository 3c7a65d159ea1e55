//go:build amd64 && !purego

package downsample

import "golang.org/x/sys/cpu"

// vecBlock is the block size of the vector kernel: four vectors of four.
const vecBlock = 16

// useAVX2 says whether minMaxIdx runs the vector kernel. Tests turn it off
// to check the portable kernel on the same inputs.
var useAVX2 = cpu.X86.HasAVX2

// minMaxIdxAVX2 returns the indices of the first minimum and the first
// maximum of vs, which must hold at least vecBlock values, or reports that
// it holds a NaN (VMINPD and VMAXPD would let a NaN in or drop it
// depending on operand order). ±Inf compare normally. Implemented in
// minmax_amd64.s.
//
//go:noescape
func minMaxIdxAVX2(vs []float64) (iMin, iMax int, nan bool)

// minMaxIdxVec is minMaxIdx's vector kernel. ran is false if it cannot
// run (no AVX2, fewer than vecBlock values); iMin and iMax are -1 if vs
// holds a NaN.
func minMaxIdxVec(vs []float64) (iMin, iMax int, ran bool) {
	if !useAVX2 || len(vs) < vecBlock {
		return -1, -1, false
	}
	iMin, iMax, nan := minMaxIdxAVX2(vs)
	if nan {
		return -1, -1, true
	}
	return iMin, iMax, true
}
