package downsample

import (
	"math"
	"slices"
)

// MinMaxLTTB appends to dst the indices of at most n samples of ts/vs and
// returns the extended dst: MinMax preselects n*ratio samples, then LTTB
// picks n of them (Van Der Donckt, Van Der Donckt, Rademaker and Van
// Hoecke, "MinMaxLTTB: Leveraging MinMax-Preselection to Scale LTTB", 2023).
// The picture is close to LTTB's at about MinMax's cost, because LTTB's
// pick in a bucket is nearly always an extreme of it.
//
// ratio < 2 is taken as 2; the paper recommends 4. If n*ratio reaches
// len(ts) this is plain LTTB. n < 3 is clamped (see the package doc).
// MinMaxLTTB uses dst's spare capacity as scratch for the preselection and
// allocates only if dst lacks room for n + n*ratio more indices; the
// preselection may start goroutines as MinMax does.
func MinMaxLTTB(dst []int, ts []int64, vs []float64, n, ratio int) []int {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	ratio = max(ratio, 2)
	if n <= 0 || n >= size || n > size/ratio {
		return LTTB(dst, ts, vs, n)
	}
	if n < 3 {
		dst, _, _, _ = clampSmall(dst, vs, n, 3)
		return dst
	}
	// The preselection goes past the n slots of the result, so the LTTB
	// pass can append its picks without overwriting what it still reads.
	base := len(dst)
	dst = slices.Grow(dst, n+n*ratio)
	sel := MinMax(dst[base+n:base+n], ts, vs, n*ratio)
	if len(sel) <= n {
		return append(dst, sel...)
	}
	return lttbSelected(dst, ts, vs, sel, n)
}

// lttbSelected is LTTB over the samples sel (ascending, finite) instead of
// over all of ts/vs; it appends sel's first and last and n-2 picks, and
// needs 3 <= n < len(sel).
func lttbSelected(dst []int, ts []int64, vs []float64, sel []int, n int) []int {
	buckets := n - 2
	last := len(sel) - 1
	t0 := ts[sel[0]]
	every := float64(last-1) / float64(buckets)
	dst = append(dst, sel[0])
	ax, ay := 0.0, vs[sel[0]]
	start := 1
	mid := int(every) + 1
	for i := 0; i < buckets; i++ {
		end := min(int(float64(i+2)*every)+1, last+1)
		var sumT int64
		var sumV float64
		for _, s := range sel[mid:end] {
			sumT += ts[s] - t0
			sumV += vs[s]
		}
		cnt := float64(end - mid)
		avgX, avgY := float64(sumT)/cnt, sumV/cnt
		dx, dy := ax-avgX, avgY-ay
		best, pick := -1.0, -1
		for _, s := range sel[start:mid] {
			x := float64(ts[s] - t0)
			area := math.Abs(float64(dx*(vs[s]-ay)) - float64((ax-x)*dy))
			if area > best {
				best, pick = area, s
			}
		}
		if pick >= 0 {
			dst = append(dst, pick)
			ax, ay = float64(ts[pick]-t0), vs[pick]
		}
		start, mid = mid, end
	}
	return append(dst, sel[last])
}
