package query

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/promql/parser"
)

// The translator's rewrites of MetricsQL functions and aggregations into
// calls of the functions registered in transform.go, transform_range.go,
// aggr.go and aggr_histogram.go, or into plain PromQL (the syntax is in
// translate_syntax.go).

// rangeSeriesArg names the range transforms (transform_range.go) with
// the index of their series argument: the translator hands them the
// whole query range (wholeRange).
var rangeSeriesArg = map[string]int{
	"range_max": 0, "range_min": 0, "range_sum": 0, "range_avg": 0, "range_first": 0, "range_last": 0,
	"range_stddev": 0, "range_stdvar": 0, "range_mad": 0, "range_quantile": 1, "range_zscore": 0,
	"range_normalize": 0, "range_linear_regression": 0, "range_trim_outliers": 1, "range_trim_spikes": 1,
	"range_trim_zscore": 1, "running_sum": 0, "running_max": 0, "running_min": 0, "running_avg": 0,
	"keep_last_value": 0, "keep_next_value": 0, "interpolate": 0, "remove_resets": 0, "smooth_exponential": 0,
}

// dropsName lists the range transforms whose results lose the metric
// name in VictoriaMetrics (the engine drops the name of what every
// range-vector function returns; for the other range transforms the
// translator puts it back, as VictoriaMetrics keeps it).
var dropsName = map[string]bool{
	"range_max": true, "range_min": true, "range_avg": true, "range_sum": true,
	"running_sum": true, "running_max": true, "running_min": true, "running_avg": true,
}

// regexpArg names the step transforms with a regular expression
// argument, checked before the query runs.
var regexpArg = map[string]int{"label_match": 2, "label_mismatch": 2, "label_transform": 2}

// wholeRange wraps a vector expression as the subquery of the whole
// query range at the query step, pinned with @ to the last step, so that
// a range-vector function sees the whole range at every step and the
// engine evaluates it once. An instant query's range is its one instant.
// The subquery's grid is the engine's, aligned to multiples of the step:
// for a range whose start is not a multiple of the step the points would
// fall between the query's steps, so such a range is refused (unaligned;
// Grafana aligns start to the step).
//
// The engine evaluates a subquery pinned with @ inside another one over
// a shifted window in a range query, so a range transform (or default,
// histogram... whatever sees the whole range) over an argument that
// already holds one is refused (see nestedRange).
func (t *translator) wholeRange(inner parser.Expr) *parser.SubqueryExpr {
	if t.stepMs > 0 && t.nestedRange == "" && pinnedWithin(inner) {
		t.nestedRange = inner.String()
	}
	if t.stepMs > 0 && t.startMs%t.stepMs != 0 && t.unaligned == "" {
		t.unaligned = t.within
	}
	stepMs, lastMs, rangeMs := int64(1), t.endMs, int64(1)
	if t.stepMs > 0 {
		stepMs = t.stepMs
		lastMs = t.startMs + (t.endMs-t.startMs)/stepMs*stepMs
		rangeMs = lastMs - t.startMs + stepMs
	}
	at := lastMs
	return &parser.SubqueryExpr{
		Expr:      paren(inner),
		Range:     time.Duration(rangeMs) * time.Millisecond,
		Step:      time.Duration(stepMs) * time.Millisecond,
		Timestamp: &at,
	}
}

// overRange calls the rollup fn (last_over_time: the series present
// anywhere in the range; max_over_time...) over the whole range of inner.
func (t *translator) overRange(fn string, inner parser.Expr) *parser.Call {
	return &parser.Call{Func: parser.Functions[fn], Args: parser.Expressions{t.wholeRange(inner)}}
}

