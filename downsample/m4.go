package downsample

import "slices"

// M4 appends to dst the indices of at most n samples of ts/vs and returns
// the extended dst: for each of n/4 buckets of equal time width spanning the
// first to the last finite sample, its first and last finite samples and
// its minimum and maximum (first occurrence), in index order and without
// repeats (Jugel et al., "M4: A Visualization-Oriented Time Series Data
// Aggregation", VLDB 2014). Drawn n/4 pixels wide, the line is pixel-exact.
//
// n < 4 is clamped to the first and last samples (see the package doc).
// Inputs of parallelMinPoints samples or more are scanned by up to
// GOMAXPROCS goroutines; apart from those, M4 allocates only if dst lacks
// room for n more indices.
func M4(dst []int, ts []int64, vs []float64, n int) []int {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	dst, lo, hi, done := clampSmall(dst, vs, n, 4)
	if done {
		return dst
	}
	bins := n / 4
	base := len(dst)
	dst = slices.Grow(dst, 4*bins)
	slots := dst[base : base+4*bins]
	runBins(slots, ts, vs, lo, hi+1, newTimeBins(ts[lo], ts[hi], bins), kernelM4)
	kept := compact(slots, -1)
	return dst[:base+kept]
}

// m4Bin writes the first, min, max and last finite indices of vs, offset
// by off, into slot, in index order; -1 marks a missing one.
func m4Bin(slot []int, vs []float64, off int) {
	slot = slot[:4]
	first, last := finiteBounds(vs)
	if first < 0 {
		slot[0], slot[1], slot[2], slot[3] = -1, -1, -1, -1
		return
	}
	iMin, iMax := minMaxIdx(vs[first : last+1])
	iMin, iMax = min(iMin, iMax), max(iMin, iMax)
	slot[0], slot[1], slot[2], slot[3] = off+first, off+first+iMin, off+first+iMax, off+last
}
