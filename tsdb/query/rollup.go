package query

// MetricsQL's rollup functions that PromQL lacks, registered with the
// Prometheus engine's function tables (parser.Functions for the type
// check, promql.FunctionCalls for the evaluation) when the package is
// loaded, so that the engine evaluates them like its own *_over_time
// functions. Their semantics are VictoriaMetrics' (MetricsQL docs; the
// comparison test runs each against a real VictoriaMetrics).
//
// A rollup of VictoriaMetrics sees more than the samples of its window
// (t-w, t]: the sample before the window (prevValue, when it is close
// enough; realPrevValue, however old) and the one after it
// (realNextValue). The engine hands a function the samples of its
// window only, so for the functions that need them the translator widens
// the window backwards (vmBack) and forwards (a negative offset, vmAhead)
// and appends hidden scalar arguments that tell the function the real
// window (see contextArgs).

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// rollupArg is what a VictoriaMetrics rollup function sees at one step.
type rollupArg struct {
	values     []float64 // samples of the window (t-w, t]
	timestamps []int64
	// prevValue is the sample before the window if it is within the
	// previous-sample interval of the window's start (and some sample
	// follows the window's start), else NaN.
	prevValue     float64
	prevTimestamp int64
	realPrevValue float64 // the sample before the window, NaN if none
	realNextValue float64 // the sample after the window, NaN if none
	currTimestamp int64   // t, ms
	window        int64   // w, ms
	params        []float64
}

// rollupDef is one MetricsQL rollup function.
type rollupDef struct {
	// params counts the scalar parameters; paramsFirst puts them before
	// the series argument (quantile-like) instead of after it.
	params      int
	paramsFirst bool
	// context marks functions that look at samples outside the window
	// (prevValue, realPrevValue, realNextValue): they get contextArgs.
	context bool
	// silence marks the functions VictoriaMetrics fetches 5m more for
	// (its needSilenceIntervalForRollupFunc).
	silence bool
	// shift evaluates the function a step later than asked (VictoriaMetrics
	// does so for rollup_candlestick, so that a candle covers the step
	// after its time).
	shift bool
	// pre transforms the samples (all that are visible, not just the
	// window's) before the function sees them.
	pre func(vs []float64, ts []int64)
	fn  func(a *rollupArg) float64
}

// contextArgs is the number of hidden scalar arguments a context
// function gets after its own: the window (s), how far its matrix reaches
// past the window (s), the first and last sample time VictoriaMetrics
// would have fetched (unix s, NaN for no bound), the query step (s) and
// 1 for an instant query.
const contextArgs = 6

// vmSilence is VictoriaMetrics' maxSilenceInterval: how much earlier than
// the query it fetches for functions that need the previous sample.
const vmSilence = 5 * time.Minute

// vmBack is the least a context function's matrix reaches back before
// its window, and vmAhead how far it reaches past it in a range query.
const (
	vmBack  = 5 * time.Minute
	vmAhead = 5 * time.Minute
)

