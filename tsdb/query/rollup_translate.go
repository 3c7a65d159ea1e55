package query

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// rollupFamilies are the MetricsQL rollups that answer several series per
// input series, one per statistic, told apart by the "rollup" label: the
// statistics in order, and the function that computes one of them. A
// second argument ("max") asks for one statistic, without the label.
var rollupFamilies = map[string]struct {
	stats []string
	part  string // registered function taking the statistic's index; "" for rollup
}{
	"rollup":                 {stats: []string{"min", "max", "avg"}},
	"rollup_delta":           {stats: []string{"min", "max", "avg"}, part: "rollup_delta"},
	"rollup_increase":        {stats: []string{"min", "max", "avg"}, part: "rollup_increase"},
	"rollup_deriv":           {stats: []string{"min", "max", "avg"}, part: "rollup_deriv"},
	"rollup_rate":            {stats: []string{"min", "max", "avg"}, part: "rollup_rate"},
	"rollup_scrape_interval": {stats: []string{"min", "max", "avg"}, part: "rollup_scrape_interval"},
	"rollup_candlestick":     {stats: []string{"open", "close", "low", "high"}, part: "rollup_candlestick"},
}

// statIndex is the first parameter of a rollup family's part.
var statIndex = map[string]int{
	"min": rollupMin, "max": rollupMax, "avg": rollupAvg,
	"open": candleOpen, "close": candleClose, "low": candleLow, "high": candleHigh,
}

// aggrOverTimeFuncs are the functions aggr_over_time may name, as in
// VictoriaMetrics; those the engine lacks are in rollupDefs.
var aggrOverTimeFuncs = map[string]bool{
	"absent_over_time": true, "ascent_over_time": true, "avg_over_time": true, "changes": true,
	"count_over_time": true, "decreases_over_time": true, "default_rollup": true, "delta": true,
	"deriv": true, "deriv_fast": true, "descent_over_time": true, "distinct_over_time": true,
	"first_over_time": true, "geomean_over_time": true, "idelta": true, "ideriv": true,
	"increase": true, "increase_pure": true, "increases_over_time": true, "integrate": true,
	"irate": true, "lag": true, "last_over_time": true, "lifetime": true, "mad_over_time": true,
	"max_over_time": true, "median_over_time": true, "min_over_time": true, "mode_over_time": true,
	"present_over_time": true, "range_over_time": true, "rate": true, "rate_over_sum": true,
	"resets": true, "scrape_interval": true, "stddev_over_time": true, "stdvar_over_time": true,
	"sum_over_time": true, "sum2_over_time": true, "tfirst_over_time": true, "timestamp": true,
	"tlast_change_over_time": true, "tlast_over_time": true, "tmax_over_time": true,
	"tmin_over_time": true, "zscore_over_time": true, "iqr_over_time": true,
}

// aggrOverTimeAlias names the function behind an aggr_over_time name
// that is not a function of its own.
var aggrOverTimeAlias = map[string]string{"iqr_over_time": "outlier_iqr_over_time"}

// rollupCall translates the MetricsQL rollup functions of rollup.go;
// ok is false for any other function.
func (t *translator) rollupCall(fe *metricsql.FuncExpr, name string) (_ parser.Expr, ok bool, _ error) {
	if fam, isFam := rollupFamilies[name]; isFam {
		e, err := t.rollupFamily(fe, name, fam.stats, fam.part)
		return e, true, err
	}
	switch name {
	case "quantiles_over_time":
		e, err := t.quantilesOverTime(fe)
		return e, true, err
	case "aggr_over_time":
		e, err := t.aggrOverTime(fe)
		return e, true, err
	case "histogram_over_time":
		if len(fe.Args) != 1 {
			return nil, true, badData("%s: histogram_over_time takes 1 argument, got %d", fe.AppendString(nil), len(fe.Args))
		}
		m, err := t.matrixArg(fe.Args[0])
		if err != nil {
			return nil, true, err
		}
		inner := &parser.Call{Func: parser.Functions["histogram_over_time"], Args: parser.Expressions{m}}
		return &parser.Call{Func: parser.Functions["vm_buckets"], Args: parser.Expressions{inner}}, true, nil
	case "count_values_over_time":
		lbl, ok := fe.Args[0].(*metricsql.StringExpr)
		if len(fe.Args) != 2 || !ok {
			return nil, true, badData("%s: count_values_over_time takes a label name in quotes and a series", fe.AppendString(nil))
		}
		m, err := t.matrixArg(fe.Args[1])
		if err != nil {
			return nil, true, err
		}
		inner := &parser.Call{Func: parser.Functions["count_values_over_time"], Args: parser.Expressions{m}}
		return &parser.Call{Func: parser.Functions["vm_values"], Args: parser.Expressions{inner, &parser.StringLiteral{Val: lbl.S}}}, true, nil
	case "timestamp_with_name":
		// tlast_over_time, keeping the metric name.
		e, err := t.expr(&metricsql.FuncExpr{Name: "tlast_over_time", Args: fe.Args, KeepMetricNames: true})
		return e, true, err
	}
	d, isRollup := rollupDefs[name]
	if !isRollup {
		return nil, false, nil
	}
	if len(fe.Args) != d.params+1 {
		return nil, true, badData("%s: %s takes %d argument(s), got %d", fe.AppendString(nil), name, d.params+1, len(fe.Args))
	}
	series, params := fe.Args[0], fe.Args[1:]
	if d.paramsFirst {
		series, params = fe.Args[d.params], fe.Args[:d.params]
	}
	ps := make([]parser.Expr, len(params))
	for i, p := range params {
		var err error
		if ps[i], err = t.expr(p); err != nil {
			return nil, true, err
		}
	}
	e, err := t.rollupFunc(name, series, ps, d.silence)
	return e, true, err
}

