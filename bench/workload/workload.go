// Package workload owns the deterministic synthetic data that Peakline's
// tests, `go test -bench` runs and the bench CLI share, generated from a
// seed so that every run of every tool sees the same data: named shapes of
// resource samples (unix-millisecond timestamps and values, this file) and
// whole synthetic jobs built from them (job.go).
//
// It does not own real data (the ansible-runner trees under testdata are the
// importers'), measuring (bench/fidelity and the benchmarks do that) or any
// I/O; it imports the standard library only.
package workload

import (
	"math"
	"math/rand/v2"
)

// Start is the timestamp of the first sample of every shape, unix ms.
const Start int64 = 1796009960000

// Interval is the nominal spacing between samples, ms: what ansible-runner's
// resource profiling writes at its default 0.25 s poll interval. Each step
// is jittered by up to ±Jitter ms.
const (
	Interval int64 = 250
	Jitter   int64 = 20
)

// Shape names. Shapes lists those with finite values only, the matrix of the
// benchmarks and the fidelity report; NaN is for tests only.
const (
	RandomWalk = "randomwalk" // Gaussian random walk, like a CPU trace
	Spiky      = "spiky"      // low noisy baseline with rare tall spikes
	Step       = "step"       // piecewise-constant levels with a little noise
	Staircase  = "staircase"  // memory growing in steps, freed now and then
	Gaps       = "gaps"       // random walk with holes of minutes in time
	Constant   = "constant"   // one value throughout
	NaN        = "nan"        // random walk with a few NaN values, first sample included
)

// Shapes lists the finite shapes accepted by Shape, in report order.
var Shapes = []string{RandomWalk, Spiky, Step, Staircase, Gaps, Constant}

// Shape returns n samples of the named shape generated from seed: strictly
// increasing unix-ms timestamps from Start, about Interval apart, and their
// values. The same name, n and seed always give the same series. It returns
// nil, nil for an unknown name or n <= 0. The caller owns the slices.
func Shape(name string, n int, seed int64) (ts []int64, vs []float64) {
	if n <= 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	ts = make([]int64, n)
	vs = make([]float64, n)
	gap := 0.0
	if name == Gaps {
		gap = 0.0005 // one hole per ~2000 samples
	}
	t := Start
	for i := range ts {
		ts[i] = t
		t += Interval - Jitter + rng.Int64N(2*Jitter+1)
		if gap > 0 && rng.Float64() < gap {
			t += 60_000 + rng.Int64N(600_000)
		}
	}
	switch name {
	case RandomWalk, Gaps:
		walk(vs, rng)
	case NaN:
		walk(vs, rng)
		vs[0] = math.NaN()
		for i := 0; i < 1+n/500; i++ {
			vs[rng.IntN(n)] = math.NaN()
		}
	case Spiky:
		for i := range vs {
			v := 10 + 2*rng.NormFloat64()
			if rng.Float64() < 0.001 {
				v += 50 + 100*rng.Float64()
			}
			vs[i] = v
		}
	case Step:
		level := 50.0
		for i := range vs {
			if rng.Float64() < 0.002 {
				level = 100 * rng.Float64()
			}
			vs[i] = level + 0.5*rng.NormFloat64()
		}
	case Staircase:
		level := 64 << 20
		for i := range vs {
			switch r := rng.Float64(); {
			case r < 0.0002:
				level = 64 << 20
			case r < 0.003:
				level += (1 + rng.IntN(16)) << 20
			}
			vs[i] = float64(level)
		}
	case Constant:
		for i := range vs {
			vs[i] = 42
		}
	default:
		return nil, nil
	}
	return ts, vs
}

// walk fills vs with a Gaussian random walk from 50.
func walk(vs []float64, rng *rand.Rand) {
	v := 50.0
	for i := range vs {
		v += rng.NormFloat64()
		vs[i] = v
	}
}