var rollupDefs = map[string]*rollupDef{
	// Over the window's samples alone.
	"median_over_time":      {fn: func(a *rollupArg) float64 { return quantileOf(0.5, a.values) }},
	"mad_over_time":         {fn: func(a *rollupArg) float64 { return madOf(a.values) }},
	"tmax_over_time":        {fn: rollupTmax},
	"tmin_over_time":        {fn: rollupTmin},
	"tfirst_over_time":      {fn: rollupTfirst},
	"tlast_over_time":       {fn: rollupTlast},
	"range_over_time":       {fn: func(a *rollupArg) float64 { return maxOf(a.values) - minOf(a.values) }},
	"distinct_over_time":    {fn: rollupDistinct},
	"sum2_over_time":        {fn: rollupSum2},
	"geomean_over_time":     {fn: rollupGeomean},
	"default_rollup":        {fn: rollupLastValue},
	"rate_over_sum":         {fn: rollupRateOverSum},
	"outlier_iqr_over_time": {fn: rollupOutlierIQR},
	"duration_over_time":    {params: 1, fn: rollupDurationOverTime},
	"count_eq_over_time":    {params: 1, fn: countIf(func(v, x float64) bool { return v == x })},
	"count_ne_over_time":    {params: 1, fn: countIf(func(v, x float64) bool { return v != x })},
	"count_gt_over_time":    {params: 1, fn: countIf(func(v, x float64) bool { return v > x })},
	"count_le_over_time":    {params: 1, fn: countIf(func(v, x float64) bool { return v <= x })},
	"share_eq_over_time":    {params: 1, fn: shareIf(func(v, x float64) bool { return v == x })},
	"share_gt_over_time":    {params: 1, fn: shareIf(func(v, x float64) bool { return v > x })},
	"share_le_over_time":    {params: 1, fn: shareIf(func(v, x float64) bool { return v <= x })},
	"sum_eq_over_time":      {params: 1, fn: sumIf(func(v, x float64) bool { return v == x })},
	"sum_gt_over_time":      {params: 1, fn: sumIf(func(v, x float64) bool { return v > x })},
	"sum_le_over_time":      {params: 1, fn: sumIf(func(v, x float64) bool { return v <= x })},
	"hoeffding_bound_lower": {params: 1, paramsFirst: true, fn: hoeffdingBound(-1)},
	"hoeffding_bound_upper": {params: 1, paramsFirst: true, fn: hoeffdingBound(1)},
	"delta_prometheus":      {fn: rollupFirstToLast},
	"increase_prometheus":   {pre: removeCounterResets, fn: rollupFirstToLast},
	"rate_prometheus":       {pre: removeCounterResets, fn: rollupRatePrometheus},
	"changes_prometheus":    {fn: rollupChangesPrometheus},

	// With the samples around the window.
	"ascent_over_time":       {context: true, silence: true, fn: rollupAscent(1)},
	"descent_over_time":      {context: true, silence: true, fn: rollupAscent(-1)},
	"increases_over_time":    {context: true, silence: true, fn: rollupCountSteps(1)},
	"decreases_over_time":    {context: true, silence: true, fn: rollupCountSteps(-1)},
	"increase_pure":          {context: true, silence: true, pre: removeCounterResets, fn: rollupIncreasePure},
	"lag":                    {context: true, silence: true, fn: rollupLag},
	"lifetime":               {context: true, silence: true, fn: rollupLifetime},
	"scrape_interval":        {context: true, silence: true, fn: rollupScrapeInterval},
	"tlast_change_over_time": {context: true, silence: true, fn: rollupTlastChange},
	"deriv_fast":             {context: true, silence: true, fn: rollupDerivFast},
	"ideriv":                 {context: true, silence: true, fn: rollupIderiv},
	"integrate":              {context: true, silence: true, fn: rollupIntegrate},
	"mode_over_time":         {context: true, fn: rollupMode},
	"zscore_over_time":       {context: true, fn: rollupZScore},
	"holt_winters":           {context: true, params: 2, fn: rollupHoltWinters},

	// The parts of rollup_*(x) (see rollupFamily): the first parameter
	// picks the statistic, rollupMin... or candleOpen...
	"rollup_delta":           {context: true, silence: true, params: 1, pre: deltaValues, fn: rollupStat},
	"rollup_increase":        {context: true, silence: true, params: 1, pre: chain(removeCounterResets, deltaValues), fn: rollupStat},
	"rollup_deriv":           {context: true, silence: true, params: 1, pre: derivValues, fn: rollupStat},
	"rollup_rate":            {context: true, silence: true, params: 1, pre: chain(removeCounterResets, derivValues), fn: rollupStat},
	"rollup_scrape_interval": {context: true, silence: true, params: 1, pre: intervalValues, fn: rollupStat},
	"rollup_candlestick":     {context: true, silence: true, shift: true, params: 1, fn: rollupCandle},
}

// Statistics of rollup_* (the first parameter of the registered parts).
const (
	rollupMin = iota
	rollupMax
	rollupAvg
	candleOpen
	candleClose
	candleLow
	candleHigh
)

