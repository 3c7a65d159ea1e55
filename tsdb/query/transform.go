package query

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// MetricsQL transform functions the Prometheus engine lacks, registered
// with the engine's function tables (parser.Functions for the grammar,
// promql.FunctionCalls for evaluation) once, at package init, as other
// Prometheus-engine projects register their extended functions.
//
// Two kinds:
//
//   - step transforms see the instant vector of one evaluation step and
//     change labels or values (label_set, union, bitmap_and, ...); their
//     semantics are VictoriaMetrics' applied step by step;
//   - range transforms (range_*, running_*, keep_last_value, interpolate,
//     ...) need a series over the whole query range at each step: the
//     translator hands them a subquery of the whole range at the query
//     step pinned with @ to the last step (wholeRange in
//     translate_mql.go), which the engine evaluates once; the function
//     computes VictoriaMetrics' whole-series result and answers the value
//     at the step being evaluated (transform_range.go). The engine drops
//     the metric name of what a range-vector function returns; where
//     VictoriaMetrics keeps it the translator carries it through in
//     keptNameLabel (dropsName in translate_mql.go).
//
// Names the engine knows that a user must not call directly start with
// internalPrefix: the translator refuses them.

// internalPrefix starts the names of functions registered for the
// translator's rewrites only.
const internalPrefix = "metricsql_"

// extended names the functions registerExtensions registered; written
// at init only.
var extended = map[string]bool{}

// extension is one function registered with the engine.
type extension struct {
	fn   *parser.Function
	call promql.FunctionCall
}

// registerExtensions adds fns to the engine's tables; a name the engine
// already knows is a programming error. byStep marks functions whose
// result depends on the time of the step even where their arguments do
// not (a range transform's argument is pinned with @): the engine would
// otherwise evaluate them once and repeat the answer at every step.
func registerExtensions(fns []extension, byStep bool) {
	for _, f := range fns {
		extended[f.fn.Name] = true
		if _, ok := parser.Functions[f.fn.Name]; ok {
			panic(fmt.Sprintf("register MetricsQL function %q: the engine already has it", f.fn.Name))
		}
		parser.Functions[f.fn.Name] = f.fn
		promql.FunctionCalls[f.fn.Name] = f.call
		if byStep {
			promql.AtModifierUnsafeFunctions[f.fn.Name] = struct{}{}
		}
	}
}

func init() {
	registerExtensions(stepTransforms(), false)
	registerExtensions(rangeTransforms(), true)
	registerExtensions(aggregations(), false)
	registerExtensions(plumbing(), false)
	registerExtensions(histogramExtensions(), false)
	registerExtensions(clockFunctions(), true)
}

// Argument types, short for the tables.
const (
	vec = parser.ValueTypeVector
	mat = parser.ValueTypeMatrix
	scl = parser.ValueTypeScalar
	txt = parser.ValueTypeString
)

func fnDef(name string, variadic int, args ...parser.ValueType) *parser.Function {
	return &parser.Function{Name: name, ArgTypes: args, Variadic: variadic, ReturnType: vec}
}

// strArgs returns the string literals args[from:].
func strArgs(args parser.Expressions, from int) []string {
	out := make([]string, 0, len(args))
	for _, a := range args[min(from, len(args)):] {
		out = append(out, stringArg(a))
	}
	return out
}

func stringArg(e parser.Expr) string {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	if s, ok := e.(*parser.StringLiteral); ok {
		return s.Val
	}
	return ""
}

// scalarArg is the value of scalar argument i at this step.
func scalarArg(vals []promql.Vector, i int) float64 {
	if i < len(vals) && len(vals[i]) > 0 {
		return vals[i][0].F
	}
	return math.NaN()
}

// relabel returns a step transform that rewrites each float sample's
// labels with f (which reports false to drop the sample); the values and
// the metric name are kept unless f changes them.
func relabel(f func(b *labels.Builder, args []string) bool) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		sargs := strArgs(args, 1)
		b := labels.NewBuilder(labels.EmptyLabels())
		for _, s := range vals[0] {
			if s.H != nil {
				continue
			}
			b.Reset(s.Metric)
			if !f(b, sargs) {
				continue
			}
			enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: s.F})
		}
		return enh.Out, nil
	}
}

// pairs calls f for each (a, b) of args; an odd last one pairs with "".
func pairs(args []string, f func(a, b string)) {
	for i := 0; i < len(args); i += 2 {
		b := ""
		if i+1 < len(args) {
			b = args[i+1]
		}
		f(args[i], b)
	}
}

func anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?s:" + expr + ")$")
}

