package downsample

import "math"

// LTTB appends to dst the indices of at most n samples of ts/vs chosen by
// Steinarsson's Largest-Triangle-Three-Buckets (MSc thesis, 2013, and his
// flot-downsample code), and returns the extended dst.
//
// The semantics are his, exactly: the first and last samples are kept; the
// samples between them are cut into n-2 index buckets of (len-2)/(n-2)
// samples (a float, bucket i spanning [floor(i*every)+1, floor((i+1)*every)+1));
// from each bucket the sample with the largest triangle formed with the
// previously chosen sample and the mean of the next bucket is kept, and on a
// tie the earlier sample wins. The x coordinate is the timestamp in
// milliseconds relative to the first kept sample, as a float64.
//
// Non-finite values are never chosen: the series runs from the first to the
// last finite sample, a bucket's mean is taken over its finite samples (or is
// the next finite sample if it has none), and a bucket without a finite
// sample contributes no point. On finite data none of this changes a pick.
//
// n < 3 is clamped (see the package doc). LTTB allocates only if dst lacks
// room for n more indices.
func LTTB(dst []int, ts []int64, vs []float64, n int) []int {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	dst, lo, hi, done := clampSmall(dst, vs, n, 3)
	if done {
		return dst
	}
	dst = append(dst, lo)
	dst = lttbInterior(dst, ts, vs, lo, hi, n-2)
	return append(dst, hi)
}

// lttbInterior appends the picks of LTTB with the given number of buckets
// between lo and hi, which are both finite and are not appended themselves.
// It needs 1 <= buckets < hi-lo-1.
//
// Bucket k (0 <= k <= buckets) spans [edge(k), edge(k+1)); iteration i picks
// from bucket i using the mean of bucket i+1. Each sample is read twice,
// once for a mean and once for an area. A bucket's mean is a sequential
// float sum (to stay bit-identical to Steinarsson), and a loop of one such
// sum waits on the latency of every add. The means do not depend on the
// picks, so they are computed lttbGroup buckets at a time, with the
// buckets' sums interleaved in one loop (sumGroup): each stays in order,
// and the chains overlap. The group is then still in cache when its
// buckets' areas are compared. Timestamps are summed as exact int64
// offsets and every per-bucket quantity is kept out of the inner loops.
func lttbInterior(dst []int, ts []int64, vs []float64, lo, hi, buckets int) []int {
	t0 := ts[lo]
	every := float64(hi-lo-1) / float64(buckets)
	edge := func(k int) int { return min(lo+int(float64(k)*every)+1, hi+1) }
	ta, ax, ay := t0, 0.0, vs[lo]
	// pickAny computes x-ax as float64(t-ta), which is exact, and so
	// bit-identical to float64(t-t0)-ax, while time offsets stay below 2^53
	// ms (285,000 years); wider (corrupt) ranges take the careful loop.
	wide := uint64(ts[hi]-t0) >= 1<<53
	nextFinite := lo // first finite index at or after the last position asked about
	// mean returns the mean of bucket [from, to) from its sums, falling back
	// to the finite samples or to the next finite one after it.
	mean := func(from, to int, sumT int64, sumV float64) (avgX, avgY float64, clean bool) {
		if cnt := float64(to - from); isFinite(sumV) {
			return float64(sumT) / cnt, sumV / cnt, true
		}
		avgX, avgY, cnt := bucketMeanFinite(ts, vs, from, to, t0)
		if cnt == 0 {
			if nextFinite < to {
				nextFinite = to
				for !isFinite(vs[nextFinite]) {
					nextFinite++
				}
			}
			avgX, avgY = float64(ts[nextFinite]-t0), vs[nextFinite]
		}
		return avgX, avgY, false
	}

	// The group holds buckets [g, g+lttbGroup): bucket k spans
	// [edges[k-g], edges[k-g+1]) and has mean avgXs[k-g], avgYs[k-g].
	var (
		edges        [lttbGroup + 1]int
		avgXs, avgYs [lttbGroup]float64
		cleans       [lttbGroup]bool
	)
	g := 1 - lttbGroup
	fill := func(from int) {
		g = from
		cnt := min(lttbGroup, buckets+1-from)
		for k := range cnt + 1 {
			edges[k] = edge(from + k)
		}
		var sumT [lttbGroup]int64
		var sumV [lttbGroup]float64
		if cnt == lttbGroup {
			sumGroup(ts, vs, &edges, t0, &sumT, &sumV)
		} else {
			for k := range cnt {
				sumT[k], sumV[k] = sumBucket(ts[edges[k]:edges[k+1]], vs[edges[k]:edges[k+1]], t0)
			}
		}
		for k := range cnt {
			avgXs[k], avgYs[k], cleans[k] = mean(edges[k], edges[k+1], sumT[k], sumV[k])
		}
	}

	start, mid := edge(0), edge(1) // bucket i is [start, mid)
	// Bucket 0 is never a "next" bucket, so nobody has checked it for
	// non-finite values: scan it with the careful loop.
	dirty := true
	for i := range buckets {
		if i+1 >= g+lttbGroup {
			fill(i + 1)
		}
		k := i + 1 - g
		avgX, avgY, clean, end := avgXs[k], avgYs[k], cleans[k], edges[k+1]
		var pick int
		if dirty || wide {
			pick = pickFinite(ts[start:mid], vs[start:mid], t0, ax, ay, avgX, avgY)
		} else {
			pick = pickAny(ts[start:mid], vs[start:mid], ta, ax, ay, avgX, avgY)
		}
		if pick >= 0 {
			a := start + pick
			dst = append(dst, a)
			ta, ax, ay = ts[a], float64(ts[a]-t0), vs[a]
		}
		dirty = !clean
		start, mid = mid, end
	}
	return dst
}

