package downsample

import (
	"container/heap"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// PeakLTTB appends to dst the indices of at most n samples of ts/vs and
// returns the extended dst. It is LTTB's picture with forced points, called
// anchors, added: the first and last finite samples, the global max and min
// (finite values only) and every index in keep are always kept.
//
// It runs LTTB with n points, then adds the anchors LTTB did not pick. A
// max or min value LTTB already shows (at any index) needs no anchor; so
// with keep empty, if LTTB shows both, its result is returned as is, and
// otherwise the first occurrence of the missing one is added. To get back
// to n points it then drops, one at a time, the LTTB pick that is not an
// anchor and whose triangle with its two current neighbours has the
// smallest area, Visvalingam and Whyatt's measure of how little a point
// adds to a line ("Line generalisation by repeated elimination of points",
// 1993). The rest of LTTB's picture stays as it was, which on bench/fidelity's
// matrix draws a line no further from the raw one than LTTB's (see the
// package doc).
//
// keep must be ascending with indices < len(ts); an entry that is not larger
// than the one before it, is out of range, or points at a non-finite value is
// ignored, and so are valid entries beyond the first n. When n is too small
// for all anchors, keep wins, then the first and last samples, then the max,
// then the min: with len(keep) <= n/2 all of them fit for n >= 8, and keep,
// first and last fit for n >= 4.
//
// PeakLTTB uses dst's spare capacity as scratch and allocates only if dst
// lacks room for 3n more indices, when it has more than thinHeapMin points
// to drop (many keep entries LTTB did not pick), or for the goroutine that
// scans for the peaks while LTTB runs, on inputs of parallelMinPoints
// samples or more when GOMAXPROCS > 1.
func PeakLTTB(dst []int, ts []int64, vs []float64, n int, keep []int) []int {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	if n <= 0 {
		return dst
	}
	if n >= size {
		return appendFinite(dst, vs, 0)
	}
	lo, hi := finiteBounds(vs)
	if lo < 0 {
		return dst
	}
	base := len(dst)
	var iMin, iMax int
	if hi-lo >= parallelMinPoints && runtime.GOMAXPROCS(0) > 1 {
		dst, iMin, iMax = lttbAndPeaks(dst, ts, vs, n, lo, hi)
	} else {
		iMin, iMax = argMinMax(vs, lo, hi+1)
		dst = LTTB(dst, ts, vs, n)
	}
	// A pick that shows a peak value stands for it, as an anchor.
	showMin, showMax := -1, -1
	for _, i := range dst[base:] {
		if showMin < 0 && vs[i] == vs[iMin] {
			showMin = i
		}
		if showMax < 0 && vs[i] == vs[iMax] {
			showMax = i
		}
	}
	if showMin >= 0 && showMax >= 0 && !anyKeep(keep, vs) {
		return dst
	}
	if showMin >= 0 {
		iMin = showMin
	}
	if showMax >= 0 {
		iMax = showMax
	}

	// Anchors: the valid keep entries plus as many of the specials as fit.
	kept := 0
	for it := (keepIter{keep: keep, vs: vs, limit: n}); ; {
		if _, ok := it.next(); !ok {
			break
		}
		kept++
	}
	budget := n - kept
	var specials [4]int
	ns := 0
	for _, s := range [...]int{lo, hi, iMax, iMin} {
		if budget <= 0 {
			break
		}
		if containsInt(specials[:ns], s) || keepHas(keep, vs, kept, s) {
			continue
		}
		specials[ns] = s
		ns++
		budget--
	}
	sortSmall(specials[:ns])
	anchors := mergedAnchors{keep: keepIter{keep: keep, vs: vs, limit: kept}, specials: specials[:ns]}
	if budget <= 0 { // the anchors take every slot
		dst = dst[:base]
		for a, ok := anchors.next(); ok; a, ok = anchors.next() {
			dst = append(dst, a)
		}
		return dst
	}
	return thin(dst, base, ts, vs, n, anchors)
}

// lttbAndPeaks appends LTTB's picks to dst while another goroutine scans
// [lo, hi] for the peaks: each reads the whole series and neither needs the
// other, so on two cores they overlap. (A function of its own, so that only
// this path pays for the variables the goroutine shares.)
func lttbAndPeaks(dst []int, ts []int64, vs []float64, n, lo, hi int) (out []int, iMin, iMax int) {
	var wg sync.WaitGroup
	wg.Go(func() { iMin, iMax = argMinMax(vs, lo, hi+1) })
	out = LTTB(dst, ts, vs, n)
	wg.Wait()
	return out, iMin, iMax
}

// thinHeapMin is the number of points to drop from which thin keeps the
// triangle areas in a heap instead of rescanning them for every drop.
const thinHeapMin = 8

// thin merges the picks dst[base:] (ascending, at most n) with the anchors
// (ascending, at most n) and drops the picks that are not anchors with the
// smallest triangle areas until at most n points remain, the first of
// equal areas first. While it works, an anchor is stored as ^index.
func thin(dst []int, base int, ts []int64, vs []float64, n int, anchors mergedAnchors) []int {
	picks := len(dst) - base
	dst = slices.Grow(dst, 2*n)
	// The picks move to the far end of the scratch, so the merge can write
	// from base on without overtaking them.
	src := dst[base+2*n : base+2*n+picks]
	copy(src, dst[base:])
	pts := dst[base:base]
	a, ok := anchors.next()
	for _, p := range src {
		for ok && a < p {
			pts = append(pts, ^a)
			a, ok = anchors.next()
		}
		if ok && a == p {
			pts = append(pts, ^a)
			a, ok = anchors.next()
			continue
		}
		pts = append(pts, p)
	}
	for ; ok; a, ok = anchors.next() {
		pts = append(pts, ^a)
	}

	t0 := ts[^pts[0]] // pts[0] is the first finite sample, an anchor
	at := func(k int) int {
		if i := pts[k]; i < 0 {
			return ^i
		}
		return pts[k]
	}
	area := func(p, m, q int) float64 {
		xp, xm, xq := float64(ts[p]-t0), float64(ts[m]-t0), float64(ts[q]-t0)
		a := math.Abs(float64((xm-xp)*(vs[q]-vs[p])) - float64((xq-xp)*(vs[m]-vs[p])))
		if math.IsNaN(a) {
			return math.Inf(1)
		}
		return a
	}
	if drop := len(pts) - n; drop >= thinHeapMin {
		pts = thinHeap(pts, drop, at, area)
	} else {
		for range drop {
			best, worst := -1, math.Inf(1)
			for k := 1; k+1 < len(pts); k++ {
				if pts[k] < 0 {
					continue
				}
				if a := area(at(k-1), pts[k], at(k+1)); a < worst || best < 0 {
					best, worst = k, a
				}
			}
			if best < 0 {
				break
			}
			pts = append(pts[:best], pts[best+1:]...)
		}
	}
	for k, i := range pts {
		if i < 0 {
			pts[k] = ^i
		}
	}
	return dst[:base+len(pts)]
}

// thinHeap is thin's dropping loop for many drops: the areas live in a
// heap, and a point's entry is refreshed when a neighbour goes.
func thinHeap(pts []int, drop int, at func(int) int, area func(p, m, q int) float64) []int {
	prev := make([]int32, len(pts))
	next := make([]int32, len(pts))
	for k := range pts {
		prev[k], next[k] = int32(k-1), int32(k+1)
	}
	cur := make([]float64, len(pts))
	h := make(areaHeap, 0, len(pts))
	push := func(k int) {
		if pts[k] < 0 || k == 0 || k == len(pts)-1 {
			return
		}
		cur[k] = area(at(int(prev[k])), pts[k], at(int(next[k])))
		heap.Push(&h, areaItem{cur[k], k})
	}
	for k := range pts {
		push(k)
	}
	gone := 0
	for gone < drop && h.Len() > 0 {
		it := heap.Pop(&h).(areaItem)
		k := it.k
		if prev[k] == -2 || it.area != cur[k] { // dropped, or a stale entry
			continue
		}
		p, q := prev[k], next[k]
		next[p], prev[q] = q, p
		prev[k] = -2
		gone++
		push(int(p))
		push(int(q))
	}
	w := 0
	for k := range pts {
		if prev[k] != -2 {
			pts[w] = pts[k]
			w++
		}
	}
	return pts[:w]
}

type areaItem struct {
	area float64
	k    int
}

// areaHeap is a min-heap of areas, the first point first on a tie.
type areaHeap []areaItem

func (h areaHeap) Len() int { return len(h) }
func (h areaHeap) Less(i, j int) bool {
	return h[i].area < h[j].area || h[i].area == h[j].area && h[i].k < h[j].k
}
func (h areaHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *areaHeap) Push(x any)   { *h = append(*h, x.(areaItem)) }
func (h *areaHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// argMinMax returns the indices of the first minimum and the first maximum
// among the finite values of vs[from:to]; vs[from] must be finite.
func argMinMax(vs []float64, from, to int) (iMin, iMax int) {
	iMin, iMax = minMaxIdx(vs[from:to])
	return from + iMin, from + iMax
}

// anyKeep reports whether keep has a valid entry.
func anyKeep(keep []int, vs []float64) bool {
	it := keepIter{keep: keep, vs: vs, limit: 1}
	_, ok := it.next()
	return ok
}

// mulDiv returns a*b/c rounded down, for 0 <= a, b <= c (so it cannot
// overflow) and c > 0.
func mulDiv(a, b, c int) int {
	h, l := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(h, l, uint64(c))
	return int(q)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// sortSmall sorts a handful of ints by insertion.
func sortSmall(xs []int) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

// keepIter yields the first limit valid entries of keep in order: ascending,
// in range of vs, on finite values. Others are skipped.
type keepIter struct {
	keep  []int
	vs    []float64
	limit int
	i     int
	prev  int
	init  bool
}

func (it *keepIter) next() (int, bool) {
	for it.i < len(it.keep) && it.limit > 0 {
		k := it.keep[it.i]
		it.i++
		if (it.init && k <= it.prev) || k < 0 || k >= len(it.vs) || !isFinite(it.vs[k]) {
			continue
		}
		it.prev, it.init = k, true
		it.limit--
		return k, true
	}
	return -1, false
}

// keepHas reports whether x is among the first limit valid entries of keep.
func keepHas(keep []int, vs []float64, limit, x int) bool {
	it := keepIter{keep: keep, vs: vs, limit: limit}
	for k, ok := it.next(); ok && k <= x; k, ok = it.next() {
		if k == x {
			return true
		}
	}
	return false
}

// mergedAnchors yields the union of the valid keep entries and a sorted
// list of other indices, none of which is in keep, in ascending order.
type mergedAnchors struct {
	keep     keepIter
	specials []int
	k        int
	hasK     bool
	primed   bool
}

func (m *mergedAnchors) next() (int, bool) {
	if !m.primed {
		m.k, m.hasK = m.keep.next()
		m.primed = true
	}
	if m.hasK && (len(m.specials) == 0 || m.k < m.specials[0]) {
		k := m.k
		m.k, m.hasK = m.keep.next()
		return k, true
	}
	if len(m.specials) > 0 {
		s := m.specials[0]
		m.specials = m.specials[1:]
		return s, true
	}
	return -1, false
}
