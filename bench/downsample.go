package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	lttb "github.com/dgryski/go-lttb"
	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/fidelity"
	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/downsample"
)

const peerLTTB = "go-lttb"

type downsampleFlags struct {
	common
	sizes, points, shapes string
	minTime               time.Duration
	rounds                int
}

func downsampleCommand() *cobra.Command {
	var f downsampleFlags
	cmd := &cobra.Command{
		Use:   "downsample",
		Short: "Each downsampling algorithm vs github.com/dgryski/go-lttb: ns/point, allocations, fidelity",
		Long: `downsample runs every algorithm of the graph (downsample.Names()) and the
peer github.com/dgryski/go-lttb on the same series (bench/workload shapes)
and reports per shape, input size and points out: ns per input point and
allocations per call (the cheapest of --rounds rounds, each calling the
algorithm for at least --min-time, peer and algorithms interleaved), and
the fidelity of the drawn line (bench/fidelity: share of wrong pixels
and DSSIM against the raw line on an 800x250 canvas).

go-lttb is timed on its own input, a []Point built before the clock starts;
Peakline's algorithms read the columns the store returns and write indices
into a reused slice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDownsample(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.sizes, "sizes", "1e4,1e5,1e6", "input sizes (samples per series)")
	fl.StringVar(&f.points, "points", "200,1000,4000", "points out")
	fl.StringVar(&f.shapes, "shapes", strings.Join(workload.Shapes, ","), "series shapes (bench/workload)")
	fl.DurationVar(&f.minTime, "min-time", 100*time.Millisecond, "least time each algorithm runs per round")
	fl.IntVar(&f.rounds, "rounds", 3, "rounds; the cheapest is reported")
	return cmd
}

func runDownsample(cmd *cobra.Command, f *downsampleFlags) error {
	started := time.Now()
	if f.quick {
		if !cmd.Flags().Changed("sizes") {
			f.sizes = "1e4"
		}
		if !cmd.Flags().Changed("points") {
			f.points = "200,1000"
		}
		if !cmd.Flags().Changed("min-time") {
			f.minTime = 5 * time.Millisecond
		}
		if !cmd.Flags().Changed("rounds") {
			f.rounds = 1
		}
	}
	sizes, err := parseSizes("sizes", f.sizes)
	if err != nil {
		return err
	}
	points, err := parseSizes("points", f.points)
	if err != nil {
		return err
	}
	shapes := strings.Split(f.shapes, ",")
	for _, s := range shapes {
		if !slices.Contains(workload.Shapes, s) {
			return usagef("--shapes: %q is not one of %s", s, strings.Join(workload.Shapes, ", "))
		}
	}
	if f.rounds < 1 {
		return usagef("--rounds: must be at least 1, got %d", f.rounds)
	}
	algos := downsample.Names()
	r := &Report{Title: "downsample: Peakline's algorithms vs go-lttb"}
	bar := f.bar(cmd, len(sizes)*len(shapes)*len(points), "downsample")
	// ns/point per algorithm and size at the middle n, for the plot.
	speed := map[string][]float64{}
	plotN := points[len(points)/2]
	var pictures []Chart
	for _, size := range sizes {
		sums := map[string]float64{}
		for _, shape := range shapes {
			ts, vs := workload.Shape(shape, size, f.seed)
			pts := make([]lttb.Point[float64], len(ts))
			for i := range ts {
				pts[i] = lttb.Point[float64]{X: float64(ts[i]), Y: vs[i]}
			}
			for _, n := range points {
				name := fmt.Sprintf("%s/%s/n=%d", shape, workload.SizeName(size), n)
				res, err := downsampleCell(ts, vs, pts, n, algos, f.minTime, f.rounds)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				peer := res[peerLTTB]
				for _, a := range algos {
					m := res[a]
					r.Add(
						cost(name, a, peerLTTB, "time per input point", "ns/point, lower is better", m.cost.ns/float64(size), peer.cost.ns/float64(size)),
						cost(name, a, peerLTTB, "allocations per call", "allocs/op, lower is better", m.cost.allocs, peer.cost.allocs),
						cost(name, a, peerLTTB, "bytes allocated per call", "B/op, lower is better", m.cost.bytes, peer.cost.bytes),
						cost(name, a, peerLTTB, "pixel error", "% of 800x250 pixels wrong, lower is better", 100*m.pixErr, 100*peer.pixErr),
						cost(name, a, peerLTTB, "DSSIM", "structural dissimilarity, lower is better", m.dssim, peer.dssim),
					)
					if n == plotN {
						sums[a] += m.cost.ns / float64(size)
					}
				}
				if n == plotN {
					sums[peerLTTB] += peer.cost.ns / float64(size)
				}
				if size == sizes[len(sizes)-1] && n == points[0] {
					pictures = append(pictures, pictureChart(name, ts, vs, res))
				}
				bar.Add(1)
			}
		}
		for a, s := range sums {
			speed[a] = append(speed[a], s/float64(len(shapes)))
		}
	}
	bar.Finish()
	r.Measurements = append(downsampleSummary(r.Measurements, sizes, algos), r.Measurements...)
	if cores := runtime.GOMAXPROCS(0); cores > 1 {
		shape := shapes[0]
		if slices.Contains(shapes, "randomwalk") {
			shape = "randomwalk"
		}
		ms, err := downsampleCores(shape, sizes[len(sizes)-1], plotN, cores, f)
		if err != nil {
			return err
		}
		r.Measurements = append(r.Measurements, ms...)
		r.Note("%s: the algorithms that split large inputs across goroutines, timed with GOMAXPROCS=1 and =%d in interleaved rounds; speedup is how much faster %d cores are.", ms[0].Workload, cores, cores)
	}
	xs := make([]float64, len(sizes))
	for i, s := range sizes {
		xs[i] = float64(s)
	}
	chart := Chart{Title: fmt.Sprintf("time per input point at n=%d (mean of shapes)", plotN), XLabel: "input samples", YLabel: "ns/point", LogX: true, LogY: true}
	for _, a := range append(slices.Clone(algos), peerLTTB) {
		chart.Lines = append(chart.Lines, Line{Name: a, X: xs, Y: speed[a], Marks: true, Dashed: a == peerLTTB})
	}
	r.Charts = append([]Chart{chart}, pictures...)
	r.Note("speedup = go-lttb's figure / the algorithm's; for pixel error and DSSIM above 1 means a more faithful line than go-lttb's.")
	r.Note("go-lttb is the same algorithm as lttb (Steinarsson's), so their fidelity should match; it allocates its output, Peakline writes indices into a reused slice.")
	r.Note("minmax and m4 split inputs of 65,536 samples or more across GOMAXPROCS goroutines (their allocations are those goroutines).")
	return f.finish(cmd, r, started)
}

// splitAlgos are the algorithms that scan large inputs in parallel.
var splitAlgos = []string{"minmax", "m4", "minmaxlttb"}

// downsampleCores times splitAlgos on one series with GOMAXPROCS=1 and
// =cores, rounds interleaved, the cheapest round of each kept.
func downsampleCores(shape string, size, n, cores int, f *downsampleFlags) ([]Measurement, error) {
	ts, vs := workload.Shape(shape, size, f.seed)
	name := fmt.Sprintf("cores/%s/%s/n=%d", shape, workload.SizeName(size), n)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	dst := make([]int, 0, n*(1+downsample.MinMaxLTTBRatio))
	var out []Measurement
	for _, a := range splitAlgos {
		var one, all loopCost
		var err error
		for range f.rounds {
			runtime.GOMAXPROCS(1)
			one = bestOf(one, measureLoop(f.minTime, func() { dst, err = downsample.Select(dst[:0], a, ts, vs, n, nil) }))
			runtime.GOMAXPROCS(cores)
			all = bestOf(all, measureLoop(f.minTime, func() { dst, err = downsample.Select(dst[:0], a, ts, vs, n, nil) }))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, a, err)
			}
		}
		out = append(out, cost(name, fmt.Sprintf("%s on %d cores", a, cores), a+" on 1 core",
			"time per input point, 1 core vs all", "ns/point, lower is better", all.ns/float64(size), one.ns/float64(size)))
	}
	return out, nil
}

// cellResult is one algorithm on one series at one n.
type cellResult struct {
	cost          loopCost
	idx           []int
	pixErr, dssim float64
}

// downsampleCell times every algorithm and the peer on one series, in
// interleaved rounds, and measures the fidelity of what each picked.
func downsampleCell(ts []int64, vs []float64, pts []lttb.Point[float64], n int, algos []string, minTime time.Duration, rounds int) (map[string]*cellResult, error) {
	res := map[string]*cellResult{peerLTTB: {}}
	for _, a := range algos {
		res[a] = &cellResult{}
	}
	var out []lttb.Point[float64]
	dst := make([]int, 0, n+8)
	for range rounds {
		res[peerLTTB].cost = bestOf(res[peerLTTB].cost, measureLoop(minTime, func() { out = lttb.LTTB(pts, n) }))
		for _, a := range algos {
			var err error
			c := measureLoop(minTime, func() { dst, err = downsample.Select(dst[:0], a, ts, vs, n, nil) })
			if err != nil {
				return nil, err
			}
			res[a].cost = bestOf(res[a].cost, c)
			res[a].idx = slices.Clone(dst)
		}
	}
	// Fail loudly on empty output: the work must not be optimised away.
	if len(out) == 0 || len(out) > max(n, 3) {
		return nil, fmt.Errorf("go-lttb returned %d points for n=%d", len(out), n)
	}
	res[peerLTTB].idx = pointIndices(ts, out)
	for name, c := range res {
		if len(c.idx) == 0 || len(c.idx) > n {
			return nil, fmt.Errorf("%s returned %d points for n=%d", name, len(c.idx), n)
		}
		c.pixErr, c.dssim = fidelity.Measure(ts, vs, c.idx)
	}
	return res, nil
}

// pointIndices maps go-lttb's output points back to sample indices by
// their x (the timestamp; timestamps strictly increase).
func pointIndices(ts []int64, pts []lttb.Point[float64]) []int {
	idx := make([]int, 0, len(pts))
	for _, p := range pts {
		if i, ok := slices.BinarySearch(ts, int64(p.X)); ok {
			idx = append(idx, i)
		}
	}
	return idx
}

// pictureChart draws the raw series (its per-pixel envelope) and what
// the default algorithm and go-lttb kept of it.
func pictureChart(name string, ts []int64, vs []float64, res map[string]*cellResult) Chart {
	t0 := float64(ts[0])
	hours := func(x []float64) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = (v - t0) / 3.6e6
		}
		return out
	}
	ex, ey := envelope(ts, vs, fidelity.Width)
	c := Chart{Title: name, XLabel: "hours", YLabel: "value", Lines: []Line{{Name: "raw (" + strconv.Itoa(len(ts)) + " samples)", X: hours(ex), Y: ey, Thin: true}}}
	for _, a := range []string{downsample.Default, peerLTTB} {
		idx := res[a].idx
		x, y := make([]float64, len(idx)), make([]float64, len(idx))
		for i, k := range idx {
			x[i], y[i] = float64(ts[k]), vs[k]
		}
		c.Lines = append(c.Lines, Line{Name: fmt.Sprintf("%s (%.2f%% px wrong)", a, 100*res[a].pixErr), X: hours(x), Y: y, Dashed: a == peerLTTB})
	}
	return c
}

// downsampleSummary condenses the matrix per algorithm and input size:
// the geometric mean over shapes and n of time per point and of its
// speedup, and the mean pixel error of the algorithm and of go-lttb.
func downsampleSummary(ms []Measurement, sizes []int, algos []string) []Measurement {
	var out []Measurement
	for _, size := range sizes {
		w := "all shapes and n/" + workload.SizeName(size)
		for _, a := range algos {
			var lt, lpt, pix, ppix float64
			var n, np int
			for _, m := range ms {
				if m.Subject != a || !strings.Contains(m.Workload, "/"+workload.SizeName(size)+"/") {
					continue
				}
				switch m.Metric {
				case "time per input point":
					lt += math.Log(m.Value)
					lpt += math.Log(m.PeerValue)
					n++
				case "pixel error":
					pix += m.Value
					ppix += m.PeerValue
					np++
				}
			}
			if n == 0 || np == 0 {
				continue
			}
			out = append(out,
				cost(w, a, peerLTTB, "summary: time per input point", "ns/point, geometric mean over shapes and n, lower is better", math.Exp(lt/float64(n)), math.Exp(lpt/float64(n))),
				cost(w, a, peerLTTB, "summary: pixel error", "% of pixels wrong, mean over shapes and n, lower is better", pix/float64(np), ppix/float64(np)))
		}
	}
	return out
}