func init() {
	for name, d := range rollupDefs {
		types := make([]parser.ValueType, 0, d.params+1+contextArgs)
		for range d.params {
			types = append(types, parser.ValueTypeScalar)
		}
		at := 0
		if !d.paramsFirst {
			types = slices.Insert(types, 0, parser.ValueTypeMatrix)
		} else {
			at = d.params
			types = append(types, parser.ValueTypeMatrix)
		}
		if d.context {
			for range contextArgs {
				types = append(types, parser.ValueTypeScalar)
			}
		}
		parser.Functions[name] = &parser.Function{Name: name, ArgTypes: types, ReturnType: parser.ValueTypeVector}
		promql.FunctionCalls[name] = d.call(at)
	}
}

// call returns the engine's function for d, whose series argument is
// argument at.
func (d *rollupDef) call(at int) promql.FunctionCall {
	return func(vals []promql.Vector, m promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		if len(m) == 0 || len(m[0].Floats) == 0 {
			return enh.Out, nil
		}
		params := make([]float64, len(vals))
		for i, v := range vals {
			params[i] = math.NaN()
			if len(v) > 0 {
				params[i] = v[0].F
			}
		}
		ms := args[at].(*parser.MatrixSelector)
		end := enh.Ts - ms.VectorSelector.(*parser.VectorSelector).Offset.Milliseconds()
		var a rollupArg
		if d.context {
			a = contextWindow(m[0].Floats, end, params[d.params:], d.pre)
		} else {
			a = plainWindow(m[0].Floats, end, ms.Range.Milliseconds(), d.pre)
		}
		a.params = params[:d.params]
		v := d.fn(&a)
		if math.IsNaN(v) {
			// VictoriaMetrics leaves such points out.
			return enh.Out, nil
		}
		return append(enh.Out, promql.Sample{F: v}), nil
	}
}

// plainWindow is the rollupArg of a function that sees its window only.
func plainWindow(pts []promql.FPoint, end, window int64, pre func([]float64, []int64)) rollupArg {
	a := rollupArg{
		values:        make([]float64, len(pts)),
		timestamps:    make([]int64, len(pts)),
		prevValue:     math.NaN(),
		prevTimestamp: end - window,
		realPrevValue: math.NaN(),
		realNextValue: math.NaN(),
		currTimestamp: end,
		window:        window,
	}
	for i, p := range pts {
		a.values[i], a.timestamps[i] = p.F, p.T
	}
	if pre != nil {
		pre(a.values, a.timestamps)
	}
	return a
}

// contextWindow builds the rollupArg of a context function from its
// widened matrix, which ends at matrixEnd; ctx are the hidden arguments.
func contextWindow(pts []promql.FPoint, matrixEnd int64, ctx []float64, pre func([]float64, []int64)) rollupArg {
	window := secondsToMs(ctx[0])
	end := matrixEnd - secondsToMs(ctx[1])
	first, last := int64(math.MinInt64), int64(math.MaxInt64)
	if !math.IsNaN(ctx[2]) {
		first = secondsToMs(ctx[2])
	}
	if !math.IsNaN(ctx[3]) {
		last = secondsToMs(ctx[3])
	}
	step := secondsToMs(ctx[4])
	instant := ctx[5] == 1

	// The samples VictoriaMetrics would have fetched.
	var (
		values     = make([]float64, 0, len(pts))
		timestamps = make([]int64, 0, len(pts))
	)
	for _, p := range pts {
		if p.T >= first && p.T <= last {
			values = append(values, p.F)
			timestamps = append(timestamps, p.T)
		}
	}
	if pre != nil {
		pre(values, timestamps)
	}
	start := end - window
	i, _ := slices.BinarySearch(timestamps, start+1) // first after start
	j, _ := slices.BinarySearch(timestamps, end+1)   // first after end
	a := rollupArg{
		values:        values[i:j],
		timestamps:    timestamps[i:j],
		realPrevValue: math.NaN(),
		realNextValue: math.NaN(),
		currTimestamp: end,
		window:        window,
	}
	maxPrev := step
	if !instant {
		maxPrev = maxPrevInterval(scrapeInterval(timestamps, step))
	}
	a.prevValue, a.prevTimestamp = math.NaN(), start-maxPrev
	if i > 0 && i < len(timestamps) && timestamps[i-1] > a.prevTimestamp {
		a.prevValue, a.prevTimestamp = values[i-1], timestamps[i-1]
	}
	if i > 0 {
		a.realPrevValue = values[i-1]
	}
	if j < len(values) {
		a.realNextValue = values[j]
	}
	return a
}

