package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/peakline/peakline/tsdb/query"
)

func testSeries() []labels.Labels {
	return []labels.Labels{
		labels.FromStrings("__name__", "a", "job_id", "1", "counter", "3"),
		labels.FromStrings("__name__", "b", "job_id", "1", "counter", "3"),
		labels.FromStrings("__name__", "b", "job_id", "2", "counter", "4"),
	}
}

// eval runs an instant (step 0) or range query and renders the result.
func eval(t *testing.T, e *query.Engine, q string, step time.Duration) string {
	t.Helper()
	var (
		res *query.Result
		err error
	)
	if step == 0 {
		res, err = e.Instant(context.Background(), q, testBase)
	} else {
		res, err = e.Range(context.Background(), q, testBase.Add(-5*time.Minute), testBase, step)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer res.Close()
	return res.Value.String()
}

// MetricsQL extensions give what their PromQL spelling gives.
func TestEvalMetricsQL(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	same := func(mql, promql string, step time.Duration) {
		t.Helper()
		got, want := eval(t, e, mql, step), eval(t, e, promql, step)
		if got != want || got == "" {
			t.Fatalf("%s gave\n%s\n%s gave\n%s", mql, got, promql, want)
		}
	}
	same(`rate(a)`, `rate(a[5m])`, 0)
	same(`rate(a)`, `rate(a[30s])`, 30*time.Second)
	same(`WITH (sel = {job_id="1"}) sum(b{sel}) + sum(a{sel})`, `sum(b{job_id="1"}) + sum(a{job_id="1"})`, time.Minute)
	same(`increase(b{job_id="2"}[2m]) keep_metric_names`, `label_replace(increase(b{job_id="2"}[2m]), "__name__", "b", "", "")`, time.Minute)

	// keep_metric_names keeps every series' own name.
	got := eval(t, e, `abs({job_id="1"}) keep_metric_names`, 0)
	if !strings.Contains(got, `{__name__="a", counter="3", job_id="1"}`) || !strings.Contains(got, `{__name__="b", counter="3", job_id="1"}`) {
		t.Fatalf("keep_metric_names: %s", got)
	}
	// Without it the names go and the two series collide.
	if _, err := e.Instant(context.Background(), `abs({job_id="1"})`, testBase); err == nil {
		t.Fatal("abs over two names that collide without them: no error")
	}
}

// Failures carry the class the Prometheus API reports.
func TestEvalErrors(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	f := func(opts query.Options, ctx context.Context, q string, want query.ErrorType, msg string) {
		t.Helper()
		e := query.New(store.Queryable(), opts)
		_, err := e.Range(ctx, q, testBase.Add(-5*time.Minute), testBase, 10*time.Second)
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != want || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want %s containing %q", q, err, want, msg)
		}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	f(query.Options{}, bg, `sum(`, query.ErrBadData, "parse")
	f(query.Options{}, bg, `a[5m]`, query.ErrBadData, "range vector")
	f(query.Options{}, bg, `rate(a)[1m] + 1`, query.ErrBadData, "")
	f(query.Options{}, bg, `rand_normal()`, query.ErrBadData, `"rand_normal"`)
	f(query.Options{}, bg, `{job_id="1"} * on(job_id) b`, query.ErrExecution, "multiple matches for labels")
	f(query.Options{}, bg, `{__name__=~"a|b"} * 2`, query.ErrExecution, "same labelset")
	f(query.Options{MaxSamples: 5}, bg, `b`, query.ErrExecution, "too many samples")
	f(query.Options{Timeout: time.Nanosecond}, bg, `b`, query.ErrTimeout, "")
	f(query.Options{}, canceled, `b`, query.ErrCanceled, "")
	if _, err := query.New(store.Queryable(), query.Options{}).Range(bg, `b`, testBase, testBase, 0); err == nil {
		t.Fatal("a range query with step 0: no error")
	}
}

func TestParseSelectors(t *testing.T) {
	f := func(in []string, want string) {
		t.Helper()
		sets, err := query.ParseSelectors(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var parts []string
		for _, ms := range sets {
			var s []string
			for _, m := range ms {
				s = append(s, m.String())
			}
			parts = append(parts, strings.Join(s, ","))
		}
		if got := strings.Join(parts, " | "); got != want {
			t.Fatalf("%q: %s, want %s", in, got, want)
		}
	}
	f(nil, "")
	f([]string{`up`}, `__name__="up"`)
	f([]string{`up{job=~"a.*",x!="1"}`, `{job_id="42"}`}, `__name__="up",job=~"a.*",x!="1" | job_id="42"`)
	f([]string{`{a="1" or b=~"2.+"}`}, `a="1" | b=~"2.+"`)
	f([]string{`WITH (j = {job_id="7"}) peakline_pids{j}`}, `__name__="peakline_pids",job_id="7"`)

	bad := func(in, msg string) {
		t.Helper()
		_, err := query.ParseSelectors([]string{in})
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%q: %v, want bad_data with %q", in, err, msg)
		}
	}
	bad(`{job=~".*"}`, "non-empty matcher")
	bad(`sum(up)`, "series selector")
	bad(`up{`, "parse")
}

func TestLookups(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	ctx := context.Background()
	all := query.Lookup{Start: testBase.Add(-time.Hour), End: testBase}
	job1, err := query.ParseSelectors([]string{`{job_id="1"}`})
	if err != nil {
		t.Fatal(err)
	}
	names, warns, err := e.LabelNames(ctx, all)
	if err != nil || strings.Join(names, ",") != "__name__,counter,job_id" || len(warns) != 0 {
		t.Fatalf("label names: %v %v %v", names, warns, err)
	}
	vals, _, err := e.LabelValues(ctx, "__name__", query.Lookup{Start: all.Start, End: all.End, Matchers: job1})
	if err != nil || strings.Join(vals, ",") != "a,b" {
		t.Fatalf("names of job 1: %v %v", vals, err)
	}
	vals, warns, err = e.LabelValues(ctx, "counter", query.Lookup{Start: all.Start, End: all.End, Limit: 1})
	if err != nil || strings.Join(vals, ",") != "3" || len(warns) != 1 {
		t.Fatalf("counters, limit 1: %v %v %v", vals, warns, err)
	}
	// Outside the samples' time there is nothing.
	vals, _, err = e.LabelValues(ctx, "job_id", query.Lookup{Start: testBase.Add(time.Hour), End: testBase.Add(2 * time.Hour)})
	if err != nil || len(vals) != 0 {
		t.Fatalf("job ids an hour later: %v %v", vals, err)
	}
	two, err := query.ParseSelectors([]string{`a`, `b{job_id="2"}`, `a{counter="3"}`})
	if err != nil {
		t.Fatal(err)
	}
	sets, _, err := e.Series(ctx, query.Lookup{Start: all.Start, End: all.End, Matchers: two})
	if err != nil || len(sets) != 2 || sets[0].Get("__name__") != "a" || sets[1].Get("job_id") != "2" {
		t.Fatalf("series: %v %v", sets, err)
	}
	if _, _, err := e.Series(ctx, all); err == nil {
		t.Fatal("series without match[]: no error")
	}
}

// The result of a range query is a matrix with a point per step.
func TestRangeResult(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	res, err := e.Range(context.Background(), `sum by (job_id) (b)`, testBase.Add(-5*time.Minute), testBase, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	m, ok := res.Value.(promql.Matrix)
	if !ok || len(m) != 2 || len(m[0].Floats) != 6 || res.PromQL != `sum by (job_id) (b)` {
		t.Fatalf("got %T %v (%s)", res.Value, res.Value, res.PromQL)
	}
}
