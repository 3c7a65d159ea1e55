package bench

import (
	"math"
	"runtime"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0..100) of xs by the nearest
// rank, NaN for none. xs is not modified.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// durationsMs converts durations to milliseconds.
func durationsMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// loopCost is the per-call cost of a function measured in a loop.
type loopCost struct {
	ns, allocs, bytes float64
	calls             int
}

// measureLoop calls f until at least minDur has passed (at least once)
// and returns its cost per call. Allocations come from runtime.MemStats
// before and after the loop, as testing.B does.
func measureLoop(minDur time.Duration, f func()) loopCost {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	n := 0
	batch := 1
	for {
		for range batch {
			f()
		}
		n += batch
		el := time.Since(start)
		if el >= minDur {
			break
		}
		// Grow the batch so the clock is read rarely for fast calls.
		if el < minDur/10 {
			batch *= 2
		}
	}
	el := time.Since(start)
	runtime.ReadMemStats(&after)
	return loopCost{
		ns:     float64(el.Nanoseconds()) / float64(n),
		allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
		calls:  n,
	}
}

// bestOf keeps the cheapest of several rounds: on a shared machine the
// minimum is the figure least disturbed by other work.
func bestOf(a, b loopCost) loopCost {
	if a.calls == 0 || b.ns < a.ns {
		return b
	}
	return a
}