func secondsToMs(s float64) int64 { return int64(math.Round(s * 1000)) }

// scrapeInterval estimates the interval of samples as VictoriaMetrics
// does: the 0.6 quantile of the last 20 intervals, or def with fewer
// than two samples.
func scrapeInterval(ts []int64, def int64) int64 {
	if len(ts) < 2 {
		return def
	}
	from := max(0, len(ts)-21)
	d := make([]float64, 0, 20)
	for k := len(ts) - 1; k > from; k-- {
		d = append(d, float64(ts[k]-ts[k-1]))
	}
	slices.Sort(d)
	if iv := int64(quantileSorted(0.6, d)); iv > 0 {
		return iv
	}
	return def
}

// maxPrevInterval is how far before a window the previous sample may be
// for VictoriaMetrics to use it, given the sample interval: more for
// shorter intervals, whose jitter is larger in proportion.
func maxPrevInterval(iv int64) int64 {
	switch {
	case iv <= 2000:
		return 5 * iv
	case iv <= 4000:
		return 3 * iv
	case iv <= 8000:
		return 2 * iv
	case iv <= 16000:
		return iv + iv/2
	case iv <= 32000:
		return iv + iv/4
	}
	return iv + iv/8
}

// quantileOf is the phi-quantile of vs (NaNs left out) with linear
// interpolation between the closest ranks, as Prometheus computes it.
func quantileOf(phi float64, vs []float64) float64 {
	s := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	slices.Sort(s)
	return quantileSorted(phi, s)
}

func quantileSorted(phi float64, s []float64) float64 {
	switch {
	case len(s) == 0 || math.IsNaN(phi):
		return math.NaN()
	case phi < 0:
		return math.Inf(-1)
	case phi > 1:
		return math.Inf(1)
	}
	n := float64(len(s))
	rank := phi * (n - 1)
	lo := math.Max(0, math.Floor(rank))
	hi := math.Min(n-1, lo+1)
	w := rank - math.Floor(rank)
	return s[int(lo)]*(1-w) + s[int(hi)]*w
}

// madOf is the median absolute deviation from the median.
func madOf(vs []float64) float64 {
	med := quantileOf(0.5, vs)
	d := make([]float64, len(vs))
	for i, v := range vs {
		d[i] = math.Abs(v - med)
	}
	return quantileOf(0.5, d)
}

func minOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	return slices.Min(vs)
}

func maxOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	return slices.Max(vs)
}

func avgOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// stdvarOf is the population variance (Welford's method).
func stdvarOf(vs []float64) float64 {
	switch len(vs) {
	case 0:
		return math.NaN()
	case 1:
		return 0
	}
	var avg, n, q float64
	for _, v := range vs {
		if math.IsNaN(v) {
			continue
		}
		n++
		next := avg + (v-avg)/n
		q += (v - avg) * (v - next)
		avg = next
	}
	if n == 0 {
		return math.NaN()
	}
	return q / n
}

// rollupTmax is the time (s) of the window's largest value; of the last
// one where several are largest.
func rollupTmax(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	best, at := a.values[0], a.timestamps[0]
	for i, v := range a.values {
		if v >= best {
			best, at = v, a.timestamps[i]
		}
	}
	return float64(at) / 1000
}

// rollupTmin is the time (s) of the window's smallest value; of the last
// one where several are smallest.
func rollupTmin(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	best, at := a.values[0], a.timestamps[0]
	for i, v := range a.values {
		if v <= best {
			best, at = v, a.timestamps[i]
		}
	}
	return float64(at) / 1000
}

func rollupTfirst(a *rollupArg) float64 {
	if len(a.timestamps) == 0 {
		return math.NaN()
	}
	return float64(a.timestamps[0]) / 1000
}

func rollupTlast(a *rollupArg) float64 {
	if len(a.timestamps) == 0 {
		return math.NaN()
	}
	return float64(a.timestamps[len(a.timestamps)-1]) / 1000
}