func stepTransforms() []extension {
	labelSet := relabel(func(b *labels.Builder, args []string) bool {
		pairs(args, func(name, value string) { b.Set(name, value) })
		return true
	})
	labelDel := relabel(func(b *labels.Builder, args []string) bool {
		b.Del(args...)
		return true
	})
	labelKeep := relabel(func(b *labels.Builder, args []string) bool {
		b.Keep(args...)
		return true
	})
	labelCopy := func(move bool) promql.FunctionCall {
		return relabel(func(b *labels.Builder, args []string) bool {
			pairs(args, func(src, dst string) {
				v := b.Get(src)
				if v == "" {
					return
				}
				b.Set(dst, v)
				if move && src != dst {
					b.Del(src)
				}
			})
			return true
		})
	}
	labelCase := func(f func(string) string) promql.FunctionCall {
		return relabel(func(b *labels.Builder, args []string) bool {
			for _, name := range args {
				if v := b.Get(name); v != "" {
					b.Set(name, f(v))
				}
			}
			return true
		})
	}
	labelMap := relabel(func(b *labels.Builder, args []string) bool {
		if len(args) == 0 {
			return true
		}
		name := args[0]
		cur := b.Get(name)
		for i := 1; i+1 < len(args); i += 2 {
			if args[i] == cur {
				b.Set(name, args[i+1])
				break
			}
		}
		return true
	})
	labelsEqual := relabel(func(b *labels.Builder, args []string) bool {
		for _, name := range args[min(1, len(args)):] {
			if b.Get(name) != b.Get(args[0]) {
				return false
			}
		}
		return true
	})
	return []extension{
		{fnDef("label_set", -1, vec, txt), labelSet},
		{fnDef("label_del", -1, vec, txt), labelDel},
		{fnDef("label_keep", -1, vec, txt), labelKeep},
		{fnDef("label_copy", -1, vec, txt), labelCopy(false)},
		{fnDef("label_move", -1, vec, txt), labelCopy(true)},
		{fnDef("label_lowercase", -1, vec, txt), labelCase(strings.ToLower)},
		{fnDef("label_uppercase", -1, vec, txt), labelCase(strings.ToUpper)},
		{fnDef("label_map", -1, vec, txt), labelMap},
		{fnDef("labels_equal", -1, vec, txt), labelsEqual},
		{fnDef("label_match", 0, vec, txt, txt), labelMatch(false)},
		{fnDef("label_mismatch", 0, vec, txt, txt), labelMatch(true)},
		{fnDef("label_transform", 0, vec, txt, txt, txt), labelTransform},
		{fnDef("label_value", 0, vec, txt), labelValue},
		{fnDef(internalPrefix+"drop_common_labels", 0, vec, vec), dropCommonLabels},
		{fnDef("union", -1, vec, vec), union},
		{fnDef(internalPrefix+"limit_offset", 0, scl, scl, vec, vec), limitOffset},
		{fnDef("bitmap_and", 0, vec, scl), bitmap(func(a, b uint64) uint64 { return a & b })},
		{fnDef("bitmap_or", 0, vec, scl), bitmap(func(a, b uint64) uint64 { return a | b })},
		{fnDef("bitmap_xor", 0, vec, scl), bitmap(func(a, b uint64) uint64 { return a ^ b })},
		{fnDef("drop_empty_series", 0, vec), identity},
		{fnDef("label_graphite_group", -1, vec, scl), graphiteGroup},
		{fnDef(internalPrefix+"sort_by_label", -1, vec, txt), sortByLabel(strings.Compare, false)},
		{fnDef(internalPrefix+"sort_by_label_desc", -1, vec, txt), sortByLabel(strings.Compare, true)},
		{fnDef("sort_by_label_numeric", -1, vec, txt), sortByLabel(numericCompare, false)},
		{fnDef("sort_by_label_numeric_desc", -1, vec, txt), sortByLabel(numericCompare, true)},
	}
}

func labelMatch(negate bool) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		name, expr := stringArg(args[1]), stringArg(args[2])
		re, err := anchored(expr)
		if err != nil {
			panic(fmt.Errorf("label_match: compile regexp %q: %w", expr, err))
		}
		for _, s := range vals[0] {
			if re.MatchString(s.Metric.Get(name)) != negate {
				enh.Out = append(enh.Out, s)
			}
		}
		return enh.Out, nil
	}
}

// labelTransform replaces every match of a regexp in a label's value.
func labelTransform(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	name, expr, repl := stringArg(args[1]), stringArg(args[2]), stringArg(args[3])
	re, err := regexp.Compile(expr)
	if err != nil {
		panic(fmt.Errorf("label_transform: compile regexp %q: %w", expr, err))
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vals[0] {
		b.Reset(s.Metric)
		b.Set(name, re.ReplaceAllString(s.Metric.Get(name), repl))
		enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: s.F, H: s.H})
	}
	return enh.Out, nil
}