// seriesArg translates an argument that must be an instant vector;
// a scalar becomes vector(scalar), as MetricsQL treats numbers as series
// without labels.
func (t *translator) seriesArg(e metricsql.Expr) (parser.Expr, error) {
	pe, err := t.expr(e)
	if err != nil {
		return nil, err
	}
	switch pe.Type() {
	case parser.ValueTypeVector:
		return pe, nil
	case parser.ValueTypeScalar:
		return &parser.Call{Func: parser.Functions["vector"], Args: parser.Expressions{pe}}, nil
	}
	return nil, badData("%s: expected a series expression, got a %s", e.AppendString(nil), parser.DocumentedType(pe.Type()))
}

func (t *translator) internalCall(name string, args ...parser.Expr) *parser.Call {
	return &parser.Call{Func: parser.Functions[name], Args: args}
}

func str(s string) *parser.StringLiteral { return &parser.StringLiteral{Val: s} }

func num(v float64) *parser.NumberLiteral { return &parser.NumberLiteral{Val: v} }

// unionOf joins expressions with union(), or returns the one.
func (t *translator) unionOf(es []parser.Expr) parser.Expr {
	if len(es) == 1 {
		return es[0]
	}
	return t.internalCall("union", es...)
}

// mqlCall translates the MetricsQL functions that need more than a call
// of the same name; ok is false for the rest.
func (t *translator) mqlCall(fe *metricsql.FuncExpr, name string) (out parser.Expr, ok bool, err error) {
	if strings.HasPrefix(name, internalPrefix) {
		return nil, true, t.unsupported(name)
	}
	if split, ok := orSplit(fe); ok {
		var es []parser.Expr
		for _, f := range split {
			e, err := t.call(f)
			if err != nil {
				return nil, true, err
			}
			es = append(es, e)
		}
		return t.unionOf(es), true, nil
	}
	switch name {
	case "", "union":
		var es []parser.Expr
		for _, a := range fe.Args {
			e, err := t.seriesArg(a)
			if err != nil {
				return nil, true, err
			}
			es = append(es, e)
		}
		if len(es) == 0 {
			return nil, true, badData("%s: union needs at least one argument", fe.AppendString(nil))
		}
		return t.internalCall("union", es...), true, nil
	case "now":
		if len(fe.Args) != 0 {
			return nil, true, badData("%s: now() takes no arguments", fe.AppendString(nil))
		}
		return num(float64(t.nowMs) / 1000), true, nil
	case "sort_by_label", "sort_by_label_desc":
		// The engine's experimental functions of these names order
		// naturally; VictoriaMetrics compares the values as strings.
		return t.callAs(fe, internalPrefix+name)
	case "drop_common_labels":
		var es []parser.Expr
		for _, a := range fe.Args {
			e, err := t.seriesArg(a)
			if err != nil {
				return nil, true, err
			}
			es = append(es, e)
		}
		if len(es) == 0 {
			return nil, true, badData("%s: drop_common_labels needs at least one argument", fe.AppendString(nil))
		}
		// The labels common to the series over the whole range.
		x := t.unionOf(es)
		all := t.overRange("last_over_time", x)
		return t.internalCall(internalPrefix+"drop_common_labels", x, all), true, nil
	case "limit_offset":
		if len(fe.Args) != 3 {
			return nil, true, badData("%s: limit_offset takes a limit, an offset and the series", fe.AppendString(nil))
		}
		limit, err := t.expr(fe.Args[0])
		if err != nil {
			return nil, true, err
		}
		offset, err := t.expr(fe.Args[1])
		if err != nil {
			return nil, true, err
		}
		x, err := t.seriesArg(fe.Args[2])
		if err != nil {
			return nil, true, err
		}
		all := t.overRange("last_over_time", x)
		return t.internalCall(internalPrefix+"limit_offset", limit, offset, x, all), true, nil
	case "prometheus_buckets":
		if len(fe.Args) != 1 {
			return nil, true, badData("%s: prometheus_buckets takes the buckets", fe.AppendString(nil))
		}
		x, err := t.seriesArg(fe.Args[0])
		if err != nil {
			return nil, true, err
		}
		return t.leBuckets(x), true, nil
	case "histogram_quantile":
		// VictoriaMetrics' buckets (vmrange, as histogram_over_time
		// answers them) become le buckets first; a quantile of no
		// samples (NaN) is no point, as in VictoriaMetrics.
		if len(fe.Args) != 2 {
			break
		}
		phi, err := t.expr(fe.Args[0])
		if err != nil {
			return nil, true, err
		}
		x, err := t.seriesArg(fe.Args[1])
		if err != nil {
			return nil, true, err
		}
		if vmrangeBuckets(fe.Args[1]) {
			x = t.leBuckets(x)
		}
		q := &parser.Call{Func: parser.Functions["histogram_quantile"], Args: parser.Expressions{phi, x}}
		return t.internalCall(internalPrefix+"drop_nan", q), true, nil
	case "histogram_share":
		if len(fe.Args) != 2 && len(fe.Args) != 3 {
			return nil, true, badData("%s: histogram_share takes le, the buckets and optionally a label for the bounds", fe.AppendString(nil))
		}
		le, err := t.expr(fe.Args[0])
		if err != nil {
			return nil, true, err
		}
		x, err := t.seriesArg(fe.Args[1])
		if err != nil {
			return nil, true, err
		}
		if vmrangeBuckets(fe.Args[1]) {
			x = t.leBuckets(x)
		}
		bounds := ""
		if len(fe.Args) == 3 {
			s, ok := fe.Args[2].(*metricsql.StringExpr)
			if !ok {
				return nil, true, badData("%s: the bounds label of histogram_share is a label name in quotes", fe.AppendString(nil))
			}
			bounds = s.S
		}
		return t.internalCall(internalPrefix+"histogram_share", le, x, str(bounds)), true, nil
	case "histogram_quantiles":
		out, err := t.perPhi(fe, "histogram_quantiles", fe.Args, "the buckets", func(phi *metricsql.NumberExpr, x metricsql.Expr) (parser.Expr, error) {
			return t.call(&metricsql.FuncExpr{Name: "histogram_quantile", Args: []metricsql.Expr{phi, x}})
		})
		return out, true, err
	case "range_normalize":
		if len(fe.Args) > 1 {
			var es []parser.Expr
			for _, a := range fe.Args {
				e, err := t.call(&metricsql.FuncExpr{Name: fe.Name, Args: []metricsql.Expr{a}})
				if err != nil {
					return nil, true, err
				}
				es = append(es, e)
			}
			return t.unionOf(es), true, nil
		}
	}
	if i, ok := regexpArg[name]; ok && i < len(fe.Args) {
		if s, ok := fe.Args[i].(*metricsql.StringExpr); ok {
			if _, err := regexp.Compile(s.S); err != nil {
				return nil, true, badData("%s: argument %d: %v", fe.AppendString(nil), i+1, err)
			}
		}
	}
	if at, ok := rangeSeriesArg[name]; ok {
		out, err := t.rangeCall(fe, name, at)
		return out, true, err
	}
	return nil, false, nil
}

