package downsample_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	lttb "github.com/dgryski/go-lttb"

	"github.com/peakline/peakline/downsample"
)

// steinarsson is a plain transliteration of Steinarsson's flot-downsample
// JavaScript (largestTriangleThreeBuckets) returning indices, with x the
// timestamp relative to the first sample. It is the oracle for LTTB, so it
// is kept as close to the original as Go allows: bucket bounds recomputed
// from floor(i*every) every time, sums in float64, no hoisting. (The
// original's "* 0.5" is left out: it does not change which area is larger.)
func steinarsson(ts []int64, vs []float64, threshold int) []int {
	dataLength := len(ts)
	if threshold >= dataLength || threshold == 0 {
		out := make([]int, dataLength)
		for i := range out {
			out[i] = i
		}
		return out
	}
	x := func(i int) float64 { return float64(ts[i] - ts[0]) }
	sampled := []int{0}
	every := float64(dataLength-2) / float64(threshold-2)
	a := 0
	for i := 0; i < threshold-2; i++ {
		avgX, avgY := 0.0, 0.0
		avgRangeStart := int(math.Floor(float64(i+1)*every)) + 1
		avgRangeEnd := int(math.Floor(float64(i+2)*every)) + 1
		if avgRangeEnd > dataLength {
			avgRangeEnd = dataLength
		}
		avgRangeLength := float64(avgRangeEnd - avgRangeStart)
		for ; avgRangeStart < avgRangeEnd; avgRangeStart++ {
			avgX += x(avgRangeStart)
			avgY += vs[avgRangeStart]
		}
		avgX /= avgRangeLength
		avgY /= avgRangeLength

		rangeOffs := int(math.Floor(float64(i+0)*every)) + 1
		rangeTo := int(math.Floor(float64(i+1)*every)) + 1
		pointAX, pointAY := x(a), vs[a]
		maxArea := -1.0
		nextA := -1
		for ; rangeOffs < rangeTo; rangeOffs++ {
			area := math.Abs(float64((pointAX-avgX)*(vs[rangeOffs]-pointAY)) - float64((pointAX-x(rangeOffs))*(avgY-pointAY)))
			if area > maxArea {
				maxArea = area
				nextA = rangeOffs
			}
		}
		sampled = append(sampled, nextA)
		a = nextA
	}
	return append(sampled, dataLength-1)
}

// randomSeries returns finite data with strictly increasing timestamps in
// one of several value styles, including small integers full of exact ties.
func randomSeries(rng *rand.Rand, size int) ([]int64, []float64) {
	ts := make([]int64, size)
	vs := make([]float64, size)
	t := rng.Int64N(1 << 40)
	style := rng.IntN(5)
	v := 0.0
	for i := range ts {
		ts[i] = t
		switch rng.IntN(3) {
		case 0:
			t += 250
		case 1:
			t += 1 + rng.Int64N(1000)
		default:
			t += 1 + rng.Int64N(10)
		}
		switch style {
		case 0:
			v += rng.NormFloat64()
		case 1:
			v = rng.NormFloat64() * 1e6
		case 2:
			v = float64(rng.IntN(5))
		case 3:
			v = 7
		default:
			v = math.Sin(float64(i)/10) * 100
		}
		vs[i] = v
	}
	return ts, vs
}

func TestLTTBMatchesSteinarsson(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var dst []int
	for c := 0; c < 5000; c++ {
		size := 3 + rng.IntN(2000)
		if c%10 == 0 {
			size = 3 + rng.IntN(20)
		}
		n := 3 + rng.IntN(size-2)
		if c%3 == 0 { // buckets of dozens to hundreds of samples
			n = 3 + rng.IntN(size/40+1)
		}
		ts, vs := randomSeries(rng, size)
		want := steinarsson(ts, vs, n)
		dst = downsample.LTTB(dst[:0], ts, vs, n)
		if !slices.Equal(dst, want) {
			t.Fatalf("case %d: size %d, n %d:\n got %v\nwant %v", c, size, n, dst, want)
		}
	}
}

// TestLTTBMatchesGoLTTB cross-checks against github.com/dgryski/go-lttb
// with timestamps starting at 0, where its absolute x equals our relative x
// and its arithmetic is the same; it squares the area instead of taking
// the absolute value, which orders the same on these magnitudes.
func TestLTTBMatchesGoLTTB(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := 0; c < 500; c++ {
		size := 3 + rng.IntN(5000)
		n := 3 + rng.IntN(size-2)
		ts, vs := randomSeries(rng, size)
		pts := make([]lttb.Point[float64], size)
		at := make(map[float64]int, size)
		for i := range ts {
			ts[i] -= ts[0]
		}
		for i := range ts {
			pts[i] = lttb.Point[float64]{X: float64(ts[i]), Y: vs[i]}
			at[pts[i].X] = i
		}
		var want []int
		for _, p := range lttb.LTTB(pts, n) {
			want = append(want, at[p.X])
		}
		got := downsample.LTTB(nil, ts, vs, n)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: size %d, n %d:\n got %v\nwant %v", c, size, n, got, want)
		}
	}
}

func TestLTTBSmall(t *testing.T) {
	ts := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	f := func(vs []float64, n int, want []int) {
		t.Helper()
		got := downsample.LTTB([]int{-7}, ts[:len(vs)], vs, n)
		if got[0] != -7 {
			t.Fatalf("LTTB(%v, %d) overwrote dst[0]: %v", vs, n, got)
		}
		if !slices.Equal(got[1:], want) {
			t.Fatalf("LTTB(%v, %d) = %v, want %v", vs, n, got[1:], want)
		}
	}
	nan := math.NaN()
	inf := math.Inf(1)
	f([]float64{1, 2, 3}, 10, []int{0, 1, 2})
	f([]float64{1, 2, 3}, 3, []int{0, 1, 2})
	f([]float64{1, 5, 3, 2}, 3, []int{0, 1, 3})
	f([]float64{1, 5, 3, 2}, 2, []int{0, 3})
	f([]float64{1, 5, 3, 2}, 1, []int{0})
	f([]float64{1, 5, 3, 2}, 0, nil)
	f([]float64{1, 5, 3, 2}, -1, nil)
	f([]float64{0, 1, 1, 0}, 3, []int{0, 1, 3}) // tie: the first wins
	f([]float64{nan, 1, 5, 3, 2, nan}, 3, []int{1, 2, 4})
	f([]float64{nan, 1, 5, 3, 2, nan}, 100, []int{1, 2, 3, 4})
	f([]float64{nan, nan}, 1, nil)
	f([]float64{1, inf, -inf, nan, 2, 3}, 3, []int{0, 4, 5})
	f([]float64{1, 2, inf, nan, 2, 9, 3}, 4, []int{0, 1, 5, 6})
	f([]float64{nan, 4, nan}, 2, []int{1})
}
