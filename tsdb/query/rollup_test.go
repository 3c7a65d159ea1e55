package query

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestVMBucket(t *testing.T) {
	f := func(v float64, wantRange string) {
		t.Helper()
		idx, ok := vmBucket(v)
		if !ok {
			t.Fatalf("%v: no bucket", v)
		}
		if got := vmRange(idx); got != wantRange {
			t.Fatalf("%v: bucket %d %q, want %q", v, idx, got, wantRange)
		}
	}
	f(0, "0...1.000e-09")
	f(1e-10, "0...1.000e-09")
	// A power of ten closes its bucket, as an `le` bound does.
	f(1, "8.799e-01...1.000e+00")
	f(100, "8.799e+01...1.000e+02")
	f(1.0000001, "1.000e+00...1.136e+00")
	f(42, "4.084e+01...4.642e+01")
	f(1e19, "1.000e+18...+Inf")
	for _, v := range []float64{-1, math.NaN()} {
		if _, ok := vmBucket(v); ok {
			t.Fatalf("%v has a bucket", v)
		}
	}
	// The buckets tile the range: each starts where the one before ends.
	for i := 1; i < vmBuckets; i++ {
		prev, cur := vmRanges[i-1], vmRanges[i]
		if prev[strings.Index(prev, "...")+3:] != cur[:strings.Index(cur, "...")] {
			t.Fatalf("bucket %d %q does not follow %q", i, cur, prev)
		}
	}
}

func TestRollupMode(t *testing.T) {
	f := func(values []float64, prev, want float64) {
		t.Helper()
		in := slices.Clone(values)
		got := rollupMode(&rollupArg{values: values, prevValue: prev})
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%v prev %v: %v, want %v", values, prev, got, want)
		}
		if !slices.Equal(in, values) {
			t.Fatalf("%v modified to %v", in, values)
		}
	}
	nan := math.NaN()
	f([]float64{3, 1, 2}, nan, 1) // all once: the smallest
	f([]float64{2, 2, 1}, nan, 2)
	f([]float64{1, 2, 2, 3, 3}, nan, 2) // ties: the smallest
	// The previous sample starts the count: it wins over values seen once
	// each, and adds to a run of its own value.
	f([]float64{1, 2, 3}, 5, 5)
	f([]float64{1, 2, 2, 3}, 1, 1)
	f(nil, 7, 7)
	f(nil, nan, nan)
}

func TestSampleTransforms(t *testing.T) {
	f := func(name string, fn func([]float64, []int64), vs []float64, ts []int64, want []float64) {
		t.Helper()
		got := slices.Clone(vs)
		fn(got, ts)
		if !slices.Equal(got, want) {
			t.Fatalf("%s(%v): %v, want %v", name, vs, got, want)
		}
	}
	ts := []int64{0, 1000, 2000, 4000}
	// A drop to near zero restarts the counter; a drop of less than an
	// eighth is taken as that much lost.
	f("removeCounterResets", removeCounterResets, []float64{5, 10, 2, 4}, ts, []float64{5, 10, 12, 14})
	f("removeCounterResets", removeCounterResets, []float64{100, 95, 96, 97}, ts, []float64{100, 100, 101, 102})
	f("deltaValues", deltaValues, []float64{1, 3, 6, 10}, ts, []float64{2, 3, 4, 4})
	f("derivValues", derivValues, []float64{1, 3, 6, 10}, ts, []float64{2, 3, 2, 2})
	f("intervalValues", intervalValues, []float64{9, 9, 9, 9}, ts, []float64{1, 1, 1, 2})
	f("deltaValues", deltaValues, nil, nil, nil)
}

func TestScrapeInterval(t *testing.T) {
	f := func(ts []int64, def, want int64) {
		t.Helper()
		if got := scrapeInterval(ts, def); got != want {
			t.Fatalf("%v: %d, want %d", ts, got, want)
		}
	}
	f(nil, 60000, 60000)
	f([]int64{5}, 60000, 60000)
	f([]int64{0, 10000, 20000, 30000}, 60000, 10000)
	// The 0.6 quantile: one long gap does not move it.
	f([]int64{0, 10000, 20000, 30000, 40000, 300000}, 60000, 10000)
	f([]int64{0, 0, 0}, 60000, 60000)
	if got := maxPrevInterval(10000); got != 15000 {
		t.Fatalf("maxPrevInterval(10s) = %d, want 15000", got)
	}
	if got := maxPrevInterval(250); got != 1250 {
		t.Fatalf("maxPrevInterval(250ms) = %d, want 1250", got)
	}
}
