package query

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// maxKeepNames bounds the metric names one keep_metric_names selector may
// match: each name becomes a branch of the translated query.
const maxKeepNames = 100

// translator turns one parsed MetricsQL expression into a PromQL AST for
// one evaluation. MetricsQL parsed it and expanded WITH templates; what is
// left is MetricsQL's own extensions:
//
//   - a rollup function over a selector without a window (`rate(x)`) gets
//     the step of a range query, or defaultWindow for an instant query.
//     Unlike VictoriaMetrics, the engine does not reach back to the sample
//     before the window, so a step shorter than two sample intervals finds
//     too few samples for rate: write the window, or $__rate_interval;
//     a rollup function over an expression that is not a selector
//     (`rate(sum(x))`) gets an implicit subquery at the query step;
//   - `expr[5m]` over an expression that is not a selector is a subquery
//     at the query step, as in MetricsQL;
//   - start(), end() and step() become numbers (seconds), and so do
//     durations standing as numbers (`time() - 5m`);
//   - keep_metric_names is rewritten with label_replace (see keepNames);
//   - MetricsQL's rollup functions that PromQL lacks (rollup.go) are
//     functions registered with the engine, with VictoriaMetrics'
//     semantics; those that answer a series per statistic (rollup,
//     rollup_*, quantiles_over_time, aggr_over_time) become one call per
//     statistic, labelled with label_replace and joined with or (see
//     rollupCall);
//   - MetricsQL's functions, aggregations and operators the engine
//     lacks become calls of functions registered with the engine, and
//     or-delimited filters, union, default, if, ifnot, limit, prefix,
//     fill, offset and @ on expressions and keep_metric_names where no
//     selector feeds it are rewritten (translate_mql.go,
//     translate_syntax.go).
//
// Where Peakline still answers otherwise than VictoriaMetrics:
//
//   - PromQL's own rollups (rate, increase, delta, changes, resets, deriv,
//     irate, idelta...) keep Prometheus' semantics: they see the window's
//     samples only, where VictoriaMetrics also uses the sample before it
//     and does not extrapolate (use increase_pure, deriv_fast, ideriv,
//     increase_prometheus... for VictoriaMetrics' own answers);
//   - for the new functions that use the sample before the window,
//     VictoriaMetrics counts it when it lies within about 1.5 sample
//     intervals of the window (instant queries: 5m), estimating the
//     interval from the last 20 samples before the query's end; Peakline
//     estimates it from the samples around the window, so over series
//     whose interval varies (jitter of tens of percent) the two may differ
//     at some steps; and Peakline looks for that sample at most 5m
//     before the window (more when the step is longer than the window),
//     for the sample after it at most 5m past it;
//   - aggr_over_time listing a counter function (rate, increase_pure...)
//     with others removes counter resets for the counter functions only,
//     VictoriaMetrics for all of them;
//   - VictoriaMetrics keeps the metric name for some rollups
//     (max_over_time, median_over_time, rollup, quantiles_over_time...);
//     Peakline drops it as Prometheus does, except for first_over_time
//     and last_over_time.
//
// What is left (the functions docs/grafana.md's MetricsQL tables leave out, fill
// modifiers on group_left/group_right, functions of the whole range over
// one another in a range query) is refused with ErrBadData naming it.
type translator struct {
	ctx     context.Context
	startMs int64
	endMs   int64
	stepMs  int64 // 0 for an instant query
	// unitMs is the step as MetricsQL sees it: the `i` of durations such
	// as `[2i]` and the value of step(). An instant query's is its
	// default window, as in VictoriaMetrics.
	unitMs        int64
	defaultWindow time.Duration // the window of a rollup written without one
	// names lists the metric names a selector matches (keep_metric_names).
	names func(ctx context.Context, ms []*labels.Matcher) ([]string, error)
	// pinned holds selectors restricted to one metric name while a branch
	// of a keep_metric_names rewrite is translated.
	pinned map[*metricsql.MetricExpr]string
	// branches counts the keep_metric_names branches built so far: nested
	// rewrites over different selectors multiply them.
	branches int
	nowMs    int64 // the value of now(), ms
	// nestedRange is an argument of a whole-range function that holds
	// a subquery pinned with @, in a range query (see wholeRange).
	nestedRange string
	// unaligned names the function over the whole range asked in a
	// range query whose start is not a multiple of the step (see
	// wholeRange), "" for none.
	unaligned string
	// within names the MetricsQL function, aggregation or operator
	// being translated, for the refusals that name it.
	within string
	// sqStep is the step of the innermost subquery whose expression is
	// being translated, 0 outside subqueries: a rollup there is evaluated
	// at the subquery's steps (see widen).
	sqStep time.Duration
}

