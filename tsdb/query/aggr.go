package query

import (
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// MetricsQL aggregations the Prometheus engine lacks. The engine's
// grammar has a fixed set of aggregation operators, so the translator
// rewrites these into calls of registered functions that group the
// instant vector of each step themselves: the grouping travels as string
// arguments after the series argument, "by" or "without" (or "" for
// none) and then the label names, as in
//
//	mode(x) by (job)  ->  metricsql_mode(x, "by", "job")
//
// Aggregations that rank series over the whole query range (topk_max and
// its kin) get a second vector: each series' score, computed by a range
// transform over the whole range (see transform_range.go).

// grouping is how an aggregation groups series: by some labels, or
// without some labels (and the metric name).
type grouping struct {
	without bool
	names   []string
}

// groupingArgs reads the grouping from args[at:] ("by"/"without"/"",
// then label names).
func groupingArgs(args parser.Expressions, at int) grouping {
	s := strArgs(args, at)
	if len(s) == 0 {
		return grouping{}
	}
	return grouping{without: s[0] == "without", names: s[1:]}
}

// key is the labels of the group ls belongs to.
func (g grouping) key(b *labels.Builder, ls labels.Labels) labels.Labels {
	b.Reset(ls)
	if g.without {
		b.Del(g.names...)
		b.Del(labels.MetricName, keptNameLabel)
	} else {
		b.Keep(g.names...)
	}
	return b.Labels()
}

// group splits v into groups in the order of their first series; each
// group's series are in the order of their labels.
func (g grouping) group(v promql.Vector) (keys []labels.Labels, groups [][]promql.Sample) {
	b := labels.NewBuilder(labels.EmptyLabels())
	at := map[uint64]int{}
	for _, s := range v {
		if s.H != nil || math.IsNaN(s.F) {
			continue
		}
		k := g.key(b, s.Metric)
		h := k.Hash()
		i, ok := at[h]
		if !ok {
			i = len(keys)
			at[h] = i
			keys = append(keys, k)
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], s)
	}
	for _, gr := range groups {
		slices.SortFunc(gr, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
	}
	return keys, groups
}

// reduce returns an aggregation answering one value per group, labelled
// with the group's labels. The series argument is args[0].
func reduce(f func(vs []float64) float64) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		keys, groups := groupingArgs(args, 1).group(vals[0])
		for i, gr := range groups {
			vs := valuesOf(gr)
			if v := f(vs); !math.IsNaN(v) {
				enh.Out = append(enh.Out, promql.Sample{Metric: keys[i], F: v})
			}
		}
		return enh.Out, nil
	}
}

// perSeries returns an aggregation answering, for each group, some of
// its series with their own labels and new values. params are the
// scalar arguments before the series argument, at args[len(params)].
func perSeries(nParams int, f func(gr []promql.Sample, params []float64) []promql.Sample) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		params := make([]float64, nParams)
		for i := range params {
			params[i] = scalarArg(vals, i)
		}
		_, groups := groupingArgs(args, nParams+1).group(vals[nParams])
		for _, gr := range groups {
			for _, s := range f(gr, params) {
				if !math.IsNaN(s.F) {
					enh.Out = append(enh.Out, s)
				}
			}
		}
		return enh.Out, nil
	}
}