func rollupLastValue(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	return a.values[len(a.values)-1]
}

func rollupDistinct(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	seen := make(map[float64]struct{}, len(a.values))
	for _, v := range a.values {
		seen[v] = struct{}{}
	}
	return float64(len(seen))
}

func rollupSum2(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	var s float64
	for _, v := range a.values {
		s += v * v
	}
	return s
}

func rollupGeomean(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	p := 1.0
	for _, v := range a.values {
		p *= v
	}
	return math.Pow(p, 1/float64(len(a.values)))
}

// rollupRateOverSum is the sum of the window per second of the window.
func rollupRateOverSum(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	var s float64
	for _, v := range a.values {
		s += v
	}
	return s / (float64(a.window) / 1000)
}

// rollupOutlierIQR is the last value if it lies more than 1.5
// interquartile ranges outside the quartiles, else nothing.
func rollupOutlierIQR(a *rollupArg) float64 {
	if len(a.values) < 2 {
		return math.NaN()
	}
	q25, q75 := quantileOf(0.25, a.values), quantileOf(0.75, a.values)
	iqr := 1.5 * (q75 - q25)
	if v := a.values[len(a.values)-1]; v > q75+iqr || v < q25-iqr {
		return v
	}
	return math.NaN()
}

// rollupDurationOverTime sums the intervals between the window's samples
// that are at most the parameter (s) long.
func rollupDurationOverTime(a *rollupArg) float64 {
	if len(a.timestamps) == 0 {
		return math.NaN()
	}
	limit := secondsToMs(a.params[0])
	var sum int64
	prev := a.timestamps[0]
	for _, t := range a.timestamps {
		if d := t - prev; d <= limit {
			sum += d
		}
		prev = t
	}
	return float64(sum) / 1000
}

func countIf(match func(v, x float64) bool) func(*rollupArg) float64 {
	return func(a *rollupArg) float64 {
		if len(a.values) == 0 {
			return math.NaN()
		}
		n := 0
		for _, v := range a.values {
			if match(v, a.params[0]) {
				n++
			}
		}
		return float64(n)
	}
}

func shareIf(match func(v, x float64) bool) func(*rollupArg) float64 {
	count := countIf(match)
	return func(a *rollupArg) float64 { return count(a) / float64(len(a.values)) }
}

func sumIf(match func(v, x float64) bool) func(*rollupArg) float64 {
	return func(a *rollupArg) float64 {
		if len(a.values) == 0 {
			return math.NaN()
		}
		var s float64
		for _, v := range a.values {
			if match(v, a.params[0]) {
				s += v
			}
		}
		return s
	}
}

// hoeffdingBound is the window's average plus (sign 1) or minus (-1) the
// Hoeffding bound for the probability phi (the parameter).
func hoeffdingBound(sign float64) func(*rollupArg) float64 {
	return func(a *rollupArg) float64 {
		vs := a.values
		switch len(vs) {
		case 0:
			return math.NaN()
		case 1:
			return vs[0]
		}
		avg := avgOf(vs)
		span := maxOf(vs) - minOf(vs)
		phi := a.params[0]
		var bound float64
		switch {
		case span <= 0, phi <= 0:
		case phi >= 1:
			bound = math.Inf(1)
		default:
			bound = span * math.Sqrt(math.Log(1/(1-phi))/(2*float64(len(vs))))
		}
		return avg + sign*bound
	}
}

// rollupFirstToLast is the last value minus the first, without
// extrapolation; nothing for fewer than two samples.
func rollupFirstToLast(a *rollupArg) float64 {
	if len(a.values) < 2 {
		return math.NaN()
	}
	return a.values[len(a.values)-1] - a.values[0]
}

func rollupRatePrometheus(a *rollupArg) float64 {
	d := rollupFirstToLast(a)
	if math.IsNaN(d) || a.window == 0 {
		return math.NaN()
	}
	return d / (float64(a.window) / 1000)
}

// nearlyEqual is VictoriaMetrics' allowance for float noise when it
// compares neighbouring samples.
func nearlyEqual(v, prev float64) bool { return math.Abs(v-prev) < 1e-12*math.Abs(v) }

