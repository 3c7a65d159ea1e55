package query

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// histogram(x) by (g): VictoriaMetrics counts each step's values of a
// group into its vmrange buckets (rollup_buckets.go) and answers them as
// cumulative `le` buckets, one series per bound that any step of the
// range needs. So it is two functions: histogramBuckets counts a step's
// buckets (a series per non-empty vmrange), and histogramLE, given also
// the buckets of the whole range, answers the cumulative le series:
//
//	histogram(x)  ->  metricsql_histogram_le(B, max_over_time((B)[range:step] @ end))
//	                  with B = metricsql_histogram_buckets(x, "")
//
// histogramLE is prometheus_buckets too, and turns vmrange buckets into
// le buckets for histogram_quantile.

func histogramExtensions() []extension {
	return []extension{
		{fnDef(internalPrefix+"histogram_buckets", -1, vec, txt), histogramBuckets},
		{fnDef(internalPrefix+"histogram_le", 0, vec, vec), histogramLE},
		{fnDef(internalPrefix+"histogram_share", 0, scl, vec, txt), histogramShare},
	}
}

// histogramBuckets answers, per group of args[0] (grouped by args[1:]),
// the count of each non-empty vmrange bucket of this step's values.
func histogramBuckets(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	keys, groups := groupingArgs(args, 1).group(vals[0])
	b := labels.NewBuilder(labels.EmptyLabels())
	for i, gr := range groups {
		counts := map[int]float64{}
		for _, s := range gr {
			if idx, ok := vmBucket(s.F); ok {
				counts[idx]++
			}
		}
		for _, idx := range slices.Sorted(mapKeys(counts)) {
			b.Reset(keys[i])
			b.Set("vmrange", vmRange(idx))
			enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: counts[idx]})
		}
	}
	return enh.Out, nil
}

func mapKeys(m map[int]float64) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// leBound is one le series of a group: its bound and the vmrange bucket
// whose count it adds ("" for a bound that only closes a gap).
type leBound struct {
	le      string
	vmrange string
}

// histogramLE answers the cumulative le series of each group of args[1]
// (the vmrange series of the whole range, valued with their maximum)
// with this step's counts from args[0], as VictoriaMetrics turns vmrange
// buckets into le buckets: a bound at the end of each bucket, one at the
// start of a bucket that does not follow the previous one, and +Inf.
// Series of args[0] that have an le label and no vmrange pass as they
// are.
func histogramLE(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	type bucket struct {
		vmrange, startStr, endStr string
		start, end                float64
	}
	groupOf := func(ls labels.Labels) labels.Labels {
		return labels.NewBuilder(ls).Del("vmrange", "le").Labels()
	}
	groups := map[uint64][]bucket{}
	groupLabels := map[uint64]labels.Labels{}
	for _, s := range vals[1] {
		vr := s.Metric.Get("vmrange")
		if s.F <= 0 {
			continue // a bucket empty over the whole range
		}
		startStr, endStr, ok := strings.Cut(vr, "...")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseFloat(startStr, 64)
		end, err2 := strconv.ParseFloat(endStr, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		g := groupOf(s.Metric)
		h := g.Hash()
		groupLabels[h] = g
		groups[h] = append(groups[h], bucket{vr, startStr, endStr, start, end})
	}
	counts := map[uint64]map[string]float64{}
	for _, s := range vals[0] {
		if !s.Metric.Has("vmrange") {
			if s.Metric.Has("le") {
				enh.Out = append(enh.Out, s)
			}
			continue
		}
		h := groupOf(s.Metric).Hash()
		if counts[h] == nil {
			counts[h] = map[string]float64{}
		}
		counts[h][s.Metric.Get("vmrange")] = s.F
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	for h, bs := range groups {
		slices.SortFunc(bs, func(x, y bucket) int {
			switch {
			case x.end < y.end:
				return -1
			case x.end > y.end:
				return 1
			}
			return 0
		})
		var bounds []leBound
		seen := map[string]int{}
		prevEnd := 0.0
		for _, x := range bs {
			if x.start != prevEnd {
				if _, ok := seen[x.startStr]; !ok {
					seen[x.startStr] = len(bounds)
					bounds = append(bounds, leBound{le: x.startStr})
				}
			}
			if i, ok := seen[x.endStr]; ok {
				// The same bound twice: its counts add up.
				bounds[i].vmrange += "|" + x.vmrange
			} else {
				seen[x.endStr] = len(bounds)
				bounds = append(bounds, leBound{le: x.endStr, vmrange: x.vmrange})
			}
			prevEnd = x.end
		}
		if len(bs) > 0 && !math.IsInf(bs[len(bs)-1].end, 1) {
			bounds = append(bounds, leBound{le: "+Inf"})
		}
		var total float64
		for _, bd := range bounds {
			for _, vr := range strings.Split(bd.vmrange, "|") {
				if v := counts[h][vr]; v > 0 {
					total += v
				}
			}
			b.Reset(groupLabels[h])
			b.Set("le", bd.le)
			enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: total})
		}
	}
	return enh.Out, nil
}