// callAs translates fe as a call of the registered function name.
func (t *translator) callAs(fe *metricsql.FuncExpr, name string) (parser.Expr, bool, error) {
	fn := parser.Functions[name]
	args := make(parser.Expressions, 0, len(fe.Args))
	for _, a := range fe.Args {
		pe, err := t.expr(a)
		if err != nil {
			return nil, true, err
		}
		args = append(args, pe)
	}
	return &parser.Call{Func: fn, Args: args}, true, nil
}

// rangeCall translates a range transform: its series argument becomes
// the whole range; where VictoriaMetrics keeps the metric name, the
// name is moved to keptNameLabel before the engine drops it and moved
// back after.
func (t *translator) rangeCall(fe *metricsql.FuncExpr, name string, at int) (parser.Expr, error) {
	fn := parser.Functions[name]
	if len(fe.Args) != len(fn.ArgTypes) {
		return nil, badData("%s: %s takes %d argument(s), got %d", fe.AppendString(nil), name, len(fn.ArgTypes), len(fe.Args))
	}
	args := make(parser.Expressions, len(fe.Args))
	var series parser.Expr
	for i, a := range fe.Args {
		if i != at {
			pe, err := t.expr(a)
			if err != nil {
				return nil, err
			}
			args[i] = pe
			continue
		}
		pe, err := t.seriesArg(a)
		if err != nil {
			return nil, err
		}
		series = pe
		args[i] = t.wholeRange(pe)
	}
	if dropsName[name] || fe.KeepMetricNames {
		return &parser.Call{Func: fn, Args: args}, nil
	}
	// The name travels in another label, which the engine keeps.
	args[at] = t.wholeRange(t.carryName(series))
	return t.internalCall(internalPrefix+"name_back", &parser.Call{Func: fn, Args: args}), nil
}