// lttbGroup is how many buckets' means lttbInterior computes in one pass.
// Four chains of float adds cover the add latency; the four buckets and the
// one being picked from stay in L2 for the bucket sizes of a graph (a
// 1e7-sample series in 1,000 buckets is 160 KB a bucket).
const lttbGroup = 4

// sumGroup sets sumT[k], sumV[k] to sumBucket of [edges[k], edges[k+1]) for
// the lttbGroup adjacent buckets between edges, each summed in order.
func sumGroup(ts []int64, vs []float64, edges *[lttbGroup + 1]int, t0 int64, sumT *[lttbGroup]int64, sumV *[lttbGroup]float64) {
	e := edges
	n := min(e[1]-e[0], e[2]-e[1], e[3]-e[2], e[4]-e[3])
	v0 := vs[e[0] : e[0]+n]
	v1, v2, v3 := vs[e[1]:e[1]+n], vs[e[2]:e[2]+n], vs[e[3]:e[3]+n]
	t0s, t1s, t2s, t3s := ts[e[0]:e[0]+n], ts[e[1]:e[1]+n], ts[e[2]:e[2]+n], ts[e[3]:e[3]+n]
	var s0, s1, s2, s3 float64
	var u0, u1, u2, u3 int64
	for j, v := range v0 {
		s0 += v
		s1 += v1[j]
		s2 += v2[j]
		s3 += v3[j]
		u0 += t0s[j]
		u1 += t1s[j]
		u2 += t2s[j]
		u3 += t3s[j]
	}
	*sumV = [lttbGroup]float64{s0, s1, s2, s3}
	*sumT = [lttbGroup]int64{u0, u1, u2, u3}
	for k := range lttbGroup {
		for j := e[k] + n; j < e[k+1]; j++ { // the buckets' last samples, in order
			sumT[k] += ts[j]
			sumV[k] += vs[j]
		}
		sumT[k] -= int64(e[k+1]-e[k]) * t0
	}
}

// sumBucket returns the sums of tb's offsets from t0 (exact: wrapping is
// harmless as the true sum fits) and of vb, in order.
func sumBucket(tb []int64, vb []float64, t0 int64) (sumT int64, sumV float64) {
	vb = vb[:len(tb)]
	for i, t := range tb {
		sumT += t
		sumV += vb[i]
	}
	return sumT - int64(len(tb))*t0, sumV
}

// pickAny returns the index in ct/cv of the sample forming the largest
// triangle with (ax, ay) and (avgX, avgY), the first on a tie, on a bucket
// of finite values whose time offsets from ta fit in 2^53.
//
// On amd64 with AVX-512 the vector kernel (lttb_amd64.s) takes buckets of
// pickVecMin samples or more; smaller ones, or all of them elsewhere, go
// through a branch-free loop. Both compute each area with the same IEEE
// operations in the same order, without fused multiply-adds, so their
// picks are the same.
func pickAny(ct []int64, cv []float64, ta int64, ax, ay, avgX, avgY float64) (pick int) {
	cv = cv[:len(ct)]
	dx := ax - avgX
	dy := avgY - ay
	pick, best, i := pickAnyVec(ct, cv, ta, ay, dx, dy)
	// The areas are compared by the bits of their absolute values, which
	// order as integers do, so the compiler can keep the best without a
	// branch; a NaN area's bits are set below every other.
	bestKey := int64(-1)
	if pick >= 0 {
		bestKey = int64(math.Float64bits(best))
	}
	for ; i < len(ct); i++ {
		// Steinarsson's (ax-avgX)*(y-ay) - (ax-x)*(avgY-ay), written as a
		// sum with (x-ax): negation is exact, so the bits are his.
		l := float64(dx*(cv[i]-ay)) + float64(float64(ct[i]-ta)*dy)
		k := int64(math.Float64bits(l) &^ (1 << 63))
		if k > 0x7ff0000000000000 {
			k = -1
		}
		if k > bestKey {
			bestKey, pick = k, i
		}
	}
	return pick
}

// bucketMeanFinite is bucketMean over the finite values only; cnt is how
// many there were. If their sum overflows, the mean is computed from the
// values divided by cnt first.
func bucketMeanFinite(ts []int64, vs []float64, from, to int, t0 int64) (avgX, avgY float64, cnt int) {
	var sumT int64
	var sumV float64
	for i := from; i < to; i++ {
		if v := vs[i]; isFinite(v) {
			sumT += ts[i] - t0
			sumV += v
			cnt++
		}
	}
	if cnt == 0 {
		return 0, 0, 0
	}
	c := float64(cnt)
	if !isFinite(sumV) {
		sumV = 0
		for i := from; i < to; i++ {
			if v := vs[i]; isFinite(v) {
				sumV += v / c
			}
		}
		return float64(sumT) / c, sumV, cnt
	}
	return float64(sumT) / c, sumV / c, cnt
}

// pickFinite returns the index in tb/vb of the finite sample forming the
// largest triangle with (ax, ay) and (avgX, avgY), the first on a tie, or
// -1 if there is none or no area compares (NaN). The area is Steinarsson's
// expression with its point-independent factors hoisted; the float64
// conversions forbid fused multiply-adds so the result is bit-identical to
// his on every platform.
func pickFinite(tb []int64, vb []float64, t0 int64, ax, ay, avgX, avgY float64) int {
	vb = vb[:len(tb)]
	dx := ax - avgX
	dy := avgY - ay
	best := -1.0
	pick := -1
	for i, t := range tb {
		v := vb[i]
		if !isFinite(v) {
			continue
		}
		x := float64(t - t0)
		area := math.Abs(float64(dx*(v-ay)) - float64((ax-x)*dy))
		if area > best {
			best = area
			pick = i
		}
	}
	return pick
}