// labelValue answers a label's value as the number; the name goes.
func labelValue(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	name := stringArg(args[1])
	for _, s := range vals[0] {
		v, err := strconv.ParseFloat(s.Metric.Get(name), 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		enh.Out = append(enh.Out, promql.Sample{Metric: withoutName(s.Metric), F: v})
	}
	return enh.Out, nil
}

// dropCommonLabels removes from the series of args[0] the labels (the
// name included) that every series of args[1] (the same series over the
// whole range) has with the same value.
func dropCommonLabels(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	all := vals[1]
	counts := map[string]map[string]int{}
	for _, s := range all {
		s.Metric.Range(func(l labels.Label) {
			m := counts[l.Name]
			if m == nil {
				m = map[string]int{}
				counts[l.Name] = m
			}
			m[l.Value]++
		})
	}
	var common []string
	for name, m := range counts {
		for _, n := range m {
			if n == len(all) {
				common = append(common, name)
			}
		}
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vals[0] {
		b.Reset(s.Metric)
		b.Del(common...)
		enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: s.F, H: s.H})
	}
	return enh.Out, nil
}

// union answers the series of all arguments; of series with the same
// labels the first argument's wins.
func union(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	seen := map[uint64]struct{}{}
	for _, v := range vals {
		for _, s := range v {
			h := s.Metric.Hash()
			if _, ok := seen[h]; ok {
				continue
			}
			seen[h] = struct{}{}
			enh.Out = append(enh.Out, s)
		}
	}
	return enh.Out, nil
}

// limitOffset skips offset series, in the order of their labels, and
// answers at most limit of the rest: the series are those of args[3],
// the same series over the whole range, so the choice holds at every
// step as VictoriaMetrics' does.
func limitOffset(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	limit, offset := scalarArg(vals, 0), scalarArg(vals, 1)
	if math.IsNaN(limit) || math.IsNaN(offset) || limit < 0 || offset < 0 {
		panic(fmt.Errorf("limit_offset: limit and offset must be non-negative numbers, got %g and %g", limit, offset))
	}
	all := slices.Clone(vals[3])
	slices.SortFunc(all, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
	all = all[int(min(offset, float64(len(all)))):]
	all = all[:int(min(limit, float64(len(all))))]
	chosen := make(map[uint64]bool, len(all))
	for _, s := range all {
		chosen[s.Metric.Hash()] = true
	}
	for _, s := range vals[2] {
		if chosen[s.Metric.Hash()] {
			enh.Out = append(enh.Out, s)
		}
	}
	return enh.Out, nil
}

func bitmap(op func(a, b uint64) uint64) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		mask := scalarArg(vals, 1)
		if math.IsNaN(mask) {
			return enh.Out, nil
		}
		for _, s := range vals[0] {
			if s.H != nil || math.IsNaN(s.F) {
				continue
			}
			ls := withoutName(s.Metric)
			enh.Out = append(enh.Out, promql.Sample{Metric: ls, F: float64(op(uint64(s.F), uint64(mask)))})
		}
		return enh.Out, nil
	}
}

func identity(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	return append(enh.Out, vals[0]...), nil
}

// sortByLabel orders series by the values of the given labels (stable:
// equal ones keep their order).
func sortByLabel(cmp func(a, b string) int, desc bool) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		names := strArgs(args, 1)
		out := append(enh.Out, vals[0]...)
		slices.SortStableFunc(out, func(a, b promql.Sample) int {
			for _, n := range names {
				c := cmp(a.Metric.Get(n), b.Metric.Get(n))
				if desc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
			return 0
		})
		return out, nil
	}
}

// numericCompare compares strings as VictoriaMetrics'
// sort_by_label_numeric does: runs of digits compare as numbers, the
// rest byte by byte.
func numericCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		switch {
		case da > 0 && db > 0:
			na, _ := strconv.ParseFloat(a[:da], 64)
			nb, _ := strconv.ParseFloat(b[:db], 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[da:], b[db:]
		case da > 0:
			return -1
		case db > 0:
			return 1
		default:
			if a[0] != b[0] {
				if a[0] < b[0] {
					return -1
				}
				return 1
			}
			a, b = a[1:], b[1:]
		}
	}
	return len(a) - len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// withoutName is ls without the metric name.
func withoutName(ls labels.Labels) labels.Labels {
	return ls.DropReserved(func(n string) bool { return n == labels.MetricName })
}

// keptNameLabel carries the metric name through a range-vector function,
// whose result the engine strips of __name__.
const keptNameLabel = "__metricsql_name__"

