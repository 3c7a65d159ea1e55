package downsample_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/downsample"
)

// algorithms runs each algorithm through its own exported function.
var algorithms = map[string]func(dst []int, ts []int64, vs []float64, n int) []int{
	"lttb": downsample.LTTB,
	"minmaxlttb": func(dst []int, ts []int64, vs []float64, n int) []int {
		return downsample.MinMaxLTTB(dst, ts, vs, n, downsample.MinMaxLTTBRatio)
	},
	"m4":     downsample.M4,
	"minmax": downsample.MinMax,
	"peaklttb": func(dst []int, ts []int64, vs []float64, n int) []int {
		return downsample.PeakLTTB(dst, ts, vs, n, nil)
	},
}

// checkSelection fails t unless got is a valid selection of at most n
// samples of ts/vs by the algorithm name honouring keep (valid per Select's
// contract): the invariants every caller relies on.
func checkSelection(t testing.TB, name string, ts []int64, vs []float64, n int, keep, got []int) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, %d samples, n %d, keep %v: "+format, append([]any{name, len(ts), n, keep}, args...)...)
	}
	if len(got) > max(n, 0) {
		fail("%d indices, more than n", len(got))
	}
	for i, g := range got {
		if g < 0 || g >= len(ts) {
			fail("index %d out of range", g)
		}
		if i > 0 && g <= got[i-1] {
			fail("indices not strictly increasing at %d: %d after %d", i, g, got[i-1])
		}
		if !isFinite(vs[g]) {
			fail("index %d holds non-finite %v", g, vs[g])
		}
	}
	var finite []int
	for i, v := range vs {
		if isFinite(v) {
			finite = append(finite, i)
		}
	}
	if n >= len(ts) {
		if !slices.Equal(got, finite) {
			fail("n >= len: got %d indices, want all %d finite ones", len(got), len(finite))
		}
		return
	}
	kept := 0
	for _, k := range keep {
		if isFinite(vs[k]) {
			kept++
			if _, ok := slices.BinarySearch(got, k); !ok {
				fail("keep index %d missing", k)
			}
		}
	}
	if len(finite) == 0 {
		if len(got) != 0 {
			fail("no finite sample, got %v", got)
		}
		return
	}
	lo, hi := finite[0], finite[len(finite)-1]
	if n >= kept+1 && got[0] != lo {
		fail("first finite sample %d missing, got starts %v", lo, got[:min(len(got), 5)])
	}
	if n >= kept+2 && got[len(got)-1] != hi {
		fail("last finite sample %d missing, got ends %v", hi, got[max(0, len(got)-5):])
	}
	if name == "peaklttb" && n >= kept+4 {
		vMin, vMax := math.Inf(1), math.Inf(-1)
		for _, i := range finite {
			vMin, vMax = min(vMin, vs[i]), max(vMax, vs[i])
		}
		gMin, gMax := math.Inf(1), math.Inf(-1)
		for _, i := range got {
			gMin, gMax = min(gMin, vs[i]), max(gMax, vs[i])
		}
		if gMin != vMin || gMax != vMax {
			fail("range [%v, %v], want the global [%v, %v]", gMin, gMax, vMin, vMax)
		}
	}
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// runAll runs every algorithm through Select and its own function on
// ts/vs and checks the invariants and that the inputs are left alone.
func runAll(t testing.TB, ts []int64, vs []float64, n int, keep []int) {
	t.Helper()
	ts0, vs0, keep0 := slices.Clone(ts), slices.Clone(vs), slices.Clone(keep)
	prefix := []int{-5, -6}
	for _, name := range downsample.Names() {
		got, err := downsample.Select(slices.Clone(prefix), name, ts, vs, n, keep)
		if err != nil {
			t.Fatalf("Select(%s, %d samples, n %d): %v", name, len(ts), n, err)
		}
		if !slices.Equal(got[:2], prefix) {
			t.Fatalf("Select(%s) overwrote dst's prefix: %v", name, got[:2])
		}
		checkSelection(t, name, ts, vs, n, keep, got[2:])
		if len(keep) == 0 {
			own := algorithms[name](nil, ts, vs, n)
			if !slices.Equal(own, got[2:]) {
				t.Fatalf("%s: Select and the function disagree:\n%v\n%v", name, got[2:], own)
			}
		}
	}
	if !slices.Equal(ts, ts0) || !slices.EqualFunc(vs, vs0, sameFloat) || !slices.Equal(keep, keep0) {
		t.Fatalf("inputs modified")
	}
}

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// randomKeep returns up to count ascending unique indices below size.
func randomKeep(rng *rand.Rand, size, count int) []int {
	if size == 0 || count <= 0 {
		return nil
	}
	keep := make([]int, 0, count)
	for range count {
		keep = append(keep, rng.IntN(size))
	}
	slices.Sort(keep)
	return slices.Compact(keep)
}

func TestInvariantsShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, shape := range append(slices.Clone(workload.Shapes), workload.NaN) {
		for _, size := range []int{0, 1, 2, 3, 5, 17, 1000, 20_000} {
			ts, vs := workload.Shape(shape, size, int64(size))
			for _, n := range []int{-1, 0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 16, 100, 999, 1000, 1001, 4000, 30_000} {
				runAll(t, ts, vs, n, nil)
				if n >= 2 {
					runAll(t, ts, vs, n, randomKeep(rng, size, rng.IntN(n/2+1)))
				}
			}
		}
	}
}

func TestInvariantsAwkward(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	f := func(ts []int64, vs []float64) {
		t.Helper()
		for n := -1; n <= len(ts)+1; n++ {
			runAll(t, ts, vs, n, nil)
			if n >= 2 && len(ts) > 0 {
				runAll(t, ts, vs, n, []int{len(ts) / 2})
			}
		}
	}
	f(nil, nil)
	f([]int64{5}, []float64{nan})
	f([]int64{5, 5, 5, 5, 5, 5}, []float64{1, 2, 3, 2, 1, 0})             // one timestamp
	f([]int64{1, 1, 2, 2, 3, 3, 4, 4}, []float64{1, 9, 2, 8, 3, 7, 4, 6}) // pairs
	f([]int64{1, 2, 3, 4, 5, 6, 7, 8}, []float64{nan, inf, -inf, nan, 1, nan, -inf, inf})
	f([]int64{1, 2, 3, 4, 5, 6, 7, 8}, []float64{nan, nan, nan, nan, nan, nan, nan, nan})
	f([]int64{1, 2, 3, 4, 5, 6, 7, 8}, []float64{inf, inf, inf, 3, inf, inf, inf, inf})
	big := math.MaxFloat64
	f([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{big, -big, big, -big, big, big, -big, -big, big})
	f([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64, math.MaxInt64, 3, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	f([]int64{9, 8, 7, 6, 5, 4, 3, 2, 1}, []float64{1, 5, 2, 6, 3, 7, 4, 8, 0}) // unsorted

	// Long NaN runs spanning many buckets, big enough for the parallel path.
	ts, vs := workload.Shape(workload.RandomWalk, 300_000, 9)
	for i := 1000; i < 200_000; i++ {
		vs[i] = nan
	}
	vs[250_000] = inf
	vs[250_001] = -inf
	for _, n := range []int{3, 4, 10, 1000} {
		runAll(t, ts, vs, n, nil)
		runAll(t, ts, vs, n, []int{5, 250_002}[:min(2, n/2)])
	}
}

// TestParallelMatchesSerial checks that MinMax and M4 pick the same samples
// whether the scan is split across goroutines or not.
func TestParallelMatchesSerial(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, shape := range workload.Shapes {
		ts, vs := workload.Shape(shape, 1_000_003, 7)
		for _, n := range []int{4, 10, 1000, 4001} {
			for _, name := range []string{"minmax", "m4", "minmaxlttb", "peaklttb"} {
				runtime.GOMAXPROCS(1)
				want := algorithms[name](nil, ts, vs, n)
				for _, procs := range []int{2, 3, 4} {
					runtime.GOMAXPROCS(procs)
					got := algorithms[name](nil, ts, vs, n)
					if !slices.Equal(got, want) {
						t.Fatalf("%s %s n %d: %d procs picked %d indices differently from 1", name, shape, n, procs, len(got))
					}
				}
			}
		}
	}
}
