package downsample

import (
	"math"
	"slices"
)

// MinMax appends to dst the indices of at most n samples of ts/vs and
// returns the extended dst: the first and last finite samples, and the
// minimum and the maximum (first occurrence, finite values only) of each of
// (n-2)/2 buckets of equal time width between them, in index order. A
// bucket with one sample, or with its min and max at the same sample,
// yields one index; an empty bucket none.
//
// n < 4 is clamped to the first and last samples (see the package doc).
// Inputs of parallelMinPoints samples or more are scanned by up to
// GOMAXPROCS goroutines; apart from those, MinMax allocates only if dst
// lacks room for n more indices.
func MinMax(dst []int, ts []int64, vs []float64, n int) []int {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	dst, lo, hi, done := clampSmall(dst, vs, n, 4)
	if done {
		return dst
	}
	bins := (n - 2) / 2
	base := len(dst)
	dst = slices.Grow(dst, 2+2*bins)
	dst = append(dst, lo)
	slots := dst[base+1 : base+1+2*bins]
	runBins(slots, ts, vs, lo+1, hi, newTimeBins(ts[lo], ts[hi], bins), kernelMinMax)
	kept := compact(slots, lo)
	dst = dst[:base+1+kept]
	return append(dst, hi)
}

// minMaxIdx returns the indices of the first minimum and the first maximum
// among the finite values of vs, or -1, -1 if it has none.
//
// The hot loop tests eight values at a time against the current min and
// max in one rarely taken branch and walks them one by one only when one
// of them is a new extreme. It does not test for finiteness: NaN never
// compares true, and a ±Inf can only win as the min or the max, which the
// check after the loop catches and hands to the careful loop.
func minMaxIdx(vs []float64) (iMin, iMax int) {
	lo, hi := math.Inf(1), math.Inf(-1)
	iMin, iMax = -1, -1
	i := 0
	for ; i+8 <= len(vs); i += 8 {
		b := vs[i : i+8 : i+8]
		if b[0] < lo || b[1] < lo || b[2] < lo || b[3] < lo ||
			b[4] < lo || b[5] < lo || b[6] < lo || b[7] < lo ||
			b[0] > hi || b[1] > hi || b[2] > hi || b[3] > hi ||
			b[4] > hi || b[5] > hi || b[6] > hi || b[7] > hi {
			for j, v := range b {
				if v < lo {
					lo, iMin = v, i+j
				}
				if v > hi {
					hi, iMax = v, i+j
				}
			}
		}
	}
	for ; i < len(vs); i++ {
		if v := vs[i]; v < lo {
			lo, iMin = v, i
		}
		if v := vs[i]; v > hi {
			hi, iMax = v, i
		}
	}
	if isFinite(lo) && isFinite(hi) {
		return iMin, iMax
	}
	return minMaxIdxFinite(vs)
}

// minMaxIdxFinite is minMaxIdx with a finiteness test per value.
func minMaxIdxFinite(vs []float64) (iMin, iMax int) {
	iMin, iMax = -1, -1
	var lo, hi float64
	for i, v := range vs {
		if !isFinite(v) {
			continue
		}
		if iMin < 0 || v < lo {
			lo, iMin = v, i
		}
		if iMax < 0 || v > hi {
			hi, iMax = v, i
		}
	}
	return iMin, iMax
}