// nameBack moves keptNameLabel back to the metric name.
func nameBack(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vals[0] {
		if name := s.Metric.Get(keptNameLabel); name != "" {
			b.Reset(s.Metric)
			b.Set(labels.MetricName, name)
			b.Del(keptNameLabel)
			s.Metric = b.Labels()
		}
		enh.Out = append(enh.Out, s)
	}
	return enh.Out, nil
}

// defaultScalar answers, for every series of args[1] (the left operand's
// series over the whole range), the left operand's value at this step,
// or the number args[2] where it has none; with no series at all, the
// number alone.
func defaultScalar(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	fill := scalarArg(vals, 2)
	if len(vals[1]) == 0 {
		return append(enh.Out, promql.Sample{Metric: labels.EmptyLabels(), F: fill}), nil
	}
	return fillAbsent(enh.Out, vals[0], vals[1], func(labels.Labels) (float64, bool) { return fill, true }), nil
}

// fillAbsent appends to out, for each series of present (those over the
// whole range), its sample in cur (the left operand at this step), or
// else the value fill gives for its labels, if any.
func fillAbsent(out, cur, present promql.Vector, fill func(labels.Labels) (float64, bool)) promql.Vector {
	at := make(map[uint64]promql.Sample, len(cur))
	for _, s := range cur {
		at[s.Metric.Hash()] = s
	}
	for _, p := range present {
		if s, ok := at[p.Metric.Hash()]; ok {
			out = append(out, s)
			continue
		}
		if v, ok := fill(p.Metric); ok {
			out = append(out, promql.Sample{Metric: p.Metric, F: v})
		}
	}
	return out
}

// defaultSeries is defaultScalar with series on the right (args[2]),
// matched on labels without the names, or on/ignoring args[4:] when
// args[3] says so.
func defaultSeries(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	if len(vals[1]) == 0 {
		return append(enh.Out, vals[2]...), nil
	}
	mode, names := stringArg(args[3]), strArgs(args, 4)
	b := labels.NewBuilder(labels.EmptyLabels())
	key := func(ls labels.Labels) uint64 {
		b.Reset(ls)
		b.Del(labels.MetricName)
		if mode == "on" {
			b.Keep(names...)
		} else {
			b.Del(names...)
		}
		return b.Labels().Hash()
	}
	right := make(map[uint64]float64, len(vals[2]))
	for _, s := range vals[2] {
		right[key(s.Metric)] = s.F
	}
	return fillAbsent(enh.Out, vals[0], vals[1], func(ls labels.Labels) (float64, bool) {
		v, ok := right[key(ls)]
		return v, ok
	}), nil
}

// timezoneOffset answers the offset from UTC of a time zone at each step,
// in seconds.
func timezoneOffset(_ []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	loc, err := time.LoadLocation(stringArg(args[0]))
	if err != nil {
		panic(fmt.Errorf("timezone_offset: %w", err))
	}
	_, off := time.UnixMilli(enh.Ts).In(loc).Zone()
	return append(enh.Out, promql.Sample{Metric: labels.EmptyLabels(), F: float64(off)}), nil
}

func plumbing() []extension {
	return []extension{
		{fnDef(internalPrefix+"name_back", 0, vec), nameBack},
		{fnDef(internalPrefix+"drop_nan", 0, vec), dropNaN},
		{fnDef(internalPrefix+"default_scalar", 0, vec, vec, scl), defaultScalar},
		{fnDef(internalPrefix+"default", -1, vec, vec, vec, txt), defaultSeries},
	}
}

func clockFunctions() []extension {
	return []extension{{fnDef("timezone_offset", 0, txt), timezoneOffset}}
}

// graphiteGroup renames each series to the dot-separated parts of its
// Graphite-style name at the given indexes.
func graphiteGroup(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vals[0] {
		parts := strings.Split(s.Metric.Get(labels.MetricName), ".")
		var name strings.Builder
		for j := 1; j < len(vals); j++ {
			if i := scalarArg(vals, j); i >= 0 && i < float64(len(parts)) {
				name.WriteString(parts[int(i)])
			}
			if j < len(vals)-1 {
				name.WriteByte('.')
			}
		}
		b.Reset(s.Metric)
		b.Set(labels.MetricName, name.String())
		enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: s.F, H: s.H})
	}
	return enh.Out, nil
}

// dropNaN leaves out NaN samples: VictoriaMetrics answers no point where
// a value is NaN.
func dropNaN(vals []promql.Vector, _ promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
	for _, s := range vals[0] {
		if s.H != nil || !math.IsNaN(s.F) {
			enh.Out = append(enh.Out, s)
		}
	}
	return enh.Out, nil
}