func (t *translator) expr(e metricsql.Expr) (parser.Expr, error) {
	switch e := e.(type) {
	case *metricsql.NumberExpr:
		return &parser.NumberLiteral{Val: e.N}, nil
	case *metricsql.StringExpr:
		return &parser.StringLiteral{Val: e.S}, nil
	case *metricsql.DurationExpr:
		return &parser.NumberLiteral{Val: float64(e.Duration(t.unitMs)) / 1000}, nil
	case *metricsql.MetricExpr:
		if len(e.LabelFilterss) > 1 {
			return t.orSelectors(e, nil)
		}
		return t.selector(e)
	case *metricsql.RollupExpr:
		return t.rollup(e)
	case *metricsql.FuncExpr:
		if e.KeepMetricNames {
			return t.keepNames(e, func() (parser.Expr, error) { return t.call(e) })
		}
		return t.call(e)
	case *metricsql.AggrFuncExpr:
		return t.aggregate(e)
	case *metricsql.BinaryOpExpr:
		if e.KeepMetricNames {
			return t.keepNames(e, func() (parser.Expr, error) { return t.binary(e) })
		}
		return t.binary(e)
	}
	return nil, badData("%s: this MetricsQL expression has no PromQL equivalent", e.AppendString(nil))
}

// selector translates a series selector to a PromQL vector selector.
func (t *translator) selector(me *metricsql.MetricExpr) (*parser.VectorSelector, error) {
	if len(me.LabelFilterss) != 1 {
		return nil, badData("%s: or-delimited label filters are MetricsQL-only; join whole selectors with the or operator instead", me.AppendString(nil))
	}
	ms, err := matchers(me.LabelFilterss[0])
	if err != nil {
		return nil, err
	}
	if name, ok := t.pinned[me]; ok {
		ms = slices.DeleteFunc(ms, func(m *labels.Matcher) bool { return m.Name == labels.MetricName })
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name))
	}
	vs := &parser.VectorSelector{LabelMatchers: ms}
	// Print the name in front only where PromQL allows it unquoted and
	// alone; otherwise it stays a __name__ matcher inside the braces.
	var nameMatchers []*labels.Matcher
	for _, m := range ms {
		if m.Name == labels.MetricName {
			nameMatchers = append(nameMatchers, m)
		}
	}
	if len(nameMatchers) == 1 && nameMatchers[0].Type == labels.MatchEqual && bareName(nameMatchers[0].Value) {
		vs.Name = nameMatchers[0].Value
	}
	return vs, nil
}

// bareName reports whether PromQL reads name alone as a selector of that
// metric: a valid name that is no keyword (`group_left`, `bool`, `sum`).
func bareName(name string) bool {
	if !model.LegacyValidation.IsValidMetricName(name) {
		return false
	}
	pe, err := parser.NewParser(parser.Options{}).ParseExpr(name)
	vs, ok := pe.(*parser.VectorSelector)
	return err == nil && ok && vs.Name == name
}

