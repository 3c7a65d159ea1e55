package query

import (
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// Range transforms: each gets one series over the whole query range (the
// subquery wholeRange builds) and the time of the step being evaluated,
// and answers VictoriaMetrics' result at that step, or nothing. NaN
// points count as missing, as in VictoriaMetrics.

// rangeSeries is one series over the query range and the step asked for.
type rangeSeries struct {
	*rangeData
	at     int   // index of the point at the step, or -1
	before int   // number of points at or before the step
	stepMs int64 // time of the step
}

// rangeData is one series over the query range, with what the functions
// computed from it so far: the engine calls a function once per step
// with the same series (the subquery is pinned with @), so the points
// are read once and a median sorted once, not at every step.
type rangeData struct {
	ts    []int64   // times of the non-NaN points, ascending, ms
	vs    []float64 // their values
	gapMs int64     // the grid's step: the smallest gap between points
	memo  map[string][]float64
}

// computed returns what f computes from the series, once per name.
func (d *rangeData) computed(name string, f func() []float64) []float64 {
	if v, ok := d.memo[name]; ok {
		return v
	}
	v := f()
	d.memo[name] = v
	return v
}

// one is computed for a single number.
func (d *rangeData) one(name string, f func() float64) float64 {
	return d.computed(name, func() []float64 { return []float64{f()} })[0]
}

// rangeFunc answers the value at the step, ok false for none. params
// are the scalar arguments in order.
type rangeFunc func(s *rangeSeries, params []float64) (float64, bool)

// seriesMemo keeps the rangeData of the series the range transforms saw
// last, so that the steps after the first find it: keyed by the matrix
// argument the engine built for one evaluation (held, so its address
// names that evaluation only), the series' labels and its length. It is
// small and shared by all queries; a query that misses recomputes.
var seriesMemo struct {
	sync.Mutex
	next    int
	entries [16]struct {
		arg  parser.Expr
		hash uint64
		n    int
		data *rangeData
	}
}

// seriesData returns the rangeData of series m[0] of the matrix argument
// arg, from seriesMemo or read now. The caller holds seriesMemo.
func seriesData(arg parser.Expr, m promql.Matrix) *rangeData {
	pts := m[0].Floats
	hash := m[0].Metric.Hash()
	for i := range seriesMemo.entries {
		e := &seriesMemo.entries[i]
		if e.arg == arg && e.hash == hash && e.n == len(pts) && e.data != nil {
			return e.data
		}
	}
	d := &rangeData{gapMs: math.MaxInt64, memo: map[string][]float64{}}
	// A point stands at the step when nothing of the grid lies between
	// them: the grid is the subquery's, whose step is the smallest gap
	// between points (with one point, only its own time matches).
	for i := 1; i < len(pts); i++ {
		d.gapMs = min(d.gapMs, pts[i].T-pts[i-1].T)
	}
	if len(pts) < 2 {
		d.gapMs = 1
	}
	for _, p := range pts {
		if !math.IsNaN(p.F) {
			d.ts = append(d.ts, p.T)
			d.vs = append(d.vs, p.F)
		}
	}
	e := &seriesMemo.entries[seriesMemo.next]
	seriesMemo.next = (seriesMemo.next + 1) % len(seriesMemo.entries)
	e.arg, e.hash, e.n, e.data = arg, hash, len(pts), d
	return d
}

// wholeRange adapts f to the engine: vals hold the scalar arguments (the
// engine leaves the matrix out), m the one series.
func wholeRange(f rangeFunc) promql.FunctionCall {
	return func(vals []promql.Vector, m promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		if len(m) == 0 || len(m[0].Floats) == 0 {
			return enh.Out, nil
		}
		var arg parser.Expr
		for _, a := range args {
			if _, ok := a.(*parser.MatrixSelector); ok {
				arg = a
			}
		}
		params := make([]float64, len(vals))
		for i := range vals {
			params[i] = scalarArg(vals, i)
		}
		seriesMemo.Lock()
		defer seriesMemo.Unlock()
		s := rangeSeries{rangeData: seriesData(arg, m), at: -1, stepMs: enh.Ts}
		if len(s.vs) == 0 {
			return enh.Out, nil
		}
		s.before, _ = slices.BinarySearch(s.ts, enh.Ts+1)
		if i := s.before - 1; i >= 0 && (s.ts[i] == enh.Ts || enh.Ts-s.ts[i] < s.gapMs) {
			s.at = i
		}
		v, ok := f(&s, params)
		if !ok || math.IsNaN(v) {
			return enh.Out, nil
		}
		return append(enh.Out, promql.Sample{F: v}), nil
	}
}

// everywhere answers agg over all points at every step, computed once
// per series and parameters.
func everywhere(name string, agg func(vs []float64, params []float64) float64) rangeFunc {
	return func(s *rangeSeries, params []float64) (float64, bool) {
		return s.one(paramsKey(name, params), func() float64 { return agg(s.vs, params) }), true
	}
}

// paramsKey names a computation with its parameters.
func paramsKey(name string, params []float64) string {
	b := []byte(name)
	for _, p := range params {
		b = append(b, ' ')
		b = strconv.AppendFloat(b, p, 'g', -1, 64)
	}
	return string(b)
}

// atPoint answers f of the point at the step, where there is one.
func atPoint(f func(s *rangeSeries, v float64, params []float64) (float64, bool)) rangeFunc {
	return func(s *rangeSeries, params []float64) (float64, bool) {
		if s.at < 0 {
			return 0, false
		}
		return f(s, s.vs[s.at], params)
	}
}

// running answers the fold of the points up to the step (all points
// when whole), from the first point on; the folds are computed once per
// series. n is the point's position on the grid counted from the first
// point, from 1: VictoriaMetrics' running average counts the steps of
// gaps too.
func running(name string, fold func(acc, v float64, n int) float64, whole bool) rangeFunc {
	return func(s *rangeSeries, _ []float64) (float64, bool) {
		folds := s.computed("running "+name, func() []float64 {
			out := make([]float64, len(s.vs))
			out[0] = s.vs[0]
			for i := 1; i < len(s.vs); i++ {
				n := i + 1
				if s.gapMs > 0 && s.gapMs < math.MaxInt64 {
					n = int((s.ts[i]-s.ts[0])/s.gapMs) + 1
				}
				out[i] = fold(out[i-1], s.vs[i], n)
			}
			return out
		})
		switch {
		case whole:
			return folds[len(folds)-1], true
		case s.before == 0:
			return 0, false
		}
		return folds[s.before-1], true
	}
}

func runningAvg(acc, v float64, n int) float64 { return acc + (v-acc)/float64(n) }

// Statistics of a series, computed once per series.
func (s *rangeSeries) mean() float64 {
	return s.one("mean", func() float64 {
		var t float64
		for _, v := range s.vs {
			t += v
		}
		return t / float64(len(s.vs))
	})
}

func (s *rangeSeries) stddev() float64 {
	return s.one("stddev", func() float64 { return math.Sqrt(variance(s.vs)) })
}

func (s *rangeSeries) quantile(phi float64) float64 {
	sorted := s.computed("sorted", func() []float64 { return slices.Sorted(slices.Values(s.vs)) })
	return quantileSorted(phi, sorted)
}

func (s *rangeSeries) mad() float64 {
	return s.one("mad", func() float64 { return madOf(s.vs) })
}

func rangeTransforms() []extension {
	return []extension{
		{fnDef("range_max", 0, mat), wholeRange(everywhere("max", func(vs, _ []float64) float64 { return slices.Max(vs) }))},
		{fnDef("range_min", 0, mat), wholeRange(everywhere("min", func(vs, _ []float64) float64 { return slices.Min(vs) }))},
		{fnDef("range_sum", 0, mat), wholeRange(everywhere("sum", func(vs, _ []float64) float64 {
			var t float64
			for _, v := range vs {
				t += v
			}
			return t
		}))},
		{fnDef("range_avg", 0, mat), wholeRange(running("avg", runningAvg, true))},
		{fnDef("range_first", 0, mat), wholeRange(everywhere("first", func(vs, _ []float64) float64 { return vs[0] }))},
		{fnDef("range_last", 0, mat), wholeRange(everywhere("last", func(vs, _ []float64) float64 { return vs[len(vs)-1] }))},
		{fnDef("range_stddev", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) { return s.stddev(), true })},
		{fnDef("range_stdvar", 0, mat), wholeRange(everywhere("stdvar", func(vs, _ []float64) float64 { return variance(vs) }))},
		{fnDef("range_mad", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) { return s.mad(), true })},
		{fnDef("range_quantile", 0, scl, mat), wholeRange(func(s *rangeSeries, p []float64) (float64, bool) { return s.quantile(p[0]), true })},
		{fnDef("range_zscore", 0, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, _ []float64) (float64, bool) {
			return (v - s.mean()) / s.stddev(), true
		}))},
		{fnDef("range_normalize", 0, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, _ []float64) (float64, bool) {
			lo, hi := s.quantile(0), s.quantile(1)
			if math.IsInf(hi-lo, 0) {
				return 0, false
			}
			return (v - lo) / (hi - lo), true
		}))},
		{fnDef("range_linear_regression", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) {
			fit := s.computed("fit", func() []float64 {
				a, k := linearFit(s.ts, s.vs, s.ts[0])
				return []float64{a, k}
			})
			return fit[0] + fit[1]*float64(s.stepMs-s.ts[0])/1e3, true
		})},
		{fnDef("range_trim_outliers", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			return v, !(math.Abs(v-s.quantile(0.5)) > p[0]*s.mad())
		}))},
		{fnDef("range_trim_spikes", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			phi := p[0] / 2
			return v, v <= s.quantile(1-phi) && v >= s.quantile(phi)
		}))},
		{fnDef("range_trim_zscore", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			return v, !(math.Abs(v-s.mean())/s.stddev() > math.Abs(p[0]))
		}))},
		// outliersk's score: the sum over a range of n steps, -Inf for a
		// series missing at some step (VictoriaMetrics' sum turns NaN
		// there and ranks the series last).
		{fnDef(internalPrefix+"range_sum_full", 0, scl, mat), wholeRange(func(s *rangeSeries, p []float64) (float64, bool) {
			if float64(len(s.vs)) < p[0] {
				return math.Inf(-1), true
			}
			return s.one("sum", func() float64 {
				var t float64
				for _, v := range s.vs {
					t += v
				}
				return t
			}), true
		})},
		{fnDef("running_sum", 0, mat), wholeRange(running("sum", func(acc, v float64, _ int) float64 { return acc + v }, false))},
		{fnDef("running_max", 0, mat), wholeRange(running("max", func(acc, v float64, _ int) float64 { return max(acc, v) }, false))},
		{fnDef("running_min", 0, mat), wholeRange(running("min", func(acc, v float64, _ int) float64 { return min(acc, v) }, false))},
		{fnDef("running_avg", 0, mat), wholeRange(running("avg", runningAvg, false))},
		{fnDef("keep_last_value", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) {
			if s.before == 0 {
				return 0, false
			}
			return s.vs[s.before-1], true
		})},
		{fnDef("keep_next_value", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) {
			switch {
			case s.at >= 0:
				return s.vs[s.at], true
			case s.before < len(s.vs):
				return s.vs[s.before], true
			}
			return 0, false
		})},
		{fnDef("interpolate", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) {
			switch {
			case s.at >= 0:
				return s.vs[s.at], true
			case s.before == 0 || s.before == len(s.vs):
				return 0, false
			}
			i := s.before - 1
			t0, t1, v0, v1 := s.ts[i], s.ts[i+1], s.vs[i], s.vs[i+1]
			return v0 + (v1-v0)*float64(s.stepMs-t0)/float64(t1-t0), true
		})},
		{fnDef("remove_resets", 0, mat), wholeRange(atPoint(func(s *rangeSeries, _ float64, _ []float64) (float64, bool) {
			fixed := s.computed("remove_resets", func() []float64 {
				out := make([]float64, len(s.vs))
				var correction float64
				prev := s.vs[0]
				for i, v := range s.vs {
					if d := v - prev; d < 0 {
						if -d*8 < prev {
							correction += prev - v // a partial reset
						} else {
							correction += prev
						}
					}
					prev = v
					out[i] = v + correction
				}
				return out
			})
			return fixed[s.at], true
		}))},
		{fnDef("smooth_exponential", 0, mat, scl), wholeRange(atPoint(func(s *rangeSeries, _ float64, p []float64) (float64, bool) {
			sf := p[0]
			switch {
			case math.IsNaN(sf):
				sf = 1
			case sf < 0:
				sf = 0
			case sf > 1:
				sf = 1
			}
			smoothed := s.computed(paramsKey("smooth", []float64{sf}), func() []float64 {
				out := slices.Clone(s.vs)
				first := slices.IndexFunc(s.vs, func(v float64) bool { return !math.IsInf(v, 0) })
				if first < 0 {
					return out
				}
				avg := s.vs[first]
				for i := first + 1; i < len(s.vs); i++ {
					if v := s.vs[i]; !math.IsInf(v, 0) {
						avg = avg*(1-sf) + v*sf
					}
					out[i] = avg
				}
				return out
			})
			return smoothed[s.at], true
		}))},
	}
}

// variance is the population variance of vs.
func variance(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	var avg, q float64
	for i, v := range vs {
		n := float64(i + 1)
		next := avg + (v-avg)/n
		q += (v - avg) * (v - next)
		avg = next
	}
	return q / float64(len(vs))
}

// linearFit fits v = a + k*(t-t0)/1s by least squares.
func linearFit(ts []int64, vs []float64, t0 int64) (a, k float64) {
	if slices.Min(vs) == slices.Max(vs) {
		return vs[0], 0
	}
	var vSum, tSum, tvSum, ttSum float64
	for i, v := range vs {
		dt := float64(ts[i]-t0) / 1e3
		vSum += v
		tSum += dt
		tvSum += dt * v
		ttSum += dt * dt
	}
	n := float64(len(vs))
	if d := ttSum - tSum*tSum/n; math.Abs(d) >= 1e-6 {
		k = (tvSum - tSum*vSum/n) / d
	}
	return vSum/n - k*tSum/n, k
}
