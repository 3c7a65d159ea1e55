package downsample

import (
	"math"
	"slices"
	"unsafe"
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
// It is the hot loop of MinMax, M4 and MinMaxLTTB's preselection. A
// branch per new extreme mispredicts about sqrt(len) times per bin on a
// random walk, which cost more than the scan itself at MinMaxLTTB's bin
// sizes, so both kernels are branch-free: they track only the extreme
// values, per block of samples, remember the first block that improved
// each, and find the index by rescanning that one block. On amd64 with
// AVX2 the block scan is vectorised (minmax_amd64.s); otherwise, or with
// the purego build tag, it runs on integer keys (blockMinMax). Neither
// tests finiteness per value: a NaN or ±Inf makes the result non-finite
// (or is reported), and the careful loop takes over.
func minMaxIdx(vs []float64) (iMin, iMax int) {
	if len(vs) == 0 {
		return -1, -1
	}
	iMin, iMax, ran := minMaxIdxVec(vs)
	if !ran {
		iMin, iMax = blockMinMax(vs)
	}
	if iMin >= 0 && isFinite(vs[iMin]) && isFinite(vs[iMax]) {
		return iMin, iMax
	}
	return minMaxIdxFinite(vs)
}

// orderKey maps the bits of a float64 to an int64 with the same order,
// -0 and +0 equal; NaNs map beyond ±Inf.
func orderKey(bits int64) int64 {
	sign := bits >> 63
	return (bits&math.MaxInt64 ^ sign) - sign
}

// keyBlock is the block size of blockMinMax.
const keyBlock = 64

// blockMinMax is minMaxIdx's portable kernel on a non-empty vs: min and
// max on integer order keys compile to CMOV, two lanes each.
func blockMinMax(vs []float64) (iMin, iMax int) {
	// Reading the float bits as int64 keeps them in general registers; via
	// math.Float64bits the compiler spills every value through the stack.
	keys := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(vs))), len(vs))
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	bMin, bMax := 0, 0
	l0, l1, h0, h1 := lo, lo, hi, hi
	i := 0
	for ; i+keyBlock <= len(keys); i += keyBlock {
		b := keys[i : i+keyBlock : i+keyBlock]
		for k := 0; k < keyBlock; k += 2 {
			c := b[k : k+2 : k+2]
			k0, k1 := orderKey(c[0]), orderKey(c[1])
			l0, h0 = min(l0, k0), max(h0, k0)
			l1, h1 = min(l1, k1), max(h1, k1)
		}
		if l := min(l0, l1); l < lo {
			lo, bMin = l, i
		}
		if h := max(h0, h1); h > hi {
			hi, bMax = h, i
		}
	}
	// The tail, shorter than a block, goes through the same branch-free
	// lanes: with small bins (MinMaxLTTB's) a branchy tail loop would
	// mispredict at every new extreme on a good share of the samples.
	if i < len(keys) {
		b := keys[i:]
		k := 0
		for ; k+2 <= len(b); k += 2 {
			k0, k1 := orderKey(b[k]), orderKey(b[k+1])
			l0, h0 = min(l0, k0), max(h0, k0)
			l1, h1 = min(l1, k1), max(h1, k1)
		}
		if k < len(b) {
			k0 := orderKey(b[k])
			l0, h0 = min(l0, k0), max(h0, k0)
		}
		if l := min(l0, l1); l < lo {
			lo, bMin = l, i
		}
		if h := max(h0, h1); h > hi {
			hi, bMax = h, i
		}
	}
	// The first block that reached lo holds its first occurrence.
	for iMin = bMin; orderKey(keys[iMin]) != lo; iMin++ {
	}
	for iMax = bMax; orderKey(keys[iMax]) != hi; iMax++ {
	}
	return iMin, iMax
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
