//go:build goexperiment.simd

package downsample

import "simd/archsimd"

// vecBlock is the block size of minMaxIdxVec: four vectors of four.
const vecBlock = 16

var haveAVX2 = archsimd.X86.AVX2()

// minMaxIdxVec is minMaxIdx's vector kernel: per lane, the running min and
// max and the first block that reached them. ok is false if it cannot run
// (no AVX2, fewer than vecBlock values) or vs holds a NaN, which VMINPD
// would let replace a lane's minimum; ±Inf compare normally and minMaxIdx
// catches them. iMin, iMax are valid when ok.
func minMaxIdxVec(vs []float64) (iMin, iMax int, ok bool) {
	if !haveAVX2 || len(vs) < vecBlock {
		return -1, -1, false
	}
	lo := archsimd.LoadFloat64x4Slice(vs)
	hi := lo
	var loBlk, hiBlk archsimd.Int64x4 // block 0 holds the initial lanes
	var nan archsimd.Mask64x4
	i := 0
	for ; i+vecBlock <= len(vs); i += vecBlock {
		b := vs[i : i+vecBlock : i+vecBlock]
		y0 := archsimd.LoadFloat64x4Slice(b[0:4])
		y1 := archsimd.LoadFloat64x4Slice(b[4:8])
		y2 := archsimd.LoadFloat64x4Slice(b[8:12])
		y3 := archsimd.LoadFloat64x4Slice(b[12:16])
		nan = nan.Or(y0.NotEqual(y0)).Or(y1.NotEqual(y1)).Or(y2.NotEqual(y2)).Or(y3.NotEqual(y3))
		bl := y0.Min(y1).Min(y2.Min(y3))
		bh := y0.Max(y1).Max(y2.Max(y3))
		ml, mh := bl.Less(lo), bh.Greater(hi)
		if ml.Or(mh).ToBits() != 0 { // rare after a bin's first blocks
			at := archsimd.BroadcastInt64x4(int64(i))
			lo, hi = lo.Min(bl), hi.Max(bh)
			loBlk, hiBlk = at.Merge(loBlk, ml), at.Merge(hiBlk, mh)
		}
	}
	if nan.ToBits() != 0 {
		archsimd.ClearAVXUpperBits()
		return -1, -1, false
	}
	var loV, hiV [4]float64
	var loB, hiB [4]int64
	lo.Store(&loV)
	hi.Store(&hiV)
	loBlk.Store(&loB)
	hiBlk.Store(&hiB)
	// Leave no dirty upper halves for the SSE code that follows.
	archsimd.ClearAVXUpperBits()
	minV, minB, maxV, maxB := loV[0], loB[0], hiV[0], hiB[0]
	for k := 1; k < 4; k++ {
		if loV[k] < minV || loV[k] == minV && loB[k] < minB {
			minV, minB = loV[k], loB[k]
		}
		if hiV[k] > maxV || hiV[k] == maxV && hiB[k] < maxB {
			maxV, maxB = hiV[k], hiB[k]
		}
	}
	for iMin = int(minB); vs[iMin] != minV; iMin++ {
	}
	for iMax = int(maxB); vs[iMax] != maxV; iMax++ {
	}
	for j := i; j < len(vs); j++ { // the tail; a NaN here never compares
		if v := vs[j]; v < minV {
			minV, iMin = v, j
		} else if v > maxV {
			maxV, iMax = v, j
		}
	}
	return iMin, iMax, true
}