func rollupChangesPrometheus(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return math.NaN()
	}
	prev, n := a.values[0], 0
	for _, v := range a.values[1:] {
		if v != prev && !nearlyEqual(v, prev) {
			n++
			prev = v
		}
	}
	return float64(n)
}

// rollupAscent sums the rises (sign 1) or falls (-1) between neighbouring
// samples, from the previous sample on.
func rollupAscent(sign float64) func(*rollupArg) float64 {
	return func(a *rollupArg) float64 {
		vs, prev := a.values, a.prevValue
		if math.IsNaN(prev) {
			if len(vs) == 0 {
				return math.NaN()
			}
			prev, vs = vs[0], vs[1:]
		}
		var s float64
		for _, v := range vs {
			if d := sign * (v - prev); d > 0 {
				s += d
			}
			prev = v
		}
		return s
	}
}

// rollupCountSteps counts the rises (sign 1) or falls (-1) between
// neighbouring samples, from the previous sample on.
func rollupCountSteps(sign float64) func(*rollupArg) float64 {
	return func(a *rollupArg) float64 {
		vs, prev := a.values, a.prevValue
		if len(vs) == 0 {
			if math.IsNaN(prev) {
				return math.NaN()
			}
			return 0
		}
		if math.IsNaN(prev) {
			prev, vs = vs[0], vs[1:]
		}
		n := 0
		for _, v := range vs {
			if sign*(v-prev) > 0 && !nearlyEqual(v, prev) {
				n++
			}
			prev = v
		}
		return float64(n)
	}
}

// rollupIncreasePure is the growth of a counter since the sample before
// the window; a counter first seen in the window starts from 0.
func rollupIncreasePure(a *rollupArg) float64 {
	prev := a.prevValue
	if math.IsNaN(prev) {
		if len(a.values) == 0 {
			return math.NaN()
		}
		prev = 0
		if !math.IsNaN(a.realPrevValue) {
			prev = a.realPrevValue
		}
	}
	if len(a.values) == 0 {
		return 0
	}
	return a.values[len(a.values)-1] - prev
}

// rollupLag is the time (s) from the last sample to the window's end.
func rollupLag(a *rollupArg) float64 {
	if len(a.timestamps) == 0 {
		if math.IsNaN(a.prevValue) {
			return math.NaN()
		}
		return float64(a.currTimestamp-a.prevTimestamp) / 1000
	}
	return float64(a.currTimestamp-a.timestamps[len(a.timestamps)-1]) / 1000
}

// rollupLifetime is the time (s) from the first sample (the previous
// one, if any) to the last.
func rollupLifetime(a *rollupArg) float64 {
	ts := a.timestamps
	if math.IsNaN(a.prevValue) {
		if len(ts) < 2 {
			return math.NaN()
		}
		return float64(ts[len(ts)-1]-ts[0]) / 1000
	}
	if len(ts) == 0 {
		return math.NaN()
	}
	return float64(ts[len(ts)-1]-a.prevTimestamp) / 1000
}

// rollupScrapeInterval is the average interval (s) between samples.
func rollupScrapeInterval(a *rollupArg) float64 {
	ts := a.timestamps
	if math.IsNaN(a.prevValue) {
		if len(ts) < 2 {
			return math.NaN()
		}
		return float64(ts[len(ts)-1]-ts[0]) / 1000 / float64(len(ts)-1)
	}
	if len(ts) == 0 {
		return math.NaN()
	}
	return float64(ts[len(ts)-1]-a.prevTimestamp) / 1000 / float64(len(ts))
}

// rollupTlastChange is the time (s) of the last change of value.
func rollupTlastChange(a *rollupArg) float64 {
	vs := a.values
	if len(vs) == 0 {
		return math.NaN()
	}
	last := vs[len(vs)-1]
	for i := len(vs) - 2; i >= 0; i-- {
		if vs[i] != last {
			return float64(a.timestamps[i+1]) / 1000
		}
	}
	if math.IsNaN(a.prevValue) || a.prevValue != last {
		return float64(a.timestamps[0]) / 1000
	}
	return math.NaN()
}