func aggregations() []extension {
	return []extension{
		{fnDef(internalPrefix+"mode", -1, vec, txt), reduce(mode)},
		{fnDef(internalPrefix+"distinct", -1, vec, txt), reduce(func(vs []float64) float64 {
			seen := map[float64]struct{}{}
			for _, v := range vs {
				seen[v] = struct{}{}
			}
			return float64(len(seen))
		})},
		{fnDef(internalPrefix+"geomean", -1, vec, txt), reduce(func(vs []float64) float64 {
			p := 1.0
			for _, v := range vs {
				p *= v
			}
			return math.Pow(p, 1/float64(len(vs)))
		})},
		{fnDef(internalPrefix+"mad", -1, vec, txt), reduce(madOf)},
		{fnDef(internalPrefix+"sum2", -1, vec, txt), reduce(func(vs []float64) float64 {
			var s float64
			for _, v := range vs {
				s += v * v
			}
			return s
		})},
		{fnDef(internalPrefix+"any", -1, vec, txt), perSeries(0, func(gr []promql.Sample, _ []float64) []promql.Sample { return gr[:1] })},
		{fnDef(internalPrefix+"share", -1, vec, txt), perSeries(0, share)},
		{fnDef(internalPrefix+"zscore", -1, vec, txt), perSeries(0, zscore)},
		{fnDef(internalPrefix+"limitk", -1, scl, vec, txt), perSeries(1, limitk)},
		{fnDef(internalPrefix+"outliers_mad", -1, scl, vec, txt), perSeries(1, outliersMAD)},
		{fnDef(internalPrefix+"outliers_iqr", -1, vec, txt), perSeries(0, outliersIQR)},
		{fnDef(internalPrefix+"median_dist2", -1, vec, txt), perSeries(0, medianDist2)},
		{fnDef(internalPrefix+"topk_range", -1, scl, vec, vec, txt), topkRange},
		{fnDef(internalPrefix+"limit", -1, scl, vec, vec, txt), limitGroups},
	}
}

// mode is the most frequent value; of equally frequent ones the
// smallest.
func mode(vs []float64) float64 {
	slices.Sort(vs)
	best, bestN := math.NaN(), 0
	for i := 0; i < len(vs); {
		j := i
		for j < len(vs) && vs[j] == vs[i] {
			j++
		}
		if j-i > bestN {
			best, bestN = vs[i], j-i
		}
		i = j
	}
	return best
}

// share divides each non-negative value by the sum of the group's
// non-negative values.
func share(gr []promql.Sample, _ []float64) []promql.Sample {
	var sum float64
	for _, s := range gr {
		if s.F >= 0 {
			sum += s.F
		}
	}
	out := make([]promql.Sample, 0, len(gr))
	for _, s := range gr {
		if s.F >= 0 {
			out = append(out, promql.Sample{Metric: s.Metric, F: s.F / sum})
		}
	}
	return out
}

// zscore answers each value's distance from the group's mean in standard
// deviations.
func zscore(gr []promql.Sample, _ []float64) []promql.Sample {
	vs := make([]float64, len(gr))
	var sum float64
	for i, s := range gr {
		vs[i] = s.F
		sum += s.F
	}
	avg, sd := sum/float64(len(vs)), math.Sqrt(variance(vs))
	out := make([]promql.Sample, len(gr))
	for i, s := range gr {
		out[i] = promql.Sample{Metric: s.Metric, F: (s.F - avg) / sd}
	}
	return out
}

