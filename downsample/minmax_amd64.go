//go:build amd64 && !purego

package downsample

import "golang.org/x/sys/cpu"

// vecBlock is the block size of the vector kernel: four vectors of four.
const vecBlock = 16

// useAVX2 says whether minMaxIdx runs the vector kernel. Tests turn it off
// to check the portable kernel on the same inputs.
var useAVX2 = cpu.X86.HasAVX2

// minMaxLanes is the vector kernel's result: per lane (index mod 4), the
// minimum and maximum it saw and the start of the first block in which it
// reached them.
type minMaxLanes struct {
	lo, hi       [4]float64
	loBlk, hiBlk [4]int64
}

// minMaxLanesAVX2 scans vs in blocks of vecBlock values (a shorter tail is
// left alone; len(vs) >= vecBlock) and fills st. It reports whether the
// blocks held a NaN, which VMINPD and VMAXPD would let in or drop
// depending on operand order. Implemented in minmax_amd64.s.
//
//go:noescape
func minMaxLanesAVX2(vs []float64, st *minMaxLanes) (nan bool)

// minMaxIdxVec is minMaxIdx's vector kernel. ran is false if it cannot
// run (no AVX2, fewer than vecBlock values); iMin and iMax are -1 if vs
// holds a NaN. ±Inf compare normally and minMaxIdx catches them.
func minMaxIdxVec(vs []float64) (iMin, iMax int, ran bool) {
	if !useAVX2 || len(vs) < vecBlock {
		return -1, -1, false
	}
	var st minMaxLanes
	if minMaxLanesAVX2(vs, &st) {
		return -1, -1, true
	}
	minV, minB, maxV, maxB := st.lo[0], st.loBlk[0], st.hi[0], st.hiBlk[0]
	for k := 1; k < 4; k++ {
		if v, b := st.lo[k], st.loBlk[k]; v < minV || v == minV && b < minB {
			minV, minB = v, b
		}
		if v, b := st.hi[k], st.hiBlk[k]; v > maxV || v == maxV && b < maxB {
			maxV, maxB = v, b
		}
	}
	// Every occurrence of minV lies in a lane that reached it, at or after
	// that lane's block, so the first one is at or after minB.
	for iMin = int(minB); vs[iMin] != minV; iMin++ {
	}
	for iMax = int(maxB); vs[iMax] != maxV; iMax++ {
	}
	for j := len(vs) &^ (vecBlock - 1); j < len(vs); j++ { // a NaN here never compares
		if v := vs[j]; v < minV {
			minV, iMin = v, j
		} else if v > maxV {
			maxV, iMax = v, j
		}
	}
	return iMin, iMax, true
}