// rollupDerivFast is the change per second from the first sample (the
// previous one, if any) to the last.
func rollupDerivFast(a *rollupArg) float64 {
	vs, ts := a.values, a.timestamps
	prev, prevT := a.prevValue, a.prevTimestamp
	switch {
	case math.IsNaN(prev) && len(vs) < 2:
		return math.NaN()
	case math.IsNaN(prev):
		prev, prevT = vs[0], ts[0]
	case len(vs) == 0:
		return 0
	}
	return (vs[len(vs)-1] - prev) / (float64(ts[len(ts)-1]-prevT) / 1000)
}

// rollupIderiv is the change per second between the last two samples.
func rollupIderiv(a *rollupArg) float64 {
	vs, ts := a.values, a.timestamps
	if len(vs) < 2 {
		if len(vs) == 0 || math.IsNaN(a.prevValue) {
			return math.NaN()
		}
		return (vs[0] - a.prevValue) / (float64(ts[0]-a.prevTimestamp) / 1000)
	}
	vEnd, tEnd := vs[len(vs)-1], ts[len(ts)-1]
	k := len(ts) - 2
	for k >= 0 && ts[k] >= tEnd {
		k--
	}
	var vStart float64
	var tStart int64
	switch {
	case k >= 0:
		vStart, tStart = vs[k], ts[k]
	case math.IsNaN(a.prevValue):
		return 0
	default:
		vStart, tStart = a.prevValue, a.prevTimestamp
	}
	return (vEnd - vStart) / (float64(tEnd-tStart) / 1000)
}

// rollupIntegrate is the area under the samples (each value held until
// the next sample) over the window, in value × seconds. The last value
// is held to the window's end only if the series goes on after it.
func rollupIntegrate(a *rollupArg) float64 {
	vs, ts := a.values, a.timestamps
	prev, prevT := a.prevValue, a.currTimestamp-a.window
	if math.IsNaN(prev) {
		if len(vs) == 0 {
			return math.NaN()
		}
		prev, prevT = vs[0], ts[0]
		vs, ts = vs[1:], ts[1:]
	}
	var sum float64
	for i, v := range vs {
		sum += prev * float64(ts[i]-prevT) / 1000
		prev, prevT = v, ts[i]
	}
	if !math.IsNaN(a.realNextValue) {
		sum += prev * float64(a.currTimestamp-prevT) / 1000
	}
	return sum
}

// rollupMode is the most frequent value of the window, the smallest of
// equally frequent ones, counting the previous sample as VictoriaMetrics
// does (it starts the count, so it wins over values seen once each).
func rollupMode(a *rollupArg) float64 {
	if len(a.values) == 0 {
		return a.prevValue
	}
	s := slices.Clone(a.values)
	slices.Sort(s)
	prev := a.prevValue
	mode, best, runStart := prev, 0, -1
	for i, v := range s {
		if v == prev {
			continue
		}
		if n := i - runStart; n > best || math.IsNaN(mode) {
			best, mode = n, prev
		}
		runStart, prev = i, v
	}
	if n := len(s) - runStart; n > best || math.IsNaN(mode) {
		mode = prev
	}
	return mode
}

// rollupZScore is how many standard deviations the last value lies from
// the window's average; nothing if the series has stopped (the last
// sample is older than the average interval).
func rollupZScore(a *rollupArg) float64 {
	iv, lag := rollupScrapeInterval(a), rollupLag(a)
	if math.IsNaN(iv) || math.IsNaN(lag) || lag > iv {
		return math.NaN()
	}
	d := rollupLastValue(a) - avgOf(a.values)
	if d == 0 {
		return 0
	}
	return d / math.Sqrt(stdvarOf(a.values))
}

// rollupHoltWinters is double exponential smoothing with the smoothing
// factor and trend factor parameters, starting from the previous sample.
func rollupHoltWinters(a *rollupArg) float64 {
	vs := a.values
	if len(vs) == 0 {
		return math.NaN()
	}
	sf, tf := a.params[0], a.params[1]
	if sf < 0 || sf > 1 || tf < 0 || tf > 1 {
		return math.NaN()
	}
	s := a.prevValue
	if math.IsNaN(s) {
		s, vs = vs[0], vs[1:]
		if len(vs) == 0 {
			return s
		}
	}
	b := vs[0] - s
	for _, v := range vs {
		next := sf*v + (1-sf)*(s+b)
		b = tf*(next-s) + (1-tf)*b
		s = next
	}
	return s
}