// mqlAggregates names the aggregations registered in aggr.go (reduce:
// one series per group) and those answering series of their own
// (keepOriginal), by MetricsQL name, with their leading scalar params.
var mqlAggregates = map[string]struct {
	params       int
	keepOriginal bool
}{
	"mode": {0, false}, "distinct": {0, false}, "geomean": {0, false}, "mad": {0, false}, "sum2": {0, false},
	"any": {0, true}, "share": {0, true}, "zscore": {0, true}, "limitk": {1, true}, "outliers_mad": {1, true},
	"outliers_iqr": {0, true},
}

// rangeScore names the whole-range aggregations with the range
// transform that scores each series and whether the lowest win.
var rangeScore = map[string]struct {
	score  string
	bottom bool
}{
	"topk_max": {"range_max", false}, "topk_min": {"range_min", false}, "topk_avg": {"range_avg", false},
	"topk_median": {"range_quantile", false}, "topk_last": {"range_last", false},
	"bottomk_max": {"range_max", true}, "bottomk_min": {"range_min", true}, "bottomk_avg": {"range_avg", true},
	"bottomk_median": {"range_quantile", true}, "bottomk_last": {"range_last", true},
}

// groupingStrings renders an aggregation's modifier as string arguments.
func groupingStrings(ae *metricsql.AggrFuncExpr) ([]parser.Expr, error) {
	op := strings.ToLower(ae.Modifier.Op)
	if op != "" && op != "by" && op != "without" {
		return nil, badData("%s: unknown grouping modifier %q", ae.AppendString(nil), ae.Modifier.Op)
	}
	out := []parser.Expr{str(op)}
	for _, l := range ae.Modifier.Args {
		out = append(out, str(l))
	}
	return out, nil
}

// aggrSeries translates the series argument ae.Args[i] of a MetricsQL
// aggregation and renders its grouping modifier as string arguments.
func (t *translator) aggrSeries(ae *metricsql.AggrFuncExpr, i int) (parser.Expr, []parser.Expr, error) {
	x, err := t.seriesArg(ae.Args[i])
	if err != nil {
		return nil, nil, err
	}
	g, err := groupingStrings(ae)
	if err != nil {
		return nil, nil, err
	}
	return x, g, nil
}