// rollupFunc builds a call of the registered function name over series
// with the scalar parameters ps, widening the window of a context
// function (see rollup.go). silence is whether VictoriaMetrics fetches
// the 5m before the query for it.
func (t *translator) rollupFunc(name string, series metricsql.Expr, ps []parser.Expr, silence bool) (parser.Expr, error) {
	d := rollupDefs[name]
	m, err := t.matrixArg(series)
	if err != nil {
		return nil, err
	}
	args := make(parser.Expressions, 0, len(ps)+1+contextArgs)
	if d.paramsFirst {
		args = append(append(args, ps...), m)
	} else {
		args = append(append(args, m), ps...)
	}
	if d.context {
		ctx, err := t.widen(m, silence, d.shift)
		if err != nil {
			return nil, err
		}
		args = append(args, ctx...)
	}
	return &parser.Call{Func: parser.Functions[name], Args: args}, nil
}

// widen lets a context function's matrix m reach vmBack (or as far back
// as VictoriaMetrics fetches, if more) before its window and, in a range
// query, vmAhead after it, and returns the hidden arguments that tell the
// function where the window is and which samples VictoriaMetrics would
// have fetched.
func (t *translator) widen(m parser.Expr, silence, shift bool) ([]parser.Expr, error) {
	var (
		window, offset *time.Duration
		at             *int64
		startOrEnd     parser.ItemType
		subquery       bool
	)
	switch m := m.(type) {
	case *parser.MatrixSelector:
		vs := m.VectorSelector.(*parser.VectorSelector)
		window, offset, at, startOrEnd = &m.Range, &vs.OriginalOffset, vs.Timestamp, vs.StartOrEnd
	case *parser.SubqueryExpr:
		window, offset, at, startOrEnd = &m.Range, &m.OriginalOffset, m.Timestamp, m.StartOrEnd
		subquery = true
	default:
		return nil, badData("%s: expected a range vector", m)
	}
	w, off := *window, *offset
	step, instant := time.Duration(t.stepMs)*time.Millisecond, 0.0
	switch {
	case t.sqStep > 0:
		// Inside a subquery: a range evaluation at its steps, over a span
		// that starts before the query's.
		step = t.sqStep
	case t.stepMs == 0:
		// VictoriaMetrics' instant queries step by its default, 5m, as
		// Peakline's default window does.
		step, instant = time.Duration(t.unitMs)*time.Millisecond, 1
	}
	if shift {
		off -= step
	}
	fetch := max(w, step)
	if silence {
		fetch += vmSilence
	}
	back := max(fetch-w, vmBack)
	ahead := time.Duration(0)
	if instant == 0 {
		ahead = vmAhead
	}
	// VictoriaMetrics evaluates a subquery a step past the query's end.
	var past time.Duration
	if sq, ok := m.(*parser.SubqueryExpr); ok {
		past = sq.Step
		ahead = max(ahead, past)
	}
	*window = w + back + ahead
	*offset = off - ahead

	startMs, endMs := t.startMs, t.endMs
	switch {
	case at != nil:
		startMs, endMs = *at, *at
	case startOrEnd == parser.START:
		endMs = t.startMs
	case startOrEnd == parser.END:
		startMs = t.endMs
	}
	first := float64(startMs-off.Milliseconds()-fetch.Milliseconds()) / 1000
	if subquery || t.sqStep > 0 {
		first = math.NaN()
	}
	last := float64(endMs-off.Milliseconds()+past.Milliseconds()+t.sqStep.Milliseconds()) / 1000
	num := func(v float64) parser.Expr { return &parser.NumberLiteral{Val: v} }
	return []parser.Expr{num(w.Seconds()), num(ahead.Seconds()), num(first), num(last), num(step.Seconds()), num(instant)}, nil
}

