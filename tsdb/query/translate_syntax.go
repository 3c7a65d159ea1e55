package query

import (
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// The translator's rewrites of MetricsQL syntax the Prometheus engine
// lacks: or-delimited filters, default/if/ifnot, prefix and fill
// modifiers, offset and @ on expressions, keep_metric_names where no
// selector feeds it.

// orSplit splits a call whose range-vector argument is a selector with
// or-delimited filters into one call per filter group.
func orSplit(fe *metricsql.FuncExpr) ([]*metricsql.FuncExpr, bool) {
	fn, ok := parser.Functions[strings.ToLower(fe.Name)]
	if !ok {
		return nil, false
	}
	for i, a := range fe.Args {
		if argType(fn, i) != parser.ValueTypeMatrix {
			continue
		}
		me, re := orSelector(a)
		if me == nil {
			continue
		}
		out := make([]*metricsql.FuncExpr, 0, len(me.LabelFilterss))
		for _, lfs := range me.LabelFilterss {
			var arg metricsql.Expr = &metricsql.MetricExpr{LabelFilterss: [][]metricsql.LabelFilter{lfs}}
			if re != nil {
				r := *re
				r.Expr = arg
				arg = &r
			}
			f := *fe
			f.Args = append([]metricsql.Expr(nil), fe.Args...)
			f.Args[i] = arg
			out = append(out, &f)
		}
		return out, true
	}
	return nil, false
}

// orSelector returns the selector with or-delimited filters that e is,
// possibly under a window, offset or @ (returned too).
func orSelector(e metricsql.Expr) (*metricsql.MetricExpr, *metricsql.RollupExpr) {
	switch e := e.(type) {
	case *metricsql.MetricExpr:
		if len(e.LabelFilterss) > 1 {
			return e, nil
		}
	case *metricsql.RollupExpr:
		if me, ok := e.Expr.(*metricsql.MetricExpr); ok && len(me.LabelFilterss) > 1 && !e.ForSubquery() {
			return me, e
		}
	}
	return nil, nil
}

// orSelectors translates a selector with or-delimited filters as the
// union of one selector per filter group, with the offset and @ of re.
func (t *translator) orSelectors(me *metricsql.MetricExpr, re *metricsql.RollupExpr) (parser.Expr, error) {
	var es []parser.Expr
	for _, lfs := range me.LabelFilterss {
		one := &metricsql.MetricExpr{LabelFilterss: [][]metricsql.LabelFilter{lfs}}
		vs, err := t.selector(one)
		if err != nil {
			return nil, err
		}
		if re != nil {
			if err := t.modifiers(re, &vs.OriginalOffset, &vs.Timestamp, &vs.StartOrEnd); err != nil {
				return nil, err
			}
		}
		es = append(es, vs)
	}
	return t.unionOf(es), nil
}

// setOperand wraps a scalar operand of and/or/unless/default/if/ifnot
// as a series without labels, as MetricsQL treats it.
func setOperand(pe parser.Expr) parser.Expr {
	if pe.Type() == parser.ValueTypeScalar {
		return &parser.Call{Func: parser.Functions["vector"], Args: parser.Expressions{pe}}
	}
	return pe
}

// mqlBinary translates MetricsQL's operators the engine lacks:
//
//   - `a default b` answers a, its gaps over the query range filled
//     from b (matched on labels without the names, or the group
//     modifier's), or b where a has no series at all;
//   - `a if b` is a where b has a matching point (PromQL's and);
//   - `a ifnot b` is a where b has none (PromQL's unless).
func (t *translator) mqlBinary(be *metricsql.BinaryOpExpr, op string) (parser.Expr, bool, error) {
	switch op {
	case "default", "if", "ifnot":
	default:
		return nil, false, nil
	}
	lhs, err := t.expr(be.Left)
	if err != nil {
		return nil, true, err
	}
	rhs, err := t.expr(be.Right)
	if err != nil {
		return nil, true, err
	}
	if lhs.Type() == parser.ValueTypeScalar && op == "default" {
		return lhs, true, nil // a number has no gaps
	}
	lhs = setOperand(lhs)
	if op != "default" {
		vm := &parser.VectorMatching{Card: parser.CardManyToMany}
		if err := matchingOf(be, vm); err != nil {
			return nil, true, err
		}
		if rhs.Type() == parser.ValueTypeScalar {
			vm = &parser.VectorMatching{Card: parser.CardManyToMany, On: true}
		}
		var setOp parser.ItemType = parser.LAND
		if op == "ifnot" {
			setOp = parser.LUNLESS
		}
		return &parser.BinaryExpr{Op: setOp, LHS: operand(lhs), RHS: operand(setOperand(rhs)), VectorMatching: vm}, true, nil
	}
	if lhs.Type() != parser.ValueTypeVector {
		return nil, true, badData("%s: default needs series on its left", be.AppendString(nil))
	}
	present := t.overRange("last_over_time", lhs)
	if rhs.Type() == parser.ValueTypeScalar {
		return t.internalCall(internalPrefix+"default_scalar", lhs, present, rhs), true, nil
	}
	if rhs.Type() != parser.ValueTypeVector {
		return nil, true, badData("%s: default needs series or a number on its right", be.AppendString(nil))
	}
	match := []parser.Expr{str(strings.ToLower(be.GroupModifier.Op))}
	for _, l := range be.GroupModifier.Args {
		match = append(match, str(l))
	}
	return t.internalCall(internalPrefix+"default", append([]parser.Expr{lhs, present, rhs}, match...)...), true, nil
}

// matchingOf copies the on/ignoring modifier of be into vm.
func matchingOf(be *metricsql.BinaryOpExpr, vm *parser.VectorMatching) error {
	switch strings.ToLower(be.GroupModifier.Op) {
	case "":
	case "on":
		vm.On = true
		vm.MatchingLabels = append([]string(nil), be.GroupModifier.Args...)
	case "ignoring":
		vm.MatchingLabels = append([]string(nil), be.GroupModifier.Args...)
	default:
		return badData("%s: unknown matching modifier %q", be.AppendString(nil), be.GroupModifier.Op)
	}
	return nil
}

// prefixed applies group_left/group_right's prefix: the labels the "one"
// side contributes are renamed with the prefix before the join, so the
// join copies them under their new names.
func (t *translator) prefixed(be *metricsql.BinaryOpExpr, one parser.Expr, include []string, vm *parser.VectorMatching) (parser.Expr, []string) {
	prefix := be.JoinModifierPrefix.S
	if prefix == "" || len(include) == 0 {
		return one, include
	}
	args := []parser.Expr{one}
	renamed := make([]string, len(include))
	for i, l := range include {
		renamed[i] = prefix + l
		args = append(args, str(l), str(renamed[i]))
	}
	if !vm.On {
		// Renamed labels must not take part in matching either.
		vm.MatchingLabels = append(vm.MatchingLabels, renamed...)
	}
	return t.internalCall("label_move", args...), renamed
}

// filled applies fill, fill_left and fill_right to a one-to-one
// operation: where a series of one side has no match on the other at a
// step, the fill value stands in for the missing one, as in
// VictoriaMetrics:
//
//	a op fill_right(v) b  ->  (a op b) or ((a unless b) op clamp(a unless b, v, v))
//
// (clamp(x, v, v) is x's series with the value v), and likewise from the
// right for fill_left; matching modifiers and bool apply to every part.
func (t *translator) filled(be *metricsql.BinaryOpExpr, out *parser.BinaryExpr) (parser.Expr, error) {
	lhs, rhs, vm := out.LHS, out.RHS, out.VectorMatching
	if lhs.Type() != parser.ValueTypeVector || rhs.Type() != parser.ValueTypeVector {
		return out, nil // a number is never missing
	}
	if vm.Card != parser.CardOneToOne {
		return nil, badData("%s: fill modifiers apply to one-to-one operations here, not to group_left, group_right or set operators", be.AppendString(nil))
	}
	unless := func(l, r parser.Expr) parser.Expr {
		return paren(&parser.BinaryExpr{Op: parser.LUNLESS, LHS: l, RHS: r, VectorMatching: &parser.VectorMatching{
			Card: parser.CardManyToMany, On: vm.On, MatchingLabels: vm.MatchingLabels,
		}})
	}
	valued := func(x parser.Expr, v float64) parser.Expr {
		return &parser.Call{Func: parser.Functions["clamp"], Args: parser.Expressions{x, num(v), num(v)}}
	}
	same := func(l, r parser.Expr) parser.Expr {
		return paren(&parser.BinaryExpr{Op: out.Op, LHS: l, RHS: r, ReturnBool: out.ReturnBool, VectorMatching: &parser.VectorMatching{
			Card: parser.CardOneToOne, On: vm.On, MatchingLabels: vm.MatchingLabels,
		}})
	}
	var res parser.Expr = paren(out)
	or := func(e parser.Expr) {
		res = &parser.BinaryExpr{Op: parser.LOR, LHS: res, RHS: e, VectorMatching: &parser.VectorMatching{Card: parser.CardManyToMany}}
	}
	if be.FillRight != nil {
		onlyLeft := unless(lhs, rhs)
		or(same(onlyLeft, valued(onlyLeft, be.FillRight.N)))
	}
	if be.FillLeft != nil {
		onlyRight := unless(rhs, lhs)
		or(same(valued(onlyRight, be.FillLeft.N), onlyRight))
	}
	return res, nil
}

// shifted translates offset and @ on an expression that is no selector
// (`sum(x) offset 1h`) as VictoriaMetrics evaluates it: the expression
// on the grid of multiples of the step (an instant query's is its
// default window, 5m), at the last point of the grid at or before the
// shifted time: last_over_time((expr)[step:step] offset d @ t). (So
// `(x * 2) offset 90s` at a 1m step reads x two minutes back, where
// `x offset 90s * 2` reads it 90s back, in both engines.)
func (t *translator) shifted(re *metricsql.RollupExpr) (parser.Expr, error) {
	inner, err := t.expr(re.Expr)
	if err != nil {
		return nil, err
	}
	switch inner.Type() {
	case parser.ValueTypeScalar:
		inner = &parser.Call{Func: parser.Functions["vector"], Args: parser.Expressions{inner}}
	case parser.ValueTypeVector:
	default:
		return nil, badData("%s: offset and @ need an expression of series or numbers", re.AppendString(nil))
	}
	sq := &parser.SubqueryExpr{Expr: paren(inner)}
	if err := t.modifiers(re, &sq.OriginalOffset, &sq.Timestamp, &sq.StartOrEnd); err != nil {
		return nil, err
	}
	sq.Range = time.Duration(t.unitMs) * time.Millisecond
	sq.Step = sq.Range
	return &parser.Call{Func: parser.Functions["last_over_time"], Args: parser.Expressions{sq}}, nil
}

// keepNamesByLabel implements keep_metric_names where the series do not
// come straight from a selector (`(rate(x[5m]) * 2) keep_metric_names`):
// the series arguments (both operands) carry their names in
// keptNameLabel through the function or operation, which the engine
// leaves alone, and get them back after it. As in VictoriaMetrics, the
// names take part in matching the operands, unless on(...) names the
// labels to match (then the left operand's names join the answer).
func (t *translator) keepNamesByLabel(e metricsql.Expr) (parser.Expr, error) {
	var (
		out parser.Expr
		err error
	)
	switch e := e.(type) {
	case *metricsql.FuncExpr:
		out, err = t.call(e)
	case *metricsql.BinaryOpExpr:
		out, err = t.binary(e)
	default:
		return nil, badData("%s: keep_metric_names applies to functions and operations", e.AppendString(nil))
	}
	if err != nil {
		return nil, err
	}
	carry := func(x parser.Expr) parser.Expr {
		if sq, ok := x.(*parser.SubqueryExpr); ok {
			sq.Expr = paren(t.internalCall("label_move", sq.Expr, str(labels.MetricName), str(keptNameLabel)))
			return sq
		}
		if x.Type() == parser.ValueTypeVector {
			return t.internalCall("label_move", x, str(labels.MetricName), str(keptNameLabel))
		}
		return x
	}
	switch o := out.(type) {
	case *parser.Call:
		for i, a := range o.Args {
			o.Args[i] = carry(a)
		}
	case *parser.BinaryExpr:
		if vm := o.VectorMatching; vm != nil && vm.On && vm.Card == parser.CardOneToOne &&
			o.LHS.Type() == parser.ValueTypeVector && o.RHS.Type() == parser.ValueTypeVector {
			// Matching on(...) leaves the names out, as in
			// VictoriaMetrics, and the engine answers the on labels
			// only: the left operand's names join back on them.
			names := []parser.Expr{carry(o.LHS)}
			for _, l := range vm.MatchingLabels {
				names = append(names, str(l))
			}
			names = append(names, str(keptNameLabel))
			one := &parser.Call{Func: parser.Functions["clamp"], Args: parser.Expressions{t.internalCall("label_keep", names...), num(1), num(1)}}
			out = &parser.BinaryExpr{Op: parser.MUL, LHS: paren(o), RHS: one, VectorMatching: &parser.VectorMatching{
				Card: parser.CardManyToOne, On: true, MatchingLabels: vm.MatchingLabels, Include: []string{keptNameLabel},
			}}
			break
		}
		// Matching on the other labels takes the names in, as in
		// VictoriaMetrics.
		o.LHS, o.RHS = carry(o.LHS), carry(o.RHS)
	default:
		return out, nil
	}
	return t.internalCall(internalPrefix+"name_back", out), nil
}

// carryName moves the metric name of x's series to keptNameLabel, where
// it passes through range-vector functions (name_back moves it back).
func (t *translator) carryName(x parser.Expr) parser.Expr {
	return t.internalCall("label_move", x, str(labels.MetricName), str(keptNameLabel))
}

// pinnedWithin reports whether e holds a subquery pinned with @.
func pinnedWithin(e parser.Expr) bool {
	found := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if sq, ok := n.(*parser.SubqueryExpr); ok && (sq.Timestamp != nil || sq.StartOrEnd != 0) {
			found = true
		}
		return nil
	})
	return found
}