// histogramShare answers, per group of le buckets (args[1], grouped by
// their labels without le and the name), the share of samples at or
// below le (args[0]), interpolated within its bucket, as
// VictoriaMetrics' histogram_share; with a bounds label (args[2]) also
// the shares at the bucket's bounds, labelled "lower" and "upper".
func histogramShare(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	leReq := scalarArg(vals, 0)
	boundsLabel := stringArg(args[2])
	type bucket struct {
		le, v float64
	}
	groups := map[uint64][]bucket{}
	groupLabels := map[uint64]labels.Labels{}
	for _, s := range vals[1] {
		le, err := strconv.ParseFloat(s.Metric.Get("le"), 64)
		if err != nil || s.H != nil {
			continue
		}
		g := labels.NewBuilder(s.Metric).Del("le", labels.MetricName).Labels()
		h := g.Hash()
		groupLabels[h] = g
		groups[h] = append(groups[h], bucket{le, s.F})
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	emit := func(g labels.Labels, bound string, v float64) {
		if math.IsNaN(v) {
			return
		}
		if bound != "" {
			b.Reset(g)
			b.Set(boundsLabel, bound)
			g = b.Labels()
		}
		enh.Out = append(enh.Out, promql.Sample{Metric: g, F: v})
	}
	for h, bs := range groups {
		slices.SortStableFunc(bs, func(x, y bucket) int {
			switch {
			case x.le < y.le:
				return -1
			case x.le > y.le:
				return 1
			}
			return 0
		})
		// Buckets of the same bound add up; a bucket below the one
		// before it (or NaN) takes its value.
		merged := bs[:1]
		for _, x := range bs[1:] {
			if last := &merged[len(merged)-1]; x.le == last.le {
				last.v += x.v
			} else {
				merged = append(merged, x)
			}
		}
		if math.IsNaN(merged[0].v) {
			merged[0].v = 0
		}
		for j := 1; j < len(merged); j++ {
			if math.IsNaN(merged[j].v) || merged[j-1].v > merged[j].v {
				merged[j].v = merged[j-1].v
			}
		}
		q, lower, upper := shareBelow(leReq, merged[len(merged)-1].v, func(yield func(le, v float64) bool) {
			for _, x := range merged {
				if !yield(x.le, x.v) {
					return
				}
			}
		})
		emit(groupLabels[h], "", q)
		if boundsLabel != "" {
			emit(groupLabels[h], "lower", lower)
			emit(groupLabels[h], "upper", upper)
		}
	}
	return enh.Out, nil
}

// shareBelow is the share of samples at or below leReq among buckets
// (ascending bounds, cumulative counts, total the last), with the shares
// at the bounds of the bucket it falls in.
func shareBelow(leReq, total float64, buckets func(func(le, v float64) bool)) (q, lower, upper float64) {
	switch {
	case math.IsNaN(leReq):
		return math.NaN(), math.NaN(), math.NaN()
	case leReq < 0:
		return 0, 0, 0
	case math.IsInf(leReq, 1):
		return 1, 1, 1
	}
	var vPrev, lePrev float64
	q, lower, upper = 1, 1, 1
	buckets(func(le, v float64) bool {
		if leReq >= le {
			vPrev, lePrev = v, le
			return true
		}
		lower = vPrev / total
		switch {
		case math.IsInf(le, 1):
			q, upper = lower, 1
		case lePrev == leReq:
			q, upper = lower, lower
		default:
			upper = v / total
			q = lower + (v-vPrev)/total*(leReq-lePrev)/(le-lePrev)
		}
		return false
	})
	return q, lower, upper
}