// mqlAggregate translates the MetricsQL aggregations the engine's
// grammar lacks; ok is false for the rest.
func (t *translator) mqlAggregate(ae *metricsql.AggrFuncExpr, name string) (parser.Expr, bool, error) {
	nargs := func(want int) error {
		if len(ae.Args) != want {
			return badData("%s: %s takes %d argument(s), got %d", ae.AppendString(nil), name, want, len(ae.Args))
		}
		return nil
	}
	switch name {
	case "median":
		if err := nargs(1); err != nil {
			return nil, true, err
		}
		q := *ae
		q.Name = "quantile"
		q.Args = []metricsql.Expr{&metricsql.NumberExpr{N: 0.5}, ae.Args[0]}
		out, err := t.aggregate(&q)
		return out, true, err
	case "quantiles":
		out, err := t.perPhi(ae, "quantiles", ae.Args, "the series", func(phi *metricsql.NumberExpr, x metricsql.Expr) (parser.Expr, error) {
			q := *ae
			q.Name = "quantile"
			q.Limit = 0
			q.Args = []metricsql.Expr{phi, x}
			return t.aggregate(&q)
		})
		return out, true, err
	}
	if name == "histogram" {
		if err := nargs(1); err != nil {
			return nil, true, err
		}
		x, g, err := t.aggrSeries(ae, 0)
		if err != nil {
			return nil, true, err
		}
		buckets := t.internalCall(internalPrefix+"histogram_buckets", append([]parser.Expr{x}, g...)...)
		return t.leBuckets(buckets), true, nil
	}
	if name == "outliersk" {
		// The k series furthest from the group's median over the range:
		// scored by the sum of their squared distances.
		if err := nargs(2); err != nil {
			return nil, true, err
		}
		k, err := t.expr(ae.Args[0])
		if err != nil {
			return nil, true, err
		}
		x, g, err := t.aggrSeries(ae, 1)
		if err != nil {
			return nil, true, err
		}
		dist := t.internalCall(internalPrefix+"median_dist2", append([]parser.Expr{t.carryName(x)}, g...)...)
		steps := 1.0
		if t.stepMs > 0 {
			steps = float64((t.endMs-t.startMs)/t.stepMs + 1)
		}
		score := t.internalCall(internalPrefix+"name_back", t.internalCall(internalPrefix+"range_sum_full", num(steps), t.wholeRange(dist)))
		args := append([]parser.Expr{k, x, score, str(""), str("top")}, g...)
		return t.internalCall(internalPrefix+"topk_range", args...), true, nil
	}
	if rs, ok := rangeScore[name]; ok {
		if len(ae.Args) != 2 && len(ae.Args) != 3 {
			return nil, true, badData("%s: %s takes k, the series and optionally a label for the sum of the rest", ae.AppendString(nil), name)
		}
		k, err := t.expr(ae.Args[0])
		if err != nil {
			return nil, true, err
		}
		x, g, err := t.aggrSeries(ae, 1)
		if err != nil {
			return nil, true, err
		}
		remaining := ""
		if len(ae.Args) == 3 {
			s, ok := ae.Args[2].(*metricsql.StringExpr)
			if !ok {
				return nil, true, badData("%s: the third argument of %s is a label name in quotes", ae.AppendString(nil), name)
			}
			remaining = s.S
		}
		scoreArgs := parser.Expressions{t.wholeRange(t.carryName(x))}
		if rs.score == "range_quantile" {
			scoreArgs = parser.Expressions{num(0.5), scoreArgs[0]}
		}
		dir := "top"
		if rs.bottom {
			dir = "bottom"
		}
		score := t.internalCall(internalPrefix+"name_back", t.internalCall(rs.score, scoreArgs...))
		args := append([]parser.Expr{k, x, score, str(remaining), str(dir)}, g...)
		return t.internalCall(internalPrefix+"topk_range", args...), true, nil
	}
	agg, ok := mqlAggregates[name]
	if !ok {
		return nil, false, nil
	}
	if err := nargs(agg.params + 1); err != nil {
		return nil, true, err
	}
	var args []parser.Expr
	for _, a := range ae.Args[:agg.params] {
		pe, err := t.expr(a)
		if err != nil {
			return nil, true, err
		}
		args = append(args, pe)
	}
	x, g, err := t.aggrSeries(ae, agg.params)
	if err != nil {
		return nil, true, err
	}
	args = append(append(args, x), g...)
	var out parser.Expr = t.internalCall(internalPrefix+name, args...)
	if strings.HasPrefix(name, "outliers_") {
		// VictoriaMetrics answers the whole series that stray at any
		// step: those the per-step check flags anywhere in the range.
		flagged := t.overRange("last_over_time", out)
		out = &parser.BinaryExpr{Op: parser.LAND, LHS: operand(x), RHS: flagged, VectorMatching: &parser.VectorMatching{Card: parser.CardManyToMany}}
	}
	return out, true, nil
}

