package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

const (
	minTime = math.MinInt64
	maxTime = math.MaxInt64
)

// ParseSelectors parses series selectors (the match[] parameters of the
// Prometheus API) with the MetricsQL parser. Each selector gives one set
// of matchers; MetricsQL's or-delimited filters (`{a="1" or b="2"}`)
// give one set per filter group. Every set must hold a matcher that does
// not match the empty string, as in Prometheus.
func ParseSelectors(selectors []string) ([][]*labels.Matcher, error) {
	var sets [][]*labels.Matcher
	for _, s := range selectors {
		e, err := metricsql.Parse(s)
		if err != nil {
			return nil, badData("parse selector %q: %v", s, err)
		}
		me, ok := e.(*metricsql.MetricExpr)
		if !ok {
			return nil, badData("selector %q: must be a series selector such as up{job=\"x\"}", s)
		}
		for _, lfs := range me.LabelFilterss {
			ms, err := matchers(lfs)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches("") }) {
				return nil, badData("selector %q: match[] must contain at least one non-empty matcher", s)
			}
			sets = append(sets, ms)
		}
	}
	return sets, nil
}

// Lookup is a metadata lookup over [Start, End] restricted to series
// matching any of Matchers (all series when empty), returning at most
// Limit items (0 for all).
type Lookup struct {
	Start, End time.Time
	Matchers   [][]*labels.Matcher
	Limit      int
}

// errTruncated is the warning of a lookup cut at its limit.
var errTruncated = errors.New("results truncated due to limit")

// LabelNames returns the sorted label names of the series looked up, and
// warnings.
func (e *Engine) LabelNames(ctx context.Context, l Lookup) ([]string, []string, error) {
	return e.labelLookup(ctx, l, func(ctx context.Context, q storage.Querier, hints *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, hints, ms...)
	})
}

// LabelValues returns the sorted values of one label of the series
// looked up, and warnings.
func (e *Engine) LabelValues(ctx context.Context, name string, l Lookup) ([]string, []string, error) {
	return e.labelLookup(ctx, l, func(ctx context.Context, q storage.Querier, hints *storage.LabelHints, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, hints, ms...)
	})
}

func (e *Engine) labelLookup(ctx context.Context, l Lookup, get func(context.Context, storage.Querier, *storage.LabelHints, []*labels.Matcher) ([]string, annotations.Annotations, error)) ([]string, []string, error) {
	// A lookup is bounded in time like a query.
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	q, err := e.queryable.Querier(l.Start.UnixMilli(), l.End.UnixMilli())
	if err != nil {
		return nil, nil, &Error{Type: ErrInternal, Err: fmt.Errorf("open querier: %w", err)}
	}
	defer q.Close()
	hints := &storage.LabelHints{Limit: hintLimit(l.Limit)}
	sets := l.Matchers
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	seen := map[string]struct{}{}
	var warns annotations.Annotations
	for _, ms := range sets {
		// The store does not always look at ctx itself.
		if err := ctx.Err(); err != nil {
			return nil, nil, execError(err)
		}
		vals, w, err := get(ctx, q, hints, ms)
		warns.Merge(w)
		if err != nil {
			return nil, nil, execError(err)
		}
		for _, v := range vals {
			if _, ok := seen[v]; !ok {
				// The answer outlives the querier: copy out of its memory.
				seen[strings.Clone(v)] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	if l.Limit > 0 && len(out) > l.Limit {
		out = out[:l.Limit]
		warns.Add(errTruncated)
	}
	return out, annotationStrings(warns), nil
}

// Series returns the label sets of the series looked up (Matchers must
// not be empty), and warnings.
func (e *Engine) Series(ctx context.Context, l Lookup) ([]labels.Labels, []string, error) {
	if len(l.Matchers) == 0 {
		return nil, nil, badData("no match[] parameter provided")
	}
	// A lookup is bounded in time like a query.
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	startMs, endMs := l.Start.UnixMilli(), l.End.UnixMilli()
	q, err := e.queryable.Querier(startMs, endMs)
	if err != nil {
		return nil, nil, &Error{Type: ErrInternal, Err: fmt.Errorf("open querier: %w", err)}
	}
	defer q.Close()
	// "series" is no function: it tells the store no samples are needed.
	hints := &storage.SelectHints{Start: startMs, End: endMs, Func: "series", Limit: hintLimit(l.Limit)}
	var set storage.SeriesSet
	if len(l.Matchers) == 1 {
		set = q.Select(ctx, false, hints, l.Matchers[0]...)
	} else {
		sets := make([]storage.SeriesSet, 0, len(l.Matchers))
		for _, ms := range l.Matchers {
			sets = append(sets, q.Select(ctx, true, hints, ms...))
		}
		set = storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge)
	}
	out := []labels.Labels{}
	for set.Next() {
		if len(out)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, execError(err)
			}
		}
		// The answer outlives the querier: copy out of its memory.
		out = append(out, set.At().Labels().Copy())
		if l.Limit > 0 && len(out) > l.Limit {
			out = out[:l.Limit]
			warns := set.Warnings()
			warns.Add(errTruncated)
			return out, annotationStrings(warns), nil
		}
	}
	if err := set.Err(); err != nil {
		return nil, nil, execError(err)
	}
	return out, annotationStrings(set.Warnings()), nil
}

// hintLimit asks the store for one item more than the limit, so that a
// cut can be told from an exact fit.
func hintLimit(limit int) int {
	if limit > 0 && limit < math.MaxInt {
		return limit + 1
	}
	return limit
}

// annotationStrings renders storage warnings of the metadata lookups.
func annotationStrings(a annotations.Annotations) []string {
	w, _ := a.AsStrings("", 10, 0)
	return w
}
