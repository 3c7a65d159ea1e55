// Package query is Peakline's query front: it parses MetricsQL (a
// superset of PromQL) with github.com/VictoriaMetrics/metricsql, turns
// the parsed query into PromQL (see translate.go for what MetricsQL adds
// and how), and evaluates it with the Prometheus promql engine over a
// storage.Queryable, normally the job store's. It also answers the
// metadata lookups of the Prometheus HTTP API (label names, label values,
// series). Every query is bounded before it runs: its text, its size with
// WITH templates expanded (scan.go) and its subqueries' steps (limits.go);
// what a lookup or query returns is copied out of the querier's memory.
//
// It owns no storage and speaks no HTTP: the store lives in package tsdb,
// the Prometheus-compatible HTTP API in package server. It leaves
// evaluation to the Prometheus engine: MetricsQL's functions and
// aggregations the engine lacks are registered with its function tables
// (rollup.go; transform.go, transform_range.go, aggr.go) and MetricsQL's
// syntax is rewritten into what the engine runs (translate.go).
package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// ErrorType classifies a failed query the way the Prometheus HTTP API
// does; the API layer maps it to a status code.
type ErrorType string

const (
	ErrBadData   ErrorType = "bad_data"  // the query or a parameter is wrong
	ErrExecution ErrorType = "execution" // the query is valid but failed to evaluate
	ErrTimeout   ErrorType = "timeout"   // the query ran out of time
	ErrCanceled  ErrorType = "canceled"  // the caller went away
	ErrInternal  ErrorType = "internal"  // the storage failed
)

// Error is a failed query with its class.
type Error struct {
	Type ErrorType
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupportedFunction is wrapped by the error for a MetricsQL-only
// function or aggregation, whose message names it.
var ErrUnsupportedFunction = errors.New("MetricsQL-only, the Prometheus engine cannot evaluate it")

func badData(format string, args ...any) error {
	return &Error{Type: ErrBadData, Err: fmt.Errorf(format, args...)}
}

// Options configure an Engine. Zero values take the defaults.
type Options struct {
	// Timeout bounds the evaluation of one query (default 2m).
	Timeout time.Duration
	// MaxSamples bounds the samples one query may hold in memory at once
	// (default 50,000,000, as in Prometheus).
	MaxSamples int
	// MaxConcurrency bounds the queries evaluated at once; more wait for
	// a slot until their context ends (default 8).
	MaxConcurrency int
	// LookbackDelta is how far back an instant selector looks for a
	// sample (default 5m, as in Prometheus).
	LookbackDelta time.Duration
	// DefaultWindow is the window of a rollup function written without
	// one (`rate(x)`) in an instant query; range queries use their step
	// (default 5m).
	DefaultWindow time.Duration
	// MaxPoints bounds the steps all subqueries of one query evaluate
	// together, checked before evaluation (default DefaultMaxPoints).
	MaxPoints int
	// MaxQueryLength bounds the query text in bytes (default
	// DefaultMaxQueryLength).
	MaxQueryLength int
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the engine's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock MetricsQL's now() reads (default time.Now).
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultTimeout        = 2 * time.Minute
	DefaultMaxSamples     = 50_000_000
	DefaultMaxConcurrency = 8
	DefaultLookbackDelta  = 5 * time.Minute
	DefaultRollupWindow   = 5 * time.Minute
)

func (o *Options) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = DefaultLookbackDelta
	}
	if o.DefaultWindow <= 0 {
		o.DefaultWindow = DefaultRollupWindow
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = DefaultMaxPoints
	}
	if o.MaxQueryLength <= 0 {
		o.MaxQueryLength = DefaultMaxQueryLength
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Engine evaluates MetricsQL queries over one Queryable. It is safe for
// concurrent use.
type Engine struct {
	opts      Options
	queryable storage.Queryable
	ng        *promql.Engine
}

// New returns an engine over q.
func New(q storage.Queryable, opts Options) *Engine {
	opts.setDefaults()
	ng := promql.NewEngine(promql.EngineOpts{
		Logger:               opts.Logger.With("component", "promql"),
		Reg:                  opts.Registerer,
		MaxSamples:           opts.MaxSamples,
		Timeout:              opts.Timeout,
		ActiveQueryTracker:   newSlots(opts.MaxConcurrency),
		LookbackDelta:        opts.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		// A subquery without a step (`x[5m:]`) steps by Prometheus'
		// default evaluation interval.
		NoStepSubqueryIntervalFn: func(int64) int64 { return defaultSubqueryStep.Milliseconds() },
	})
	return &Engine{opts: opts, queryable: q, ng: ng}
}

// Result is an evaluated query. Close it once Value has been used: the
// engine reuses the memory of its points. Its label sets are its own.
type Result struct {
	// Value is a promql.Matrix, promql.Vector, promql.Scalar or
	// promql.String.
	Value parser.Value
	// Warnings and Infos are the engine's annotations.
	Warnings, Infos []string
	// PromQL is the query as the engine ran it.
	PromQL string

	close func()
}

// Close releases the result.
func (r *Result) Close() {
	if r.close != nil {
		r.close()
		r.close = nil
	}
}

// Instant evaluates a MetricsQL query at ts.
func (e *Engine) Instant(ctx context.Context, qs string, ts time.Time) (*Result, error) {
	return e.eval(ctx, qs, ts, ts, 0)
}

// Range evaluates a MetricsQL query at every step from start to end.
// step must be positive.
func (e *Engine) Range(ctx context.Context, qs string, start, end time.Time, step time.Duration) (*Result, error) {
	if step <= 0 {
		return nil, badData("step must be positive, got %s", step)
	}
	return e.eval(ctx, qs, start, end, step)
}

// Translate returns the PromQL the engine would run for a MetricsQL query
// evaluated from start to end at step (0 for an instant query).
func (e *Engine) Translate(ctx context.Context, qs string, start, end time.Time, step time.Duration) (string, error) {
	pe, err := e.translate(ctx, qs, start, end, step)
	if err != nil {
		return "", err
	}
	return pe.String(), nil
}

// parse parses a MetricsQL query within the length and complexity limits.
func (e *Engine) parse(ctx context.Context, qs string) (metricsql.Expr, error) {
	if err := checkLength(qs, e.opts.MaxQueryLength); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, execError(err)
	}
	if err := checkSize(qs); err != nil {
		return nil, err
	}
	expr, err := metricsql.Parse(qs)
	if err != nil {
		return nil, badData("parse query: %v", err)
	}
	return expr, nil
}