// rollupFamily translates rollup(x) and rollup_*(x): a series per
// statistic with the label rollup="<statistic>", or with a second
// argument only that statistic, without the label.
func (t *translator) rollupFamily(fe *metricsql.FuncExpr, name string, stats []string, part string) (parser.Expr, error) {
	if len(fe.Args) < 1 || len(fe.Args) > 2 {
		return nil, badData("%s: %s takes 1 or 2 arguments, got %d", fe.AppendString(nil), name, len(fe.Args))
	}
	pick, label := stats, true
	if len(fe.Args) == 2 {
		s, ok := fe.Args[1].(*metricsql.StringExpr)
		if !ok || !slices.Contains(stats, s.S) {
			return nil, badData("%s: the second argument of %s must be one of %q", fe.AppendString(nil), name, stats)
		}
		pick, label = []string{s.S}, false
	}
	var branches []parser.Expr
	for _, stat := range pick {
		var (
			e   parser.Expr
			err error
		)
		if part == "" {
			e, err = t.call(&metricsql.FuncExpr{Name: stat + "_over_time", Args: fe.Args[:1]})
		} else {
			e, err = t.rollupFunc(part, fe.Args[0], []parser.Expr{&parser.NumberLiteral{Val: float64(statIndex[stat])}}, rollupDefs[part].silence)
		}
		if err != nil {
			return nil, err
		}
		if label {
			e = setLabel(e, "rollup", stat)
		}
		branches = append(branches, e)
	}
	return orAll(branches), nil
}

// quantilesOverTime translates quantiles_over_time("label", phi1, ...,
// phiN, x): quantile_over_time for each phi, told apart by the label.
func (t *translator) quantilesOverTime(fe *metricsql.FuncExpr) (parser.Expr, error) {
	if len(fe.Args) < 3 {
		return nil, badData("%s: quantiles_over_time takes a label name, one or more phis and a series", fe.AppendString(nil))
	}
	lbl, ok := fe.Args[0].(*metricsql.StringExpr)
	if !ok {
		return nil, badData("%s: the first argument of quantiles_over_time must be a label name in quotes", fe.AppendString(nil))
	}
	series := fe.Args[len(fe.Args)-1]
	var branches []parser.Expr
	for _, a := range fe.Args[1 : len(fe.Args)-1] {
		phi, ok := a.(*metricsql.NumberExpr)
		if !ok {
			return nil, badData("%s: the phis of quantiles_over_time must be numbers", fe.AppendString(nil))
		}
		m, err := t.matrixArg(series)
		if err != nil {
			return nil, err
		}
		q := &parser.Call{Func: parser.Functions["quantile_over_time"], Args: parser.Expressions{&parser.NumberLiteral{Val: phi.N}, m}}
		branches = append(branches, setLabel(q, lbl.S, fmt.Sprintf("%g", phi.N)))
	}
	return orAll(branches), nil
}

// aggrOverTime translates aggr_over_time(("f1", "f2", ...), x): each
// function over x, told apart by the label rollup="<function>".
func (t *translator) aggrOverTime(fe *metricsql.FuncExpr) (parser.Expr, error) {
	if len(fe.Args) != 2 {
		return nil, badData("%s: aggr_over_time takes a list of function names and a series", fe.AppendString(nil))
	}
	var names []string
	switch a := fe.Args[0].(type) {
	case *metricsql.StringExpr:
		names = append(names, a.S)
	case *metricsql.FuncExpr:
		if a.Name != "" {
			return nil, badData("%s: the first argument of aggr_over_time must be function names in quotes", fe.AppendString(nil))
		}
		for _, s := range a.Args {
			se, ok := s.(*metricsql.StringExpr)
			if !ok {
				return nil, badData("%s: the first argument of aggr_over_time must be function names in quotes", fe.AppendString(nil))
			}
			names = append(names, se.S)
		}
	default:
		return nil, badData("%s: the first argument of aggr_over_time must be function names in quotes", fe.AppendString(nil))
	}
	var branches []parser.Expr
	for _, name := range names {
		name = strings.ToLower(name)
		if !aggrOverTimeFuncs[name] {
			return nil, badData("%s: %q cannot be used in aggr_over_time", fe.AppendString(nil), name)
		}
		var (
			e   parser.Expr
			err error
		)
		fn := name
		if alias, ok := aggrOverTimeAlias[name]; ok {
			fn = alias
		}
		if _, ok := rollupDefs[fn]; ok {
			// VictoriaMetrics fetches for aggr_over_time as for a function
			// that needs no samples before the query.
			e, err = t.rollupFunc(fn, fe.Args[1], nil, false)
		} else {
			e, err = t.call(&metricsql.FuncExpr{Name: name, Args: fe.Args[1:]})
		}
		if err != nil {
			return nil, err
		}
		// The result is no longer the metric, whatever the function.
		e = setLabel(setLabel(e, "rollup", name), labels.MetricName, "")
		branches = append(branches, e)
	}
	return orAll(branches), nil
}

// setLabel sets (or, with an empty value, removes) a label of every
// series of e.
func setLabel(e parser.Expr, name, value string) parser.Expr {
	return &parser.Call{Func: parser.Functions["label_replace"], Args: parser.Expressions{
		e,
		&parser.StringLiteral{Val: name},
		&parser.StringLiteral{Val: value},
		&parser.StringLiteral{Val: ""},
		&parser.StringLiteral{Val: ""},
	}}
}

// orAll joins branches whose series differ in labels with or.
func orAll(branches []parser.Expr) parser.Expr {
	out := branches[0]
	for _, b := range branches[1:] {
		out = &parser.BinaryExpr{Op: parser.LOR, LHS: operand(out), RHS: operand(b), VectorMatching: &parser.VectorMatching{Card: parser.CardManyToMany}}
	}
	return out
}
