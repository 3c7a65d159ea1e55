package workload

import (
	"math"
	"slices"
	"testing"
)

func TestShape(t *testing.T) {
	f := func(name string, n int) {
		t.Helper()
		ts, vs := Shape(name, n, 1)
		if len(ts) != n || len(vs) != n {
			t.Fatalf("Shape(%q, %d): got %d timestamps, %d values", name, n, len(ts), len(vs))
		}
		if ts[0] != Start {
			t.Fatalf("Shape(%q): first timestamp %d, want %d", name, ts[0], Start)
		}
		for i := 1; i < n; i++ {
			if d := ts[i] - ts[i-1]; d < Interval-Jitter {
				t.Fatalf("Shape(%q): step %d at %d below %d ms", name, d, i, Interval-Jitter)
			}
		}
		nans := 0
		for _, v := range vs {
			if math.IsNaN(v) {
				nans++
			} else if math.IsInf(v, 0) {
				t.Fatalf("Shape(%q): infinite value", name)
			}
		}
		if (name == NaN) != (nans > 0) {
			t.Fatalf("Shape(%q): %d NaN values", name, nans)
		}
		ts2, vs2 := Shape(name, n, 1)
		if !slices.Equal(ts, ts2) || !slices.EqualFunc(vs, vs2, func(a, b float64) bool {
			return a == b || math.IsNaN(a) && math.IsNaN(b)
		}) {
			t.Fatalf("Shape(%q): not deterministic", name)
		}
	}
	for _, name := range append(slices.Clone(Shapes), NaN) {
		f(name, 1)
		f(name, 10_000)
	}
	if ts, vs := Shape("nope", 10, 1); ts != nil || vs != nil {
		t.Fatalf("unknown shape: got %d samples, want nil", len(ts))
	}
	ts, _ := Shape(Gaps, 10_000, 1)
	holes := 0
	for i := 1; i < len(ts); i++ {
		if ts[i]-ts[i-1] > 60_000 {
			holes++
		}
	}
	if holes == 0 {
		t.Fatalf("Shape(%q): no holes", Gaps)
	}
}