func (e *Engine) translate(ctx context.Context, qs string, start, end time.Time, step time.Duration) (parser.Expr, error) {
	expr, err := e.parse(ctx, qs)
	if err != nil {
		return nil, err
	}
	t := &translator{
		ctx:           ctx,
		startMs:       start.UnixMilli(),
		endMs:         end.UnixMilli(),
		stepMs:        step.Milliseconds(),
		unitMs:        step.Milliseconds(),
		defaultWindow: step,
		names:         e.metricNames,
		nowMs:         e.opts.Now().UnixMilli(),
	}
	if step == 0 {
		t.defaultWindow = e.opts.DefaultWindow
		t.unitMs = e.opts.DefaultWindow.Milliseconds()
	}
	pe, err := t.expr(expr)
	if err != nil {
		return nil, err
	}
	if t.nestedRange != "" {
		return nil, badData("%s: a function over the whole range (range_*, running_*, default, histogram, topk_max...) over an argument with another one, or with a subquery pinned with @, is answered at an instant only; write it as an instant query or split it", t.nestedRange)
	}
	if t.unaligned != "" {
		return nil, badData("%s: start %s is not a multiple of step %s: a function over the whole range (range_*, running_*, default, interpolate, keep_last_value, topk_max, the limit modifier...) needs a range query aligned to its step, as Grafana sends it; align start to the step", t.unaligned, start.UTC().Format(time.RFC3339Nano), step)
	}
	// keep_metric_names repeats its expression once per metric name: the
	// PromQL the engine parses is bounded like the query.
	if ops := countOperators(pe); ops > maxOperators {
		return nil, badData("query translates to %d PromQL operators (keep_metric_names repeats its expression per metric name), over the limit of %d", ops, maxOperators)
	}
	return pe, nil
}

