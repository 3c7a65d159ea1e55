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

	"github.com/peakline/peakline/tsdb/query"
)

// Exact answers of MetricsQL's transforms and aggregations over the test
// store, worked out by hand from openStore's samples: over the range
// query's six steps (testBase-5m .. testBase at 1m), b{job_id="1"} is
// 61 73 5 17 29 41 and b{job_id="2"} is 92 110 8 26 44 62. (The
// comparison with VictoriaMetrics is vm_transform_test.go.)
func TestTransformValues(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	f := func(q string, step time.Duration, want string) {
		t.Helper()
		if got := render(t, e, q, step); got != want {
			t.Fatalf("%s (step %s):\n got %s\nwant %s", q, step, got, want)
		}
	}
	f(`running_sum(b{job_id="1"})`, time.Minute, `{counter="3", job_id="1"} 61 134 139 156 185 226`)
	f(`running_max(b{job_id="2"})`, time.Minute, `{counter="4", job_id="2"} 92 110 110 110 110 110`)
	f(`running_avg(b{job_id="1"})`, time.Minute, `{counter="3", job_id="1"} 61 67 46.333 39 37 37.667`)
	f(`range_max(b)`, time.Minute, `{counter="3", job_id="1"} 73 73 73 73 73 73 | {counter="4", job_id="2"} 110 110 110 110 110 110`)
	f(`range_median(b{job_id="1"})`, time.Minute, `{__name__="b", counter="3", job_id="1"} 35 35 35 35 35 35`)
	f(`range_first(b{job_id="1"})`, time.Minute, `{__name__="b", counter="3", job_id="1"} 61 61 61 61 61 61`)
	f(`range_max(b)`, 0, `{counter="3", job_id="1"} 41 | {counter="4", job_id="2"} 62`)
	f(`range_normalize(b{job_id="1"})`, time.Minute, `{__name__="b", counter="3", job_id="1"} 0.824 1 0 0.176 0.353 0.529`)
	// A series of one point (73, at the second step): the functions that
	// answer at the series' points answer there only, not at every later
	// step; keep_next_value fills the steps before it.
	f(`interpolate(b{job_id="1"} > 70)`, time.Minute, `{__name__="b", counter="3", job_id="1"} 73`)
	f(`keep_next_value(b{job_id="1"} > 70)`, time.Minute, `{__name__="b", counter="3", job_id="1"} 73 73`)
	f(`remove_resets(b{job_id="1"} > 70)`, time.Minute, `{__name__="b", counter="3", job_id="1"} 73`)
	f(`remove_resets(b{job_id="1"})`, time.Minute, `{__name__="b", counter="3", job_id="1"} 61 73 78 90 102 114`)
	f(`label_set(b{job_id="2"}, "x", "y", "counter", "")`, 0, `{__name__="b", job_id="2", x="y"} 62`)
	f(`label_value(b{job_id="2"}, "counter")`, 0, `{counter="4", job_id="2"} 4`)
	f(`limit_offset(1, 1, b)`, 0, `{__name__="b", counter="4", job_id="2"} 62`)
	f(`union(a, b{job_id="2"})`, 0, `{__name__="a", counter="3", job_id="1"} 20 | {__name__="b", counter="4", job_id="2"} 62`)
	f(`median(b)`, 0, `{} 51.5`)
	f(`share(b)`, 0, `{__name__="b", counter="3", job_id="1"} 0.398 | {__name__="b", counter="4", job_id="2"} 0.602`)
	f(`topk_max(1, b, "rest")`, time.Minute, `{__name__="b", counter="4", job_id="2"} 92 110 8 26 44 62 | {rest="rest"} 61 73 5 17 29 41`)
	f(`b{job_id="1"} default 0`, 0, `{__name__="b", counter="3", job_id="1"} 41`)
	f(`nothing default 7`, 0, `{} 7`)
	f(`sum(b) by (job_id) limit 1`, 0, `{job_id="1"} 41`)
	// limit keeps at most N series over the range: job 2 alone at the
	// last step is not taken, job 1 being first over the range.
	f(`sum(b > 60) by (job_id) limit 1`, time.Minute, `{job_id="1"} 61 73`)
	f(`sum(b > 60) by (job_id) limit 2`, time.Minute, `{job_id="1"} 61 73 | {job_id="2"} 92 110 62`)
	f(`share(b) by (job_id) limit 1`, 0, `{__name__="b", counter="3", job_id="1"} 1`)
	// Functions of the whole range over one another answer at an
	// instant; over a range they are refused (the engine would shift the
	// inner one's window).
	f(`running_sum(range_max(b{job_id="1"}))`, 0, `{counter="3", job_id="1"} 41`)
	_, err := e.Range(context.Background(), `running_sum(b default 0)`, testBase.Add(-5*time.Minute), testBase, time.Minute)
	var qe *query.Error
	if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), "whole range") {
		t.Fatalf("nested functions of the whole range: %v", err)
	}
	// A range whose start is not a multiple of the step would read the
	// whole range on the engine's aligned grid, between the query's
	// steps: refused, naming the start and step; aligned, it answers.
	for q, fn := range map[string]string{
		`running_max(b{job_id="2"})`: "running_max", `abs(range_max(b))`: "range_max", `b default 0`: "default",
		`interpolate(b) + 1`: "interpolate", `sum(b) by (job_id) limit 1`: "limit 1",
	} {
		_, err = e.Range(context.Background(), q, testBase.Add(-5*time.Minute+300*time.Millisecond), testBase, time.Minute)
		want := fn + ": start 2026-03-01T11:55:00.3Z is not a multiple of step 1m0s"
		if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s over an unaligned range: %v, want bad_data %q", q, err, want)
		}
	}
	if _, err := e.Range(context.Background(), `max_over_time(b[2m])`, testBase.Add(-5*time.Minute+300*time.Millisecond), testBase, time.Minute); err != nil {
		t.Fatalf("a rollup over an unaligned range: %v", err)
	}
}

