package downsample

import (
	"math"
	"math/bits"
)

// PeakLTTB appends to dst the indices of at most n samples of ts/vs and
// returns the extended dst. It is LTTB with forced picks: the first and
// last finite samples, the global max and min (first occurrence, finite
// values only) and every index in keep are always kept; an LTTB bucket that
// holds one or more of them yields those instead of its own pick, and the
// next triangle starts from the last of them. Every other bucket picks as
// LTTB does, so with no anchor inside, or with anchors LTTB would have
// picked anyway, the result is exactly LTTB's. Where buckets hold more than
// one anchor, the number of buckets shrinks by the surplus so the result
// stays within n. If keep is empty and plain LTTB already picks a sample
// at the global max value and one at the global min value, its result is
// returned as is; otherwise both are forced. So PeakLTTB costs one LTTB
// run plus a max/min scan, or two runs when LTTB misses a peak (about half
// of random walks).
//
// keep must be ascending with indices < len(ts); an entry that is not larger
// than the one before it, is out of range, or points at a non-finite value is
// ignored, and so are valid entries beyond the first n. When n is too small
// for all anchors, keep wins, then the first and last samples, then the max,
// then the min: with len(keep) <= n/2 all of them fit for n >= 8, and keep,
// first and last fit for n >= 4.
//
// Allocates only if dst lacks room for n more indices.
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
	iMin, iMax := argMinMax(vs, lo, hi+1)
	needMin, needMax := true, true
	if n >= 4 && !anyKeep(keep, vs) {
		// Try plain LTTB first: most of the time it shows the peak values
		// already (at this or another index), and then its picture is kept
		// untouched. Forcing an anchor replaces a bucket's pick, which on
		// step-like series costs a little fidelity (bench/fidelity).
		base := len(dst)
		dst = LTTB(dst, ts, vs, n)
		for _, i := range dst[base:] {
			needMin = needMin && vs[i] != vs[iMin]
			needMax = needMax && vs[i] != vs[iMax]
		}
		if !needMin && !needMax {
			return dst
		}
		// Forcing one peak changes the picks after it, so force both.
		needMin, needMax = true, true
		dst = dst[:base]
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
	for k, s := range [...]int{lo, hi, iMax, iMin} {
		if budget <= 0 {
			break
		}
		if k == 2 && !needMax || k == 3 && !needMin {
			continue
		}
		if containsInt(specials[:ns], s) || keepHas(keep, vs, kept, s) {
			continue
		}
		specials[ns] = s
		ns++
		budget--
	}
	sortSmall(specials[:ns])
	anchors := func() mergedAnchors {
		return mergedAnchors{keep: keepIter{keep: keep, vs: vs, limit: kept}, specials: specials[:ns]}
	}

	// Every anchor lies in [lo, hi]; budget > 0 implies lo and hi are anchors.
	if budget >= hi-lo+1-kept-ns {
		if budget > 0 {
			return appendFinite(dst, vs[lo:hi+1], lo)
		}
	}
	buckets := 0
	if budget > 0 {
		// Find a bucket count whose buckets plus surplus anchors fit. Each
		// round lowers it; it converges in a few rounds, and n-2 minus the
		// number of anchors inside always fits, so stop there if need be.
		buckets = n - 2
		for round := 0; buckets >= 1; round++ {
			q := newAnchorQueue(anchors(), lo, hi)
			extra := anchorSurplus(&q, lo, hi, buckets)
			if buckets+extra <= n-2 {
				break
			}
			buckets = n - 2 - extra
			if round == 8 {
				buckets = max(n-kept-ns, 0)
				break
			}
		}
	}
	if buckets < 1 {
		m := anchors()
		for a, ok := m.next(); ok; a, ok = m.next() {
			dst = append(dst, a)
		}
		return dst
	}
	q := newAnchorQueue(anchors(), lo, hi)
	dst = append(dst, lo)
	dst = lttbInterior(dst, ts, vs, lo, hi, buckets, &q)
	return append(dst, hi)
}

// anchorSurplus returns by how many the anchors in q exceed one per LTTB
// bucket over [lo, hi] with the given number of buckets, counting anchors
// past the last bucket's end in the last bucket, as lttbInterior does.
func anchorSurplus(q *anchorQueue, lo, hi, buckets int) int {
	every := float64(hi-lo-1) / float64(buckets)
	edge := func(k int) int { return lo + int(float64(k)*every) + 1 } // as in lttbInterior
	extra, prev := 0, -1
	for q.peek() < hi {
		p := q.pop()
		k := min(max(int(float64(p-lo-1)/every), 0), buckets-1)
		for k+1 < buckets && edge(k+1) <= p {
			k++
		}
		for k > 0 && edge(k) > p {
			k--
		}
		if k == prev {
			extra++
		}
		prev = k
	}
	return extra
}

// anchorQueue yields the anchors strictly between lo and hi in order.
type anchorQueue struct {
	m    mergedAnchors
	hi   int
	head int
}

func newAnchorQueue(m mergedAnchors, lo, hi int) anchorQueue {
	q := anchorQueue{m: m, hi: hi}
	for {
		a, ok := q.m.next()
		if !ok || a >= hi {
			q.head = math.MaxInt
			break
		}
		if a > lo {
			q.head = a
			break
		}
	}
	return q
}

// peek returns the next anchor, or math.MaxInt if there is none.
func (q *anchorQueue) peek() int { return q.head }

// pop returns the next anchor and moves past it.
func (q *anchorQueue) pop() int {
	a := q.head
	if next, ok := q.m.next(); ok && next < q.hi {
		q.head = next
	} else {
		q.head = math.MaxInt
	}
	return a
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