// Format returns a MetricsQL query prettified, within the length and
// complexity limits of a query (prettifying takes time quadratic in the
// query's operators and cannot be interrupted).
func (e *Engine) Format(ctx context.Context, qs string) (string, error) {
	if _, err := e.parse(ctx, qs); err != nil {
		return "", err
	}
	out, err := metricsql.Prettify(qs)
	if err != nil {
		return "", badData("format query: %v", err)
	}
	return out, nil
}

func (e *Engine) eval(ctx context.Context, qs string, start, end time.Time, step time.Duration) (*Result, error) {
	if step > 0 && end.Sub(start)/step > MaxPointsPerSeries {
		return nil, badData("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")
	}
	pe, err := e.translate(ctx, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	top := evalSpan{startMs: start.UnixMilli(), endMs: end.UnixMilli(), intervalMs: step.Milliseconds()}
	if step == 0 {
		top.intervalMs = 1 // as the engine evaluates an instant query
	}
	if err := checkSubquerySteps(pe, top, int64(e.opts.MaxPoints)); err != nil {
		return nil, err
	}
	promQL := pe.String()
	var qry promql.Query
	if step == 0 {
		qry, err = e.ng.NewInstantQuery(ctx, e.queryable, nil, promQL, start)
	} else {
		qry, err = e.ng.NewRangeQuery(ctx, e.queryable, nil, promQL, start, end, step)
	}
	if err != nil {
		return nil, constructionError(err, promQL)
	}
	res := qry.Exec(ctx)
	if res.Err != nil {
		qry.Close()
		return nil, execError(res.Err)
	}
	ownLabels(res.Value)
	out := &Result{Value: res.Value, PromQL: promQL, close: qry.Close}
	out.Warnings, out.Infos = res.Warnings.AsStrings(promQL, 10, 10)
	return out, nil
}

// ownLabels replaces the label sets of a query result with copies: the
// engine's querier is closed when Exec returns, and label strings read
// from a block may point into memory that compaction unmaps.
func ownLabels(v parser.Value) {
	switch v := v.(type) {
	case promql.Matrix:
		for i := range v {
			v[i].Metric = v[i].Metric.Copy()
		}
	case promql.Vector:
		for i := range v {
			v[i].Metric = v[i].Metric.Copy()
		}
	}
}

// constructionError classifies an error of building a query: the engine
// re-parses the translated PromQL and checks its types, so most are the
// user's.
func constructionError(err error, promQL string) error {
	var (
		eqt promql.ErrQueryTimeout
		eqc promql.ErrQueryCanceled
	)
	switch {
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &Error{Type: ErrTimeout, Err: err}
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &Error{Type: ErrCanceled, Err: err}
	}
	return badData("invalid query (as PromQL: %s): %v", promQL, err)
}

// execError classifies an evaluation error as the Prometheus API does.
func execError(err error) error {
	var (
		eqc promql.ErrQueryCanceled
		eqt promql.ErrQueryTimeout
		es  promql.ErrStorage
	)
	switch {
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &Error{Type: ErrCanceled, Err: err}
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &Error{Type: ErrTimeout, Err: err}
	case errors.As(err, &es):
		return &Error{Type: ErrInternal, Err: err}
	}
	return &Error{Type: ErrExecution, Err: err}
}

// metricNames lists the metric names the matchers select, over all time.
func (e *Engine) metricNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	q, err := e.queryable.Querier(minTime, maxTime)
	if err != nil {
		return nil, &Error{Type: ErrInternal, Err: fmt.Errorf("open querier: %w", err)}
	}
	defer q.Close()
	names, _, err := q.LabelValues(ctx, labels.MetricName, nil, ms...)
	if err != nil {
		return nil, &Error{Type: ErrInternal, Err: fmt.Errorf("list metric names: %w", err)}
	}
	// The names outlive the querier: copy them out of its memory.
	own := make([]string, len(names))
	for i, n := range names {
		own[i] = strings.Clone(n)
	}
	return own, nil
}

// slots bounds the queries the engine runs at once (a promql.QueryTracker
// that keeps no query log on disk).
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

func (s slots) GetMaxConcurrent() int { return cap(s) }

func (s slots) Insert(ctx context.Context, _ string) (int, error) {
	select {
	case s <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s slots) Delete(int) { <-s }

func (s slots) Close() error { return nil }
