package downsample_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/peakline/peakline/downsample"
)

// thinOracle is PeakLTTB written out plainly for finite data with at most
// n/2 keep entries and n >= 8: LTTB's picks plus the anchors, then, while
// there are more than n, the non-anchor pick with the smallest triangle
// (the first on a tie) is removed, recomputing everything each time.
func thinOracle(ts []int64, vs []float64, n int, keep []int) []int {
	picks := downsample.LTTB(nil, ts, vs, n)
	iMin, iMax := extremes(vs)
	shows := func(v float64) int {
		for _, p := range picks {
			if vs[p] == v {
				return p
			}
		}
		return -1
	}
	if len(keep) == 0 && shows(vs[iMin]) >= 0 && shows(vs[iMax]) >= 0 {
		return picks
	}
	anchor := map[int]bool{0: true, len(vs) - 1: true}
	for _, k := range keep {
		anchor[k] = true
	}
	for _, peak := range []int{iMax, iMin} {
		if p := shows(vs[peak]); p >= 0 {
			anchor[p] = true
		} else {
			anchor[peak] = true
		}
	}
	pts := slices.Clone(picks)
	for a := range anchor {
		if !slices.Contains(pts, a) {
			pts = append(pts, a)
		}
	}
	slices.Sort(pts)
	x := func(i int) float64 { return float64(ts[i] - ts[0]) }
	for len(pts) > n {
		best, bestArea := -1, 0.0
		for k := 1; k+1 < len(pts); k++ {
			if anchor[pts[k]] {
				continue
			}
			p, m, q := pts[k-1], pts[k], pts[k+1]
			area := math.Abs(float64((x(m)-x(p))*(vs[q]-vs[p])) - float64((x(q)-x(p))*(vs[m]-vs[p])))
			if best < 0 || area < bestArea {
				best, bestArea = k, area
			}
		}
		pts = slices.Delete(pts, best, best+1)
	}
	return pts
}

// TestPeakLTTBMatchesOracle checks PeakLTTB against thinOracle on random
// series with no keep (a drop or two, the scanning path) and with up to n/2
// keep entries (many drops, the heap path).
func TestPeakLTTBMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var dst []int
	for c := range 3000 {
		size := 20 + rng.IntN(3000)
		n := 8 + rng.IntN(size/2)
		ts, vs := randomSeries(rng, size)
		var keep []int
		if c%2 == 1 {
			for i := 1; i < size-1 && len(keep) < n/2; i += 1 + rng.IntN(size/n*4+1) {
				keep = append(keep, i)
			}
		}
		want := thinOracle(ts, vs, n, keep)
		dst = downsample.PeakLTTB(dst[:0], ts, vs, n, keep)
		if !slices.Equal(dst, want) {
			t.Fatalf("case %d: size %d, n %d, %d keep:\n got %v\nwant %v", c, size, n, len(keep), dst, want)
		}
	}
}