// rollupStat is min, max or avg (the first parameter) of the window's
// transformed samples.
func rollupStat(a *rollupArg) float64 {
	switch int(a.params[0]) {
	case rollupMin:
		return minOf(a.values)
	case rollupMax:
		return maxOf(a.values)
	case rollupAvg:
		return avgOf(a.values)
	}
	return math.NaN()
}

// rollupCandle is open, close, low or high (the first parameter) of the
// window: samples at its very end are left to the next window, and the
// previous sample opens it if it lies within a window's length.
func rollupCandle(a *rollupArg) float64 {
	ts := a.timestamps
	for len(ts) > 0 && ts[len(ts)-1] >= a.currTimestamp {
		ts = ts[:len(ts)-1]
	}
	vs := a.values[:len(ts)]
	first := math.NaN()
	if a.prevTimestamp+a.window >= a.currTimestamp {
		first = a.prevValue
	}
	switch int(a.params[0]) {
	case candleOpen:
		if !math.IsNaN(first) {
			return first
		}
		if len(vs) == 0 {
			return math.NaN()
		}
		return vs[0]
	case candleClose:
		if len(vs) == 0 {
			return first
		}
		return vs[len(vs)-1]
	case candleLow, candleHigh:
		best := first
		if math.IsNaN(best) {
			if len(vs) == 0 {
				return math.NaN()
			}
			best, vs = vs[0], vs[1:]
		}
		for _, v := range vs {
			if int(a.params[0]) == candleLow {
				best = math.Min(best, v)
			} else {
				best = math.Max(best, v)
			}
		}
		return best
	}
	return math.NaN()
}

func chain(fs ...func([]float64, []int64)) func([]float64, []int64) {
	return func(vs []float64, ts []int64) {
		for _, f := range fs {
			f(vs, ts)
		}
	}
}

// removeCounterResets makes a counter monotonic: after a drop the
// counter is taken to have restarted from 0 (or, for a drop of less than
// an eighth, to have lost that much), and the loss is added to every
// later sample.
func removeCounterResets(vs []float64, _ []int64) {
	if len(vs) == 0 {
		return
	}
	var corr float64
	prev := vs[0]
	for i, v := range vs {
		if d := v - prev; d < 0 {
			if -d*8 < prev {
				corr += prev - v
			} else {
				corr += prev
			}
		}
		prev = v
		vs[i] = v + corr
		if i > 0 && vs[i] < vs[i-1] {
			vs[i] = vs[i-1]
		}
	}
}

// deltaValues replaces each sample by the change to the next one (the
// last keeps the change before it).
func deltaValues(vs []float64, _ []int64) {
	if len(vs) == 0 {
		return
	}
	var d float64
	for i := 0; i+1 < len(vs); i++ {
		d = vs[i+1] - vs[i]
		vs[i] = d
	}
	vs[len(vs)-1] = d
}

// derivValues replaces each sample by the change per second to the next
// one (the last keeps the one before it).
func derivValues(vs []float64, ts []int64) {
	if len(vs) == 0 {
		return
	}
	var d float64
	prevV, prevT := vs[0], ts[0]
	for i := 0; i+1 < len(vs); i++ {
		v, t := vs[i+1], ts[i+1]
		if t == prevT {
			vs[i] = d
			continue
		}
		d = (v - prevV) / (float64(t-prevT) / 1000)
		vs[i] = d
		prevV, prevT = v, t
	}
	vs[len(vs)-1] = d
}

// intervalValues replaces each sample by the seconds since the one
// before it (the first takes the second's).
func intervalValues(vs []float64, ts []int64) {
	prev := math.NaN()
	for i, t := range ts {
		s := float64(t) / 1000
		vs[i] = s - prev
		prev = s
	}
	if len(vs) > 1 {
		vs[0] = vs[1]
	}
}
