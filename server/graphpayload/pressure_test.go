package graphpayload

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/peakline/peakline/tsdb/history"
)

// TestPressureShares checks each interval's share is the stall seconds
// over its length: the first interval one median interval long, a share
// capped at 1, a negative or NaN sample counting no stall, runs of
// intervals merged when there are more samples than points, and no band
// for a signal of one sample or none.
func TestPressureShares(t *testing.T) {
	cpu := StallColumn{Signal: "cpu", Ts: []int64{1000, 1250, 1500, 1750, 2250}, Vs: []float64{0.0625, 0.125, 0, 0.25, math.NaN()}}
	mem := StallColumn{Signal: "memory", Ts: []int64{1000, 1500, 2000}, Vs: []float64{0.6, -1, 0.05}}
	one := StallColumn{Signal: "node_cpu", Ts: []int64{1000}, Vs: []float64{0.1}}
	none := StallColumn{Signal: "throttled"}
	got := Pressure([]StallColumn{cpu, mem, one, none}, 100)
	want := []PressureBand{
		{Signal: "cpu", RawSamples: 5, From: []int64{750, 1000, 1250, 1500, 1750}, T: []int64{1000, 1250, 1500, 1750, 2250}, Share: []float64{0.25, 0.5, 0, 1, 0}},
		{Signal: "memory", RawSamples: 3, From: []int64{500, 1000, 1500}, T: []int64{1000, 1500, 2000}, Share: []float64{1, 0, 0.1}},
	}
	checkBands(t, got, want)

	// Two points: the five cpu intervals in runs of three and two.
	got = Pressure([]StallColumn{cpu}, 2)
	want = []PressureBand{{Signal: "cpu", RawSamples: 5, From: []int64{750, 1500}, T: []int64{1500, 2250}, Share: []float64{0.25, 0.3333}}}
	checkBands(t, got, want)
}

func checkBands(t *testing.T, got, want []PressureBand) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d bands %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Signal != w.Signal || g.RawSamples != w.RawSamples || !slices.Equal(g.From, w.From) || !slices.Equal(g.T, w.T) || !slices.Equal(g.Share, w.Share) {
			t.Errorf("band %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestPressureArea checks, on random intervals and stalls below each
// interval's length, that a band holds at most points intervals that
// tile the samples' time without gaps, and that its area (share × length)
// is the stall time of the samples whatever the number of points.
func TestPressureArea(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	for range 200 {
		n := 2 + r.IntN(400)
		c := StallColumn{Signal: "cpu", Ts: make([]int64, n), Vs: make([]float64, n)}
		ts := int64(1_700_000_000_000)
		for i := range n {
			dt := 50 + r.Int64N(950)
			ts += dt
			c.Ts[i] = ts
		}
		typical := max(history.MedianInterval(c.Ts), 1)
		total := 0.0
		for i := range n {
			dt := typical
			if i > 0 {
				dt = c.Ts[i] - c.Ts[i-1]
			}
			c.Vs[i] = r.Float64() * float64(dt) / 1000
			total += c.Vs[i]
		}
		points := 1 + r.IntN(500)
		bands := Pressure([]StallColumn{c}, points)
		if len(bands) != 1 {
			t.Fatalf("%d bands of one column", len(bands))
		}
		b := bands[0]
		if len(b.T) > points || len(b.T) != len(b.From) || len(b.T) != len(b.Share) || b.RawSamples != n {
			t.Fatalf("n %d points %d: %d intervals (%d from, %d shares), raw %d", n, points, len(b.T), len(b.From), len(b.Share), b.RawSamples)
		}
		area := 0.0
		for k := range b.T {
			if k > 0 && b.From[k] != b.T[k-1] {
				t.Fatalf("interval %d starts at %d, the previous ended at %d", k, b.From[k], b.T[k-1])
			}
			if b.Share[k] < 0 || b.Share[k] > 1 {
				t.Fatalf("share %v out of 0..1", b.Share[k])
			}
			area += b.Share[k] * float64(b.T[k]-b.From[k]) / 1000
		}
		if b.From[0] != c.Ts[0]-typical || b.T[len(b.T)-1] != c.Ts[n-1] {
			t.Fatalf("band spans %d–%d, want %d–%d", b.From[0], b.T[len(b.T)-1], c.Ts[0]-typical, c.Ts[n-1])
		}
		// Shares are rounded to 4 decimals: up to 0.00005 of each interval.
		slack := 0.00005 * float64(c.Ts[n-1]-b.From[0]) / 1000
		if math.Abs(area-total) > slack+1e-9 {
			t.Fatalf("n %d points %d: band area %.6f s, stall %.6f s", n, points, area, total)
		}
	}
}
