package query

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// Limits checked before a query runs. The engine's own limits (samples,
// timeout, concurrency) act during evaluation; these refuse, from the text
// and the parsed query alone, work that would take the process down before
// any of those could act.

// MaxPointsPerSeries bounds (end-start)/step of a range query, as in
// Prometheus: a minute's resolution for a week, an hour's for a year.
const MaxPointsPerSeries = 11_000

// DefaultMaxPoints is the default of Options.MaxPoints. A subquery step
// evaluated by the Prometheus engine allocates about 240 bytes per series
// (measured with max_over_time(vector(1)[500s:1ms]): 116 MB for 500,001
// steps), so 500,000 steps keep one query's subqueries near 120 MB per
// series, well under 200 MB, while a Grafana panel's
// max_over_time(rate(x[1m])[1h:15s]) over a day at 60s needs 6,001.
// Memory across many series is bounded by MaxSamples.
const DefaultMaxPoints = 500_000

// DefaultMaxQueryLength is the default of Options.MaxQueryLength: 64 KiB,
// far beyond any hand-written or Grafana-built query.
const DefaultMaxQueryLength = 64 << 10

// maxOperators bounds the operators of one query, counted before it is
// parsed, WITH templates expanded. The PromQL parser the engine runs and
// MetricsQL's prettifier both take time quadratic in a chain of binary
// operators (`1+1+…`: 1,000 operators take about 6 ms to parse and 0.1 s
// to prettify; 8,000 take 0.5 s and 10 s; 32,000 take 35 s and 7
// minutes), and neither can be interrupted.
const maxOperators = 1_000

// maxNesting bounds how deep brackets nest in one query, WITH templates
// expanded.
const maxNesting = 200

// maxTokens bounds the tokens of one query with its WITH templates
// expanded. MetricsQL expands templates while parsing, and templates that
// use each other twice double the query at each level (20 of them take
// 35 s and 6 MB of text; 30 would exhaust memory), so the expansion is
// measured before the parser is called.
const maxTokens = 20_000

// defaultSubqueryStep is the step of a subquery written without one
// (`x[5m:]`), as Prometheus' default evaluation interval.
const defaultSubqueryStep = time.Minute

// checkLength refuses a query text longer than max bytes.
func checkLength(qs string, maxLen int) error {
	if len(qs) > maxLen {
		return badData("query is %d bytes long, over the limit of %d bytes (--query-max-length)", len(qs), maxLen)
	}
	return nil
}

// evalSpan is the evaluation grid of one level of a query: the whole
// query's, or a subquery's.
type evalSpan struct {
	startMs, endMs, intervalMs int64
}

// checkSubquerySteps refuses a translated query whose subqueries evaluate
// more than maxSteps steps together. It follows the engine's evaluation:
// each subquery is evaluated once, at its own step, over its range plus
// the whole span of the level that contains it (see
// promql.subqueryEvaluationTimes); so a nested subquery's span is the
// outer one's plus its own range, and its steps are that span divided by
// its step. Every subquery's result is held in memory (one point per step
// and series) until its parent is done.
func checkSubquerySteps(pe parser.Expr, top evalSpan, maxSteps int64) error {
	var total int64
	var walk func(n parser.Node, sp evalSpan) error
	walk = func(n parser.Node, sp evalSpan) error {
		if sq, ok := n.(*parser.SubqueryExpr); ok {
			child, steps := subquerySpan(sq, sp)
			total = satAdd(total, steps)
			if total > maxSteps {
				return badData("subquery %s evaluates %d steps (its range %s plus the %s it is evaluated over, at step %s), bringing the query's subqueries to %d steps, over the limit of %d points per query (--query-max-points): use a longer subquery step or a shorter range",
					sq, steps, model.Duration(sq.Range), msDuration(sp.endMs-sp.startMs), msDuration(child.intervalMs), total, maxSteps)
			}
			return walk(sq.Expr, child)
		}
		for _, c := range parser.Children(n) {
			if err := walk(c, sp); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(pe, top)
}

// subquerySpan is the grid the engine evaluates sq on within sp, and its
// number of steps.
func subquerySpan(sq *parser.SubqueryExpr, sp evalSpan) (evalSpan, int64) {
	stepMs := sq.Step.Milliseconds()
	if stepMs <= 0 {
		stepMs = defaultSubqueryStep.Milliseconds()
	}
	offsetMs, rangeMs := sq.OriginalOffset.Milliseconds(), sq.Range.Milliseconds()
	start, end := sp.startMs, sp.endMs
	if sq.Timestamp != nil || sq.StartOrEnd != 0 {
		// With @ every parent step takes the same window.
		end = start
	} else if sp.intervalMs > 0 {
		end = start + ((end-start)/sp.intervalMs)*sp.intervalMs
	}
	subStart := stepMs * ((start - offsetMs - rangeMs) / stepMs)
	if subStart <= start-offsetMs-rangeMs {
		subStart += stepMs
	}
	subEnd := end - offsetMs
	var steps int64
	if subEnd >= subStart {
		steps = (subEnd-subStart)/stepMs + 1
	}
	return evalSpan{startMs: subStart, endMs: subEnd, intervalMs: stepMs}, steps
}

// msDuration prints milliseconds as a PromQL duration.
func msDuration(ms int64) string {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return model.Duration(time.Duration(ms) * time.Millisecond).String()
}

// countOperators counts the binary operators of a PromQL expression.
func countOperators(pe parser.Expr) int {
	n := 0
	parser.Inspect(pe, func(node parser.Node, _ []parser.Node) error {
		if _, ok := node.(*parser.BinaryExpr); ok {
			n++
		}
		return nil
	})
	return n
}

// satAdd adds two non-negative counts, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