// matchers converts MetricsQL label filters to Prometheus matchers.
func matchers(lfs []metricsql.LabelFilter) ([]*labels.Matcher, error) {
	ms := make([]*labels.Matcher, 0, len(lfs))
	for _, lf := range lfs {
		typ := labels.MatchEqual
		switch {
		case lf.IsRegexp && lf.IsNegative:
			typ = labels.MatchNotRegexp
		case lf.IsRegexp:
			typ = labels.MatchRegexp
		case lf.IsNegative:
			typ = labels.MatchNotEqual
		}
		m, err := labels.NewMatcher(typ, lf.Label, lf.Value)
		if err != nil {
			return nil, badData("label filter %s: %v", lf.AppendString(nil), err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// rollup translates `x[w]`, `x offset d`, `x @ t` and subqueries that
// stand as an expression of their own.
func (t *translator) rollup(re *metricsql.RollupExpr) (parser.Expr, error) {
	me, isSelector := re.Expr.(*metricsql.MetricExpr)
	switch {
	case re.ForSubquery():
		return t.subquery(re, t.duration(re.Window), t.duration(re.Step))
	case re.Window != nil && isSelector:
		return t.matrix(me, re, t.duration(re.Window))
	case re.Window != nil:
		// MetricsQL reads `sum(x)[5m]` as a subquery at the query step.
		return t.subquery(re, t.duration(re.Window), t.implicitStep())
	case isSelector && len(me.LabelFilterss) > 1:
		return t.orSelectors(me, re)
	case isSelector:
		vs, err := t.selector(me)
		if err != nil {
			return nil, err
		}
		return vs, t.modifiers(re, &vs.OriginalOffset, &vs.Timestamp, &vs.StartOrEnd)
	}
	return t.shifted(re)
}

// matrixArg translates an argument where PromQL wants a range vector.
func (t *translator) matrixArg(e metricsql.Expr) (parser.Expr, error) {
	switch e := e.(type) {
	case *metricsql.MetricExpr:
		return t.matrix(e, nil, t.defaultWindow)
	case *metricsql.RollupExpr:
		if e.Window != nil || e.ForSubquery() {
			return t.rollup(e)
		}
		if me, ok := e.Expr.(*metricsql.MetricExpr); ok {
			return t.matrix(me, e, t.defaultWindow)
		}
		return t.subquery(e, t.defaultWindow, t.implicitStep())
	}
	inner, err := t.inSubquery(t.implicitStep(), e)
	if err != nil {
		return nil, err
	}
	return &parser.SubqueryExpr{Expr: paren(inner), Range: t.defaultWindow, Step: t.implicitStep()}, nil
}

// inSubquery translates the expression of a subquery stepping by step
// (0: the engine's default).
func (t *translator) inSubquery(step time.Duration, e metricsql.Expr) (parser.Expr, error) {
	if step <= 0 {
		step = defaultSubqueryStep
	}
	outer := t.sqStep
	t.sqStep = step
	defer func() { t.sqStep = outer }()
	return t.expr(e)
}

// matrix builds `selector[window]` with the offset and @ of re, if any.
func (t *translator) matrix(me *metricsql.MetricExpr, re *metricsql.RollupExpr, window time.Duration) (parser.Expr, error) {
	vs, err := t.selector(me)
	if err != nil {
		return nil, err
	}
	if re != nil {
		if err := t.modifiers(re, &vs.OriginalOffset, &vs.Timestamp, &vs.StartOrEnd); err != nil {
			return nil, err
		}
	}
	return &parser.MatrixSelector{VectorSelector: vs, Range: window}, nil
}

// subquery builds `(inner)[window:step]` with the offset and @ of re.
func (t *translator) subquery(re *metricsql.RollupExpr, window, step time.Duration) (parser.Expr, error) {
	inner, err := t.inSubquery(step, re.Expr)
	if err != nil {
		return nil, err
	}
	sq := &parser.SubqueryExpr{Expr: paren(inner), Range: window, Step: step}
	return sq, t.modifiers(re, &sq.OriginalOffset, &sq.Timestamp, &sq.StartOrEnd)
}

// modifiers copies the offset and @ of re into a selector or subquery.
func (t *translator) modifiers(re *metricsql.RollupExpr, offset *time.Duration, at **int64, startOrEnd *parser.ItemType) error {
	if re.Offset != nil {
		*offset = t.duration(re.Offset)
	}
	switch a := re.At.(type) {
	case nil:
	case *metricsql.NumberExpr:
		ms := int64(math.Round(a.N * 1000))
		*at = &ms
	case *metricsql.FuncExpr:
		switch strings.ToLower(a.Name) {
		case "start":
			*startOrEnd = parser.START
		case "end":
			*startOrEnd = parser.END
		default:
			return t.atNumber(re, at)
		}
	default:
		return t.atNumber(re, at)
	}
	return nil
}

// atNumber resolves an @ written as an expression of numbers, start()
// and end() (`@ (end() - 5m)`).
func (t *translator) atNumber(re *metricsql.RollupExpr, at **int64) error {
	pe, err := t.expr(re.At)
	if err == nil {
		if v, ok := constant(pe); ok && !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) < 1e15 {
			ms := int64(math.Round(v * 1000))
			*at = &ms
			return nil
		}
	}
	return badData("%s: @ takes a unix time, start(), end() or arithmetic of them", re.AppendString(nil))
}

// constant evaluates a PromQL expression of number literals.
func constant(pe parser.Expr) (float64, bool) {
	switch e := pe.(type) {
	case *parser.NumberLiteral:
		return e.Val, true
	case *parser.ParenExpr:
		return constant(e.Expr)
	case *parser.BinaryExpr:
		l, okl := constant(e.LHS)
		r, okr := constant(e.RHS)
		if !okl || !okr {
			return 0, false
		}
		switch e.Op {
		case parser.ADD:
			return l + r, true
		case parser.SUB:
			return l - r, true
		case parser.MUL:
			return l * r, true
		case parser.DIV:
			return l / r, true
		}
	}
	return 0, false
}

// duration resolves a MetricsQL duration (which may be in steps, `1i`).
func (t *translator) duration(d *metricsql.DurationExpr) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(d.Duration(t.unitMs)) * time.Millisecond
}

// implicitStep is the step of a subquery MetricsQL adds on its own: the
// query step, or for an instant query the engine's default.
func (t *translator) implicitStep() time.Duration {
	return time.Duration(t.stepMs) * time.Millisecond
}

// unsupported refuses a function the engine cannot run, naming it as the
// user wrote it.
func (t *translator) unsupported(name string) error {
	return &Error{Type: ErrBadData, Err: fmt.Errorf("function %q: %w", name, ErrUnsupportedFunction)}
}

// call translates a function call.
func (t *translator) call(fe *metricsql.FuncExpr) (parser.Expr, error) {
	name := strings.ToLower(fe.Name)
	defer t.translating(name)()
	if out, ok, err := t.mqlCall(fe, name); ok {
		return out, err
	}
	switch {
	case name == "timezone_offset":
		if err := checkTimezone(fe); err != nil {
			return nil, err
		}
	case len(fe.Args) == 0 && name == "start":
		return &parser.NumberLiteral{Val: float64(t.startMs) / 1000}, nil
	case len(fe.Args) == 0 && name == "end":
		return &parser.NumberLiteral{Val: float64(t.endMs) / 1000}, nil
	case len(fe.Args) == 0 && name == "step":
		return &parser.NumberLiteral{Val: float64(t.unitMs) / 1000}, nil
	}
	if e, ok, err := t.rollupCall(fe, name); ok {
		return e, err
	}
	fn, ok := parser.Functions[name]
	if !ok || fn.Experimental {
		return nil, t.unsupported(name)
	}
	args := make(parser.Expressions, 0, len(fe.Args))
	numbers, series := 0, 0
	for i, a := range fe.Args {
		var (
			pe  parser.Expr
			err error
		)
		if argType(fn, i) == parser.ValueTypeMatrix {
			pe, err = t.matrixArg(a)
		} else {
			pe, err = t.expr(a)
		}
		if err != nil {
			return nil, err
		}
		switch typ := argType(fn, i); {
		case typ == parser.ValueTypeVector && pe.Type() == parser.ValueTypeScalar:
			// MetricsQL reads a number where series go as a series
			// without labels (`clamp_min(400, 0)`).
			pe = &parser.Call{Func: parser.Functions["vector"], Args: parser.Expressions{pe}}
			numbers++
		case typ == parser.ValueTypeVector || typ == parser.ValueTypeMatrix:
			series++
		}
		args = append(args, pe)
	}
	var out parser.Expr = &parser.Call{Func: fn, Args: args}
	if numbers > 0 && series == 0 && !extended[name] && fn.ReturnType == parser.ValueTypeVector && !strings.HasPrefix(name, "absent") &&
		!slices.Contains(fn.ArgTypes, parser.ValueTypeString) {
		// A function of numbers alone is a number, which MetricsQL
		// applies to every series of the other operand (label_replace
		// and label_join of a number answer a series with labels).
		out = &parser.Call{Func: parser.Functions["scalar"], Args: parser.Expressions{out}}
	}
	return out, nil
}

// argType is the type PromQL wants for argument i of fn.
func argType(fn *parser.Function, i int) parser.ValueType {
	switch {
	case i < len(fn.ArgTypes):
		return fn.ArgTypes[i]
	case len(fn.ArgTypes) > 0:
		return fn.ArgTypes[len(fn.ArgTypes)-1]
	}
	return parser.ValueTypeNone
}

var aggregators = map[string]parser.ItemType{
	"sum":          parser.SUM,
	"avg":          parser.AVG,
	"count":        parser.COUNT,
	"min":          parser.MIN,
	"max":          parser.MAX,
	"group":        parser.GROUP,
	"stddev":       parser.STDDEV,
	"stdvar":       parser.STDVAR,
	"topk":         parser.TOPK,
	"bottomk":      parser.BOTTOMK,
	"quantile":     parser.QUANTILE,
	"count_values": parser.COUNT_VALUES,
}

// aggregate translates an aggregation.
func (t *translator) aggregate(ae *metricsql.AggrFuncExpr) (parser.Expr, error) {
	name := strings.ToLower(ae.Name)
	defer t.translating(name)()
	if out, ok, err := t.mqlAggregate(ae, name); ok {
		if err != nil {
			return nil, err
		}
		return t.limitGroupsOf(ae, out)
	}
	op, ok := aggregators[name]
	if !ok {
		return nil, t.unsupported(name)
	}
	want := 1
	if op.IsAggregatorWithParam() {
		want = 2
	}
	if len(ae.Args) > want && !op.IsAggregatorWithParam() {
		// MetricsQL aggregates the union of several arguments.
		u := &metricsql.FuncExpr{Name: "union", Args: ae.Args}
		one := *ae
		one.Args = []metricsql.Expr{u}
		ae = &one
	}
	if len(ae.Args) != want {
		return nil, badData("%s: %s takes %d argument(s), got %d", ae.AppendString(nil), ae.Name, want, len(ae.Args))
	}
	out := &parser.AggregateExpr{Op: op}
	var err error
	if want == 2 {
		if out.Param, err = t.expr(ae.Args[0]); err != nil {
			return nil, err
		}
	}
	if out.Expr, err = t.expr(ae.Args[want-1]); err != nil {
		return nil, err
	}
	switch strings.ToLower(ae.Modifier.Op) {
	case "":
	case "by":
		out.Grouping = slices.Clone(ae.Modifier.Args)
	case "without":
		out.Grouping = slices.Clone(ae.Modifier.Args)
		out.Without = true
	default:
		return nil, badData("%s: unknown grouping modifier %q", ae.AppendString(nil), ae.Modifier.Op)
	}
	return t.limitGroupsOf(ae, out)
}

var binaryOps = map[string]parser.ItemType{
	"+": parser.ADD, "-": parser.SUB, "*": parser.MUL, "/": parser.DIV, "%": parser.MOD, "^": parser.POW,
	"atan2": parser.ATAN2,
	"==":    parser.EQLC, "!=": parser.NEQ, ">": parser.GTR, "<": parser.LSS, ">=": parser.GTE, "<=": parser.LTE,
	"and": parser.LAND, "or": parser.LOR, "unless": parser.LUNLESS,
}

// binary translates a binary operation with its matching modifiers.
// translating records that name is being translated until the returned
// function restores the outer one.
func (t *translator) translating(name string) func() {
	outer := t.within
	t.within = name
	return func() { t.within = outer }
}

func (t *translator) binary(be *metricsql.BinaryOpExpr) (parser.Expr, error) {
	defer t.translating(strings.ToLower(be.Op))()
	if out, ok, err := t.mqlBinary(be, strings.ToLower(be.Op)); ok {
		return out, err
	}
	op, ok := binaryOps[strings.ToLower(be.Op)]
	if !ok {
		return nil, badData("%s: the %s operator is MetricsQL-only", be.AppendString(nil), be.Op)
	}
	lhs, err := t.expr(be.Left)
	if err != nil {
		return nil, err
	}
	rhs, err := t.expr(be.Right)
	if err != nil {
		return nil, err
	}
	if op.IsSetOperator() {
		lhs, rhs = setOperand(lhs), setOperand(rhs)
	}
	vm := &parser.VectorMatching{Card: parser.CardOneToOne}
	if op.IsSetOperator() {
		vm.Card = parser.CardManyToMany
	}
	switch strings.ToLower(be.GroupModifier.Op) {
	case "":
	case "on":
		vm.On = true
		vm.MatchingLabels = slices.Clone(be.GroupModifier.Args)
	case "ignoring":
		vm.MatchingLabels = slices.Clone(be.GroupModifier.Args)
	default:
		return nil, badData("%s: unknown matching modifier %q", be.AppendString(nil), be.GroupModifier.Op)
	}
	switch strings.ToLower(be.JoinModifier.Op) {
	case "":
	case "group_left":
		vm.Card = parser.CardManyToOne
		vm.Include = slices.Clone(be.JoinModifier.Args)
		if be.JoinModifierPrefix != nil {
			rhs, vm.Include = t.prefixed(be, rhs, vm.Include, vm)
		}
	case "group_right":
		vm.Card = parser.CardOneToMany
		vm.Include = slices.Clone(be.JoinModifier.Args)
		if be.JoinModifierPrefix != nil {
			lhs, vm.Include = t.prefixed(be, lhs, vm.Include, vm)
		}
	default:
		return nil, badData("%s: unknown join modifier %q", be.AppendString(nil), be.JoinModifier.Op)
	}
	out := &parser.BinaryExpr{Op: op, LHS: operand(lhs), RHS: operand(rhs), ReturnBool: be.Bool}
	out.VectorMatching = vm
	if be.FillLeft != nil || be.FillRight != nil {
		return t.filled(be, out)
	}
	return out, nil
}

// operand parenthesises a binary operand where printing it bare would
// change how PromQL reads it: the printer adds no parentheses itself.
func operand(e parser.Expr) parser.Expr {
	switch e := e.(type) {
	case *parser.BinaryExpr:
		return paren(e)
	case *parser.NumberLiteral:
		if math.Signbit(e.Val) {
			return paren(e)
		}
	}
	return e
}

func paren(e parser.Expr) parser.Expr {
	if _, ok := e.(*parser.ParenExpr); ok {
		return e
	}
	return &parser.ParenExpr{Expr: e}
}

// keepNames implements keep_metric_names on a function or binary
// operation: PromQL drops the metric name there, so every metric name the
// source selector can match gets a branch of its own, translated with the
// selector pinned to that name, and the name is put back with
// label_replace; the branches are joined with `or on(__name__)`. The source is the
// series argument of a function (or the left operand of an operation),
// which must be a selector, possibly under a window, offset or another
// keep_metric_names.
func (t *translator) keepNames(e metricsql.Expr, build func() (parser.Expr, error)) (parser.Expr, error) {
	src := keepSource(e)
	if src == nil {
		return t.keepNamesByLabel(e)
	}
	var names []string
	if name, ok := t.pinned[src]; ok {
		names = []string{name}
	} else {
		if len(src.LabelFilterss) != 1 {
			return nil, badData("%s: or-delimited label filters are MetricsQL-only; join whole selectors with the or operator instead", src.AppendString(nil))
		}
		ms, err := matchers(src.LabelFilterss[0])
		if err != nil {
			return nil, err
		}
		if names, err = t.names(t.ctx, ms); err != nil {
			return nil, err
		}
		if len(names) > maxKeepNames {
			return nil, badData("%s: keep_metric_names over %d metric names, at most %d allowed; narrow the selector", e.AppendString(nil), len(names), maxKeepNames)
		}
	}
	if len(names) == 0 {
		return build() // nothing matches: the result is empty anyway
	}
	labelReplace := parser.Functions["label_replace"]
	var out parser.Expr
	for _, name := range names {
		if t.branches++; t.branches > maxKeepNames {
			return nil, badData("%s: keep_metric_names needs more than %d branches in this query (one per metric name, multiplied where rewrites nest); narrow the selectors", e.AppendString(nil), maxKeepNames)
		}
		if t.pinned == nil {
			t.pinned = map[*metricsql.MetricExpr]string{}
		}
		prev, had := t.pinned[src]
		t.pinned[src] = name
		branch, err := build()
		if had {
			t.pinned[src] = prev
		} else {
			delete(t.pinned, src)
		}
		if err != nil {
			return nil, err
		}
		named := &parser.Call{Func: labelReplace, Args: parser.Expressions{
			branch,
			&parser.StringLiteral{Val: labels.MetricName},
			&parser.StringLiteral{Val: name},
			&parser.StringLiteral{Val: ""},
			&parser.StringLiteral{Val: ""},
		}}
		if out == nil {
			out = named
			continue
		}
		// `or` matches series on their labels without the metric name,
		// which is all the branches differ in: match on the name instead.
		out = &parser.BinaryExpr{Op: parser.LOR, LHS: operand(out), RHS: named, VectorMatching: &parser.VectorMatching{
			Card: parser.CardManyToMany, On: true, MatchingLabels: []string{labels.MetricName},
		}}
	}
	return out, nil
}

// keepSource finds the selector whose metric name keep_metric_names on
// e keeps: the first series argument of a function, the left operand of
// a binary operation.
func keepSource(e metricsql.Expr) *metricsql.MetricExpr {
	switch e := e.(type) {
	case *metricsql.FuncExpr:
		if i := metricsql.GetRollupArgIdx(e); i >= 0 && i < len(e.Args) {
			return nameCarrier(e.Args[i])
		}
		fn, ok := parser.Functions[strings.ToLower(e.Name)]
		if !ok {
			return nil
		}
		for i, a := range e.Args {
			if typ := argType(fn, i); typ == parser.ValueTypeVector || typ == parser.ValueTypeMatrix {
				return nameCarrier(a)
			}
		}
	case *metricsql.BinaryOpExpr:
		return nameCarrier(e.Left)
	}
	return nil
}

// nameCarrier returns the selector whose metric name reaches the value of
// e unchanged: e itself, e under a window, offset or @, or the source of
// an inner keep_metric_names.
func nameCarrier(e metricsql.Expr) *metricsql.MetricExpr {
	switch e := e.(type) {
	case *metricsql.MetricExpr:
		return e
	case *metricsql.RollupExpr:
		if !e.ForSubquery() {
			return nameCarrier(e.Expr)
		}
	case *metricsql.FuncExpr:
		if e.KeepMetricNames {
			return keepSource(e)
		}
	case *metricsql.BinaryOpExpr:
		if e.KeepMetricNames {
			return keepSource(e)
		}
	}
	return nil
}
