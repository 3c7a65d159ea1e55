package downsample_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/downsample"
)

func TestNames(t *testing.T) {
	names := downsample.Names()
	if names[0] != downsample.Default {
		t.Fatalf("Names()[0] = %q, want the default %q", names[0], downsample.Default)
	}
	for _, want := range []string{"lttb", "minmaxlttb", "m4", "minmax", "peaklttb"} {
		if !slices.Contains(names, want) {
			t.Fatalf("Names() = %v, missing %q", names, want)
		}
	}
	names[0] = "changed"
	if downsample.Names()[0] != downsample.Default {
		t.Fatalf("Names() returns shared storage")
	}
}

func TestSelectErrors(t *testing.T) {
	ts := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	vs := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	f := func(name string, ts []int64, vs []float64, n int, keep []int, wantErr string) {
		t.Helper()
		dst := []int{99}
		got, err := downsample.Select(dst, name, ts, vs, n, keep)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Select(%q, n %d, keep %v): error %v, want one containing %q", name, n, keep, err, wantErr)
		}
		if !slices.Equal(got, dst) {
			t.Fatalf("Select(%q) on error returned %v, want dst unchanged", name, got)
		}
	}
	f("bogus", ts, vs, 4, nil, `unknown downsampling algorithm "bogus"`)
	f("LTTB", ts, vs, 4, nil, "want one of")
	f("bogus", ts, vs, 0, nil, "unknown")
	f("lttb", ts, vs[:7], 4, nil, "8 timestamps but 7 values")
	f("lttb", ts, vs, 4, []int{1, 2, 3}, "at most n/2 = 2")
	f("lttb", ts, vs, 4, []int{8}, "keep[0] = 8 is outside")
	f("lttb", ts, vs, 4, []int{-1}, "keep[0] = -1 is outside")
	f("m4", ts, vs, 6, []int{3, 3}, "ascending and unique")
	f("m4", ts, vs, 6, []int{3, 2}, "ascending and unique")

	if _, err := downsample.Select(nil, "nope", ts, vs, 4, nil); !errors.Is(err, downsample.ErrUnknownAlgorithm) {
		t.Fatalf("Select(nope): %v, want ErrUnknownAlgorithm", err)
	}
	got, err := downsample.Select(nil, "", ts, vs, 4, nil)
	want, _ := downsample.Select(nil, downsample.Default, ts, vs, 4, nil)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf(`Select("") = %v, %v; want the default's %v`, got, err, want)
	}
}

func TestSelectKeep(t *testing.T) {
	ts, vs := workload.Shape(workload.RandomWalk, 10_000, 3)
	nan := math.NaN()
	f := func(name string, n int, keep []int) {
		t.Helper()
		got, err := downsample.Select(nil, name, ts, vs, n, keep)
		if err != nil {
			t.Fatal(err)
		}
		checkSelection(t, name, ts, vs, n, keep, got)
	}
	for _, name := range downsample.Names() {
		f(name, 10, []int{1, 2, 3, 4, 5})
		f(name, 10, []int{0, 9999})
		f(name, 100, []int{5000})
		f(name, 1000, []int{17, 18, 19, 9998})
		f(name, 4, []int{0, 1})
		f(name, 3, []int{9998})
		f(name, 2, []int{5000})
	}
	// A keep entry on a NaN is dropped, not returned.
	vs = slices.Clone(vs)
	vs[5000] = nan
	for _, name := range downsample.Names() {
		got, err := downsample.Select(nil, name, ts, vs, 100, []int{4999, 5000, 5001})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got, 5000) || !slices.Contains(got, 4999) || !slices.Contains(got, 5001) {
			t.Fatalf("%s: keep around a NaN: got %v", name, got)
		}
	}
}

// TestLTTBMissesPeaks measures why the default is not plain LTTB: on random
// walks LTTB often drops the global max or min, PeakLTTB never does.
func TestLTTBMissesPeaks(t *testing.T) {
	const series = 500
	missed := map[string]int{}
	rng := rand.New(rand.NewPCG(11, 12))
	var dst []int
	for s := range series {
		ts, vs := workload.Shape(workload.RandomWalk, 2000+rng.IntN(20_000), int64(s))
		iMin, iMax := extremes(vs)
		for _, name := range downsample.Names() {
			var err error
			dst, err = downsample.Select(dst[:0], name, ts, vs, 200, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(dst, iMin) || !slices.Contains(dst, iMax) {
				missed[name]++
			}
		}
	}
	for _, name := range downsample.Names() {
		t.Logf("%-10s drops the global max or min in %5.1f%% of %d random walks (n 200)", name, 100*float64(missed[name])/series, series)
	}
	if missed[downsample.Default] != 0 {
		t.Fatalf("default %s dropped a global max or min in %d series", downsample.Default, missed[downsample.Default])
	}
	if missed["lttb"] < series/5 {
		t.Fatalf("lttb dropped a peak in only %d of %d series; the default's reason is gone", missed["lttb"], series)
	}
}

// TestReusedDstAllocatesNothing checks the allocation contract: with room
// in dst, LTTB, MinMaxLTTB, M4, MinMax (below the parallel threshold) and
// PeakLTTB (also when it adds a missed peak) allocate nothing.
func TestReusedDstAllocatesNothing(t *testing.T) {
	const n = 1000
	dst := make([]int, 0, n*(1+downsample.MinMaxLTTBRatio))
	added := 0
	for seed := range int64(6) {
		ts, vs := workload.Shape(workload.RandomWalk, 50_000, seed)
		l := downsample.LTTB(nil, ts, vs, n)
		_, iMax := extremes(vs)
		if !slices.ContainsFunc(l, func(i int) bool { return vs[i] == vs[iMax] }) {
			added++
		}
		for name, run := range map[string]func(){
			"lttb":       func() { dst = downsample.LTTB(dst[:0], ts, vs, n) },
			"minmaxlttb": func() { dst = downsample.MinMaxLTTB(dst[:0], ts, vs, n, downsample.MinMaxLTTBRatio) },
			"m4":         func() { dst = downsample.M4(dst[:0], ts, vs, n) },
			"minmax":     func() { dst = downsample.MinMax(dst[:0], ts, vs, n) },
			"peaklttb":   func() { dst = downsample.PeakLTTB(dst[:0], ts, vs, n, nil) },
		} {
			if a := testing.AllocsPerRun(5, run); a != 0 {
				t.Errorf("seed %d: %s allocated %v times per call with a reused dst", seed, name, a)
			}
		}
	}
	if added == 0 {
		t.Fatal("LTTB kept the max in every series: PeakLTTB's adding path went untested")
	}
}

// extremes returns the indices of the first minimum and the first maximum
// of finite, non-empty vs.
func extremes(vs []float64) (iMin, iMax int) {
	for i, v := range vs {
		if v < vs[iMin] {
			iMin = i
		}
		if v > vs[iMax] {
			iMax = i
		}
	}
	return iMin, iMax
}