// limitGroupsOf applies an aggregation's limit modifier: at most that
// many groups of its answer (VictoriaMetrics keeps the first it meets).
func (t *translator) limitGroupsOf(ae *metricsql.AggrFuncExpr, out parser.Expr) (parser.Expr, error) {
	if ae.Limit <= 0 {
		return out, nil
	}
	g, err := groupingStrings(ae)
	if err != nil {
		return nil, err
	}
	// The groups are chosen over the whole range, as VictoriaMetrics
	// keeps at most that many series; over an aggregation that already
	// holds a function of the whole range (topk_max...), whose answer
	// the engine cannot pin again, they are chosen at each step.
	var all parser.Expr = out
	if !pinnedWithin(out) {
		defer t.translating("limit " + strconv.Itoa(ae.Limit))()
		all = t.overRange("last_over_time", out)
	}
	return t.internalCall(internalPrefix+"limit", append([]parser.Expr{num(float64(ae.Limit)), out, all}, g...)...), nil
}

// checkTimezone refuses an unknown time zone of timezone_offset.
func checkTimezone(fe *metricsql.FuncExpr) error {
	if len(fe.Args) != 1 {
		return badData("%s: timezone_offset takes one time zone name", fe.AppendString(nil))
	}
	s, ok := fe.Args[0].(*metricsql.StringExpr)
	if !ok {
		return badData("%s: the time zone must be a string", fe.AppendString(nil))
	}
	if _, err := time.LoadLocation(s.S); err != nil {
		return badData("%s: %v", fe.AppendString(nil), err)
	}
	return nil
}

// leBuckets turns the vmrange buckets of x into le buckets over the
// whole range (see histogramLE).
func (t *translator) leBuckets(x parser.Expr) parser.Expr {
	all := t.overRange("max_over_time", x)
	return t.internalCall(internalPrefix+"histogram_le", x, all)
}

// vmrangeBuckets reports whether e answers VictoriaMetrics' vmrange
// buckets: it uses histogram_over_time or a vmrange label (the histogram
// aggregation and prometheus_buckets answer le buckets already).
func vmrangeBuckets(e metricsql.Expr) bool {
	s := string(e.AppendString(nil))
	return (strings.Contains(s, "histogram_over_time(") || strings.Contains(s, "vmrange")) && !strings.Contains(s, "prometheus_buckets(")
}

// perPhi translates a MetricsQL function of the form f("label", phi1,
// ..., phiN, x) (histogram_quantiles, quantiles): one expression per phi,
// built by one, each labelled label=phi, in one union. last names x in
// error messages.
func (t *translator) perPhi(e metricsql.Expr, name string, args []metricsql.Expr, last string, one func(phi *metricsql.NumberExpr, x metricsql.Expr) (parser.Expr, error)) (parser.Expr, error) {
	text := e.AppendString(nil)
	if len(args) < 3 {
		return nil, badData("%s: %s takes a label name, one or more phis and %s", text, name, last)
	}
	label, ok := args[0].(*metricsql.StringExpr)
	if !ok {
		return nil, badData("%s: the first argument of %s is a label name in quotes", text, name)
	}
	var es []parser.Expr
	for _, a := range args[1 : len(args)-1] {
		phi, ok := a.(*metricsql.NumberExpr)
		if !ok {
			return nil, badData("%s: the phis of %s must be numbers", text, name)
		}
		q, err := one(phi, args[len(args)-1])
		if err != nil {
			return nil, err
		}
		es = append(es, t.internalCall("label_set", q, str(label.S), str(strconv.FormatFloat(phi.N, 'g', -1, 64))))
	}
	return t.unionOf(es), nil
}