// The whole range a range transform reads counts in --query-max-points
// like any subquery: 5m at 1s is 301 steps, and each function of the
// whole range adds them again.
func TestRangeTransformPoints(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	f := func(maxPoints int, q string, ok bool) {
		t.Helper()
		e := query.New(store.Queryable(), query.Options{MaxPoints: maxPoints})
		res, err := e.Range(context.Background(), q, testBase.Add(-5*time.Minute), testBase, time.Second)
		if ok {
			if err != nil {
				t.Fatalf("%s within %d points: %v", q, maxPoints, err)
			}
			res.Close()
			return
		}
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), "--query-max-points") {
			t.Fatalf("%s over %d points: %v, want bad_data naming the limit", q, maxPoints, err)
		}
	}
	f(301, `running_sum(b)`, true)
	f(300, `running_sum(b)`, false)
	f(602, `topk_max(1, b) + running_sum(b)`, true)
	f(601, `topk_max(1, b) + running_sum(b)`, false)
}

// render prints a result as "labels v v v | labels v ..." with values
// rounded to three decimals.
func render(t *testing.T, e *query.Engine, q string, step time.Duration) string {
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
	var parts []string
	add := func(ls labels.Labels, vs []float64) {
		s := ls.String()
		for _, v := range vs {
			s += " " + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
		}
		parts = append(parts, s)
	}
	switch v := res.Value.(type) {
	case promql.Matrix:
		for _, s := range v {
			var vs []float64
			for _, p := range s.Floats {
				vs = append(vs, p.F)
			}
			add(s.Metric, vs)
		}
	case promql.Vector:
		for _, s := range v {
			add(s.Metric, []float64{s.F})
		}
	case promql.Scalar:
		add(labels.EmptyLabels(), []float64{v.V})
	}
	return strings.Join(parts, " | ")
}

// Range transforms evaluated at once by many queries give each its own
// series: the memo of series they share tells evaluations apart.
func TestRangeTransformsConcurrent(t *testing.T) {
	store := openStore(t, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	queries := map[string]string{
		`running_sum(b{job_id="1"})`: `{counter="3", job_id="1"} 61 134 139 156 185 226`,
		`running_sum(b{job_id="2"})`: `{counter="4", job_id="2"} 92 202 210 236 280 342`,
		`range_min(b)`:               `{counter="3", job_id="1"} 5 5 5 5 5 5 | {counter="4", job_id="2"} 8 8 8 8 8 8`,
	}
	var wg sync.WaitGroup
	for range 4 {
		for q, want := range queries {
			wg.Go(func() {
				if got := render(t, e, q, time.Minute); got != want {
					t.Errorf("%s:\n got %s\nwant %s", q, got, want)
				}
			})
		}
	}
	wg.Wait()
}

// go test -run '^$' -bench RangeTransform ./tsdb/query/
func BenchmarkRangeTransform(b *testing.B) {
	store := openStore(b, testBase, testSeries()...)
	e := query.New(store.Queryable(), query.Options{})
	for _, q := range []string{`running_sum(b)`, `range_median(b)`, `range_zscore(b)`} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// 10 minutes at 1s: 601 steps over every series.
				res, err := e.Range(context.Background(), q, testBase.Add(-10*time.Minute), testBase, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if m := res.Value.(promql.Matrix); len(m) == 0 || len(m[0].Floats) != 601 {
					b.Fatalf("%s: %d series", q, len(m))
				}
				res.Close()
			}
		})
	}
}
