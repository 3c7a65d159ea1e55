package query_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/peakline/peakline/tsdb/query"
)

// wantBadData fails unless err is bad_data containing msg.
func wantBadData(t *testing.T, err error, msg string) {
	t.Helper()
	var qe *query.Error
	if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%v, want bad_data containing %q", err, msg)
	}
}

// scalarOf evaluates an instant query that gives one value.
func scalarOf(t *testing.T, e *query.Engine, q string) float64 {
	t.Helper()
	res, err := e.Instant(context.Background(), q, testBase)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer res.Close()
	switch v := res.Value.(type) {
	case promql.Scalar:
		return v.V
	case promql.Vector:
		if len(v) == 1 {
			return v[0].F
		}
	}
	t.Fatalf("%.80s: %v, want one value", q, res.Value)
	return 0
}

// The steps of subqueries are counted as the engine evaluates them, and
// a query over the limit is refused before evaluation.
func TestSubqueryStepLimit(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	ctx := context.Background()
	// The engine evaluates [1h:1s] at 3,600 steps: the limit admits it
	// at 3,600 and refuses it at 3,599.
	const one = `count_over_time(vector(1)[1h:1s])`
	if got := scalarOf(t, query.New(store.Queryable(), query.Options{MaxPoints: 3600}), one); got != 3600 {
		t.Fatalf("%s = %v, want 3600", one, got)
	}
	_, err := query.New(store.Queryable(), query.Options{MaxPoints: 3599}).Instant(ctx, one, testBase)
	wantBadData(t, err, "evaluates 3600 steps")
	wantBadData(t, err, "limit of 3599 points per query (--query-max-points)")

	// Nested: the outer [1h:1m] takes 60 steps; the inner one spans the
	// outer span (59m) plus its own hour at 1s: 7,140 steps.
	const nested = `count_over_time(count_over_time(vector(1)[1h:1s])[1h:1m])`
	if got := scalarOf(t, query.New(store.Queryable(), query.Options{MaxPoints: 7200}), nested); got != 60 {
		t.Fatalf("%s = %v, want 60", nested, got)
	}
	_, err = query.New(store.Queryable(), query.Options{MaxPoints: 7199}).Instant(ctx, nested, testBase)
	wantBadData(t, err, "evaluates 7140 steps")

	e := query.New(store.Queryable(), query.Options{})
	for _, q := range []string{`max_over_time(vector(1)[365d:1ms])`, `max_over_time(vector(1)[2h:1ms])`, `rate(sum(b)[2h:1ms] @ end())`} {
		_, err := e.Instant(ctx, q, testBase)
		wantBadData(t, err, "over the limit of 500000 points per query (--query-max-points)")
	}
	// A Grafana panel: a day at 60s, a subquery of an hour at 15s.
	res, err := e.Range(ctx, `max_over_time(rate(b[1m])[1h:15s])`, testBase.Add(-24*time.Hour), testBase, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	if m := res.Value.(promql.Matrix); len(m) != 2 {
		t.Fatalf("grafana subquery: %v", m)
	}
	// MetricsQL's implicit subquery of a range query steps at the query
	// step: counted too.
	_, err = query.New(store.Queryable(), query.Options{MaxPoints: 1000}).Range(ctx, `rate(sum(b))`, testBase.Add(-24*time.Hour), testBase, time.Minute)
	wantBadData(t, err, "--query-max-points")
}

// Query text is bounded in length and size before it is parsed.
func TestQueryTextLimits(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	ctx := context.Background()
	long := `a` + strings.Repeat(" ", query.DefaultMaxQueryLength)
	_, err := e.Instant(ctx, long, testBase)
	wantBadData(t, err, "query is 65537 bytes long, over the limit of 65536 bytes (--query-max-length)")
	if got := scalarOf(t, e, `count(b`+strings.Repeat(" ", query.DefaultMaxQueryLength-9)+`)`); got != 2 {
		t.Fatalf("a query of the longest length: %v", got)
	}
	_, err = e.Instant(ctx, strings.Repeat("1+", 1_000_000)+"1", testBase)
	wantBadData(t, err, "--query-max-length")
	_, err = e.Instant(ctx, strings.Repeat("a+", 1001)+"a", testBase)
	wantBadData(t, err, "1001 operators")
	_, err = e.Format(ctx, strings.Repeat("1+", 1001)+"1")
	wantBadData(t, err, "1001 operators")
	if got := scalarOf(t, e, strings.Repeat("1+", 1000)+"1"); got != 1001 {
		t.Fatalf("1,000 operators: %v", got)
	}
	if got, err := e.Format(ctx, `sum(rate(x[5m]))by(job)`); err != nil || got != `sum(rate(x[5m])) by(job)` {
		t.Fatalf("format: %q %v", got, err)
	}
}

// blockingQueryable is a store whose selects wait for their context to
// end, as a slow disk would.
type blockingQueryable struct {
	storage.Queryable
	selected chan struct{} // receives once per select
}

func (b blockingQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := b.Queryable.Querier(mint, maxt)
	return blockingQuerier{Querier: q, selected: b.selected}, err
}

type blockingQuerier struct {
	storage.Querier
	selected chan struct{}
}

func (b blockingQuerier) Select(ctx context.Context, _ bool, _ *storage.SelectHints, _ ...*labels.Matcher) storage.SeriesSet {
	b.selected <- struct{}{}
	<-ctx.Done()
	return storage.ErrSeriesSet(ctx.Err())
}

// The caller's context reaches evaluation: canceling it ends the query
// and frees its slot for the next one.
func TestCancelStopsEvaluation(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	selected := make(chan struct{})
	e := query.New(blockingQueryable{Queryable: store.Queryable(), selected: selected}, query.Options{MaxConcurrency: 1})
	for round := range 2 { // the second round needs the slot the first one held
		ctx, cancel := context.WithCancel(context.Background())
		var (
			wg  sync.WaitGroup
			err error
		)
		wg.Go(func() { _, err = e.Instant(ctx, `sum(b)`, testBase) })
		<-selected
		cancel()
		wg.Wait()
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != query.ErrCanceled {
			t.Fatalf("round %d: %v, want canceled", round, err)
		}
	}
}

// keep_metric_names repeats its expression per metric name: the PromQL
// it translates to is bounded too.
func TestKeepNamesLimits(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	ctx := context.Background()
	// Two names (a and b): 600 operators become 2 × 600 + 1 (the or).
	q := `({__name__=~"a|b"} + (time()` + strings.Repeat(" + time()", 599) + `)) keep_metric_names`
	_, err := e.Instant(ctx, q, testBase)
	wantBadData(t, err, "query translates to 1201 PromQL operators")
	q = `({__name__=~"a|b"} + (time()` + strings.Repeat(" + time()", 399) + `)) keep_metric_names`
	if _, err := e.Translate(ctx, q, testBase, testBase, 0); err != nil {
		t.Fatalf("400 operators over two names: %v", err)
	}
}

// Nested keep_metric_names rewrites over different selectors multiply
// their branches: the whole query gets at most 100.
func TestKeepNamesBranches(t *testing.T) {
	var series []labels.Labels
	for i := range 11 {
		series = append(series, labels.FromStrings("__name__", fmt.Sprintf("x%02d", i), "job_id", "1"), labels.FromStrings("__name__", fmt.Sprintf("y%02d", i), "job_id", "1"))
	}
	store := openStore(t, testBase, series...)
	e := query.New(store.Queryable(), query.Options{})
	ctx := context.Background()
	// 11 branches for x, each with 1 for x and 11 for y: 132.
	_, err := e.Translate(ctx, `(abs({__name__=~"x.*"}) keep_metric_names + on(job_id) abs({__name__=~"y.*"}) keep_metric_names) keep_metric_names`, testBase, testBase, 0)
	wantBadData(t, err, "more than 100 branches")
	// 11 + 11 side by side: 22.
	if _, err := e.Translate(ctx, `abs({__name__=~"x.*"}) keep_metric_names + on(job_id) abs({__name__=~"y.*"}) keep_metric_names`, testBase, testBase, 0); err != nil {
		t.Fatal(err)
	}
}