// limitk answers at most k series of the group, chosen by the hash of
// their labels so that the same series are chosen at every step.
func limitk(gr []promql.Sample, p []float64) []promql.Sample {
	k := intK(p[0], len(gr))
	slices.SortFunc(gr, func(a, b promql.Sample) int {
		ha, hb := a.Metric.Hash(), b.Metric.Hash()
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
	return gr[:k]
}

// outliersMAD answers the series further from the group's median than
// tolerance times the group's median absolute deviation.
func outliersMAD(gr []promql.Sample, p []float64) []promql.Sample {
	vs := valuesOf(gr)
	med, dev := quantileOf(0.5, vs), p[0]*madOf(vs)
	var out []promql.Sample
	for _, s := range gr {
		if math.Abs(s.F-med) > dev {
			out = append(out, s)
		}
	}
	return out
}

// outliersIQR answers the series outside the group's interquartile
// bounds: below q25 - 1.5*iqr or above q75 + 1.5*iqr.
func outliersIQR(gr []promql.Sample, _ []float64) []promql.Sample {
	vs := valuesOf(gr)
	q25, q75 := quantileOf(0.25, vs), quantileOf(0.75, vs)
	iqr := 1.5 * (q75 - q25)
	var out []promql.Sample
	for _, s := range gr {
		if s.F > q75+iqr || s.F < q25-iqr {
			out = append(out, s)
		}
	}
	return out
}

// medianDist2 answers each series' squared distance from the group's
// median: outliersk ranks series by its sum over the range.
func medianDist2(gr []promql.Sample, _ []float64) []promql.Sample {
	vs := valuesOf(gr)
	med := quantileOf(0.5, vs)
	out := make([]promql.Sample, len(gr))
	for i, s := range gr {
		out[i] = promql.Sample{Metric: s.Metric, F: (s.F - med) * (s.F - med)}
	}
	return out
}

// intK bounds k to 0..n, as an index.
func intK(k float64, n int) int {
	if math.IsNaN(k) || k < 0 {
		return 0
	}
	if k >= float64(n) {
		return n
	}
	return int(k)
}

// topkRange answers, per group, the k series (args[1]) whose scores
// (args[2], the same series scored over the whole range) are highest ("top") or lowest ("bottom"); with a remaining-sum
// label (args[3], "name" or "name=value"), also the sum of the others.
// args[4] is "top" or "bottom", the grouping follows.
func topkRange(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	k := scalarArg(vals, 0)
	remaining, bottom := stringArg(args[3]), stringArg(args[4]) == "bottom"
	g := groupingArgs(args, 5)
	current := map[uint64]promql.Sample{}
	for _, s := range vals[1] {
		if s.H == nil && !math.IsNaN(s.F) {
			current[s.Metric.Hash()] = s
		}
	}
	// Group the scored series: every series of the range has a score.
	keys, groups := g.group(vals[2])
	b := labels.NewBuilder(labels.EmptyLabels())
	for gi, gr := range groups {
		slices.SortStableFunc(gr, func(a, b promql.Sample) int {
			c := 0
			switch {
			case a.F > b.F:
				c = -1
			case a.F < b.F:
				c = 1
			}
			if bottom {
				c = -c
			}
			return c
		})
		kn := intK(k, len(gr))
		for _, s := range gr[:kn] {
			if cur, ok := current[s.Metric.Hash()]; ok {
				enh.Out = append(enh.Out, cur)
			}
		}
		if remaining == "" {
			continue
		}
		var sum float64
		n := 0
		for _, s := range gr[kn:] {
			if cur, ok := current[s.Metric.Hash()]; ok {
				sum += cur.F
				n++
			}
		}
		if n == 0 {
			continue
		}
		name, value, ok := strings.Cut(remaining, "=")
		if !ok {
			value = remaining
		}
		b.Reset(keys[gi])
		b.Set(name, value)
		enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: sum})
	}
	return enh.Out, nil
}

// limitGroups answers the series of args[1] in the first n groups
// (grouped by args[3:] as the aggregation grouped its input) of args[2],
// the aggregation's answer over the whole range, in the order of their
// labels: the limit modifier of an aggregation, which keeps at most n
// series over the range, not n at each step.
func limitGroups(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	g := groupingArgs(args, 3)
	keys, _ := g.group(vals[2])
	slices.SortFunc(keys, labels.Compare)
	chosen := map[uint64]bool{}
	for _, k := range keys[:intK(scalarArg(vals, 0), len(keys))] {
		chosen[k.Hash()] = true
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vals[1] {
		if chosen[g.key(b, s.Metric).Hash()] {
			enh.Out = append(enh.Out, s)
		}
	}
	return enh.Out, nil
}

// valuesOf returns the values of a group's samples, in their order.
func valuesOf(gr []promql.Sample) []float64 {
	vs := make([]float64, len(gr))
	for i, s := range gr {
		vs[i] = s.F
	}
	return vs
}
