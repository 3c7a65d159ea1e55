package query

import (
	"math"
	"slices"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// Range transforms: each gets one series over the whole query range (the
// subquery rangeArg builds) and the time of the step being evaluated,
// and answers VictoriaMetrics' result at that step, or nothing. NaN
// points count as missing, as in VictoriaMetrics.

// rangeSeries is one series over the query range and the step asked for.
type rangeSeries struct {
	ts     []int64   // times of the non-NaN points, ascending, ms
	vs     []float64 // their values
	gapMs  int64     // the grid's step: the smallest gap between points
	at     int       // index of the point at the step, or -1
	before int       // number of points at or before the step
	stepMs int64     // time of the step
}

// rangeFunc answers the value at the step, ok false for none. params
// are the scalar arguments in order.
type rangeFunc func(s *rangeSeries, params []float64) (float64, bool)

// wholeRange adapts f to the engine: vals hold the scalar arguments (the
// engine leaves the matrix out), m the one series.
func wholeRange(f rangeFunc) promql.FunctionCall {
	return func(vals []Vector, m promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (Vector, annotations.Annotations) {
		if len(m) == 0 {
			return enh.Out, nil
		}
		pts := m[0].Floats
		s := rangeSeries{at: -1, stepMs: enh.Ts}
		// A point stands at the step when nothing of the grid lies
		// between them: the grid is the subquery's, whose step is the
		// smallest gap between points (with one point, only its own
		// time matches).
		gap := int64(math.MaxInt64)
		for i := 1; i < len(pts); i++ {
			gap = min(gap, pts[i].T-pts[i-1].T)
		}
		for _, p := range pts {
			if math.IsNaN(p.F) {
				continue
			}
			s.ts = append(s.ts, p.T)
			s.vs = append(s.vs, p.F)
			if p.T <= enh.Ts {
				s.before++
				if p.T == enh.Ts || enh.Ts-p.T < gap {
					s.at = len(s.ts) - 1
				}
			}
		}
		if len(s.vs) == 0 {
			return enh.Out, nil
		}
		s.gapMs = gap
		params := make([]float64, len(vals))
		for i := range vals {
			params[i] = scalarArg(vals, i)
		}
		v, ok := f(&s, params)
		if !ok || math.IsNaN(v) {
			return enh.Out, nil
		}
		return append(enh.Out, Sample{F: v}), nil
	}
}

// everywhere answers agg over all points at every step.
func everywhere(agg func(vs []float64, params []float64) float64) rangeFunc {
	return func(s *rangeSeries, params []float64) (float64, bool) {
		return agg(s.vs, params), true
	}
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
// when whole), from the first point on. n is the point's position on
// the grid counted from the first point, from 1: VictoriaMetrics'
// running average counts the steps of gaps too.
func running(fold func(acc, v float64, n int) float64, whole bool) rangeFunc {
	return func(s *rangeSeries, _ []float64) (float64, bool) {
		upto := s.before
		if whole {
			upto = len(s.vs)
		}
		if upto == 0 {
			return 0, false
		}
		acc := s.vs[0]
		for i := 1; i < upto; i++ {
			n := i + 1
			if s.gapMs > 0 && s.gapMs < math.MaxInt64 {
				n = int((s.ts[i]-s.ts[0])/s.gapMs) + 1
			}
			acc = fold(acc, s.vs[i], n)
		}
		return acc, true
	}
}

func runningAvg(acc, v float64, n int) float64 { return acc + (v-acc)/float64(n) }

func rangeTransforms() []extension {
	sum := func(vs []float64) float64 {
		var t float64
		for _, v := range vs {
			t += v
		}
		return t
	}
	return []extension{
		{fnDef("range_max", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return slices.Max(vs) }))},
		{fnDef("range_min", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return slices.Min(vs) }))},
		{fnDef("range_sum", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return sum(vs) }))},
		{fnDef("range_avg", 0, mat), wholeRange(running(runningAvg, true))},
		{fnDef("range_first", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return vs[0] }))},
		{fnDef("range_last", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return vs[len(vs)-1] }))},
		{fnDef("range_stddev", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return math.Sqrt(variance(vs)) }))},
		{fnDef("range_stdvar", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return variance(vs) }))},
		{fnDef("range_mad", 0, mat), wholeRange(everywhere(func(vs, _ []float64) float64 { return madOf(vs) }))},
		{fnDef("range_quantile", 0, scl, mat), wholeRange(everywhere(func(vs, p []float64) float64 { return quantileOf(p[0], vs) }))},
		{fnDef("range_zscore", 0, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, _ []float64) (float64, bool) {
			return (v - sum(s.vs)/float64(len(s.vs))) / math.Sqrt(variance(s.vs)), true
		}))},
		{fnDef("range_normalize", 0, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, _ []float64) (float64, bool) {
			lo, hi := slices.Min(s.vs), slices.Max(s.vs)
			if math.IsInf(hi-lo, 0) {
				return 0, false
			}
			return (v - lo) / (hi - lo), true
		}))},
		{fnDef("range_linear_regression", 0, mat), wholeRange(func(s *rangeSeries, _ []float64) (float64, bool) {
			v, k := linearFit(s.ts, s.vs, s.ts[0])
			return v + k*float64(s.stepMs-s.ts[0])/1e3, true
		})},
		{fnDef("range_trim_outliers", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			return v, !(math.Abs(v-quantileOf(0.5, s.vs)) > p[0]*madOf(s.vs))
		}))},
		{fnDef("range_trim_spikes", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			phi := p[0] / 2
			return v, v <= quantileOf(1-phi, s.vs) && v >= quantileOf(phi, s.vs)
		}))},
		{fnDef("range_trim_zscore", 0, scl, mat), wholeRange(atPoint(func(s *rangeSeries, v float64, p []float64) (float64, bool) {
			z := math.Abs(v-sum(s.vs)/float64(len(s.vs))) / math.Sqrt(variance(s.vs))
			return v, !(z > math.Abs(p[0]))
		}))},
		// outliersk's score: the sum over a range of n steps, -Inf for a
		// series missing at some step (VictoriaMetrics' sum turns NaN
		// there and ranks the series last).
		{fnDef(internalPrefix+"range_sum_full", 0, scl, mat), wholeRange(func(s *rangeSeries, p []float64) (float64, bool) {
			if float64(len(s.vs)) < p[0] {
				return math.Inf(-1), true
			}
			return sum(s.vs), true
		})},
		{fnDef("running_sum", 0, mat), wholeRange(running(func(acc, v float64, _ int) float64 { return acc + v }, false))},
		{fnDef("running_max", 0, mat), wholeRange(running(func(acc, v float64, _ int) float64 { return max(acc, v) }, false))},
		{fnDef("running_min", 0, mat), wholeRange(running(func(acc, v float64, _ int) float64 { return min(acc, v) }, false))},
		{fnDef("running_avg", 0, mat), wholeRange(running(runningAvg, false))},
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
			var correction float64
			prev := s.vs[0]
			for _, v := range s.vs[:s.at+1] {
				if d := v - prev; d < 0 {
					if -d*8 < prev {
						correction += prev - v // a partial reset
					} else {
						correction += prev
					}
				}
				prev = v
			}
			return s.vs[s.at] + correction, true
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
			first := slices.IndexFunc(s.vs, func(v float64) bool { return !math.IsInf(v, 0) })
			if first < 0 || first > s.at {
				return s.vs[s.at], true
			}
			avg := s.vs[first]
			for _, v := range s.vs[first+1 : s.at+1] {
				if !math.IsInf(v, 0) {
					avg = avg*(1-sf) + v*sf
				}
			}
			return avg, true
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
