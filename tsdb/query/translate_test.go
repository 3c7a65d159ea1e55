package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/query"
)

// openStore opens a real on-disk job store holding the given series, each
// with samples every 10s over the 10 minutes before base.
func openStore(t testing.TB, base time.Time, series ...labels.Labels) *tsdb.Store {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	app := store.Appendable().Appender(context.Background())
	for i, ls := range series {
		for k := 0; k <= 60; k++ {
			ts := base.Add(time.Duration(k-60) * 10 * time.Second).UnixMilli()
			// Counters that grow at a per-series rate, with a reset.
			v := float64((k%40)*(i+1)) + float64(i)
			if _, err := app.Append(0, ls, ts, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return store
}

var testBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestTranslate(t *testing.T) {
	store := openStore(t, testBase,
		labels.FromStrings("__name__", "a", "job_id", "1"),
		labels.FromStrings("__name__", "b", "job_id", "1"),
		labels.FromStrings("__name__", "c", "job_id", "2"),
	)
	e := query.New(store.Queryable(), query.Options{Now: func() time.Time { return testBase.Add(time.Minute) }})
	ctx := context.Background()
	start, end := testBase.Add(-5*time.Minute), testBase
	f := func(q string, step time.Duration, want string) {
		t.Helper()
		got, err := e.Translate(ctx, q, start, end, step)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != want {
			t.Fatalf("%s (step %s):\n got %s\nwant %s", q, step, got, want)
		}
	}
	// PromQL passes through.
	f(`a`, 0, `a`)
	f(`a{job_id="1",x!~"y.*"}`, 0, `a{job_id="1",x!~"y.*"}`)
	f(`{__name__=~"a|b"}`, 0, `{__name__=~"a|b"}`)
	f(`rate(a[5m] offset 1m)`, 0, `rate(a[5m] offset 1m)`)
	f(`a offset -1m`, 0, `a offset -1m`)
	f(`a @ end()`, 0, `a @ end()`)
	f(`a @ 1700000000.5`, 0, `a @ 1700000000.500`)
	f(`max_over_time(a[10m:1m])`, 0, `max_over_time((a)[10m:1m])`)
	f(`a[10m:]`, 0, `(a)[10m:]`)
	f(`sum by (job_id) (rate(a[1m]))`, 0, `sum by (job_id) (rate(a[1m]))`)
	f(`sum(a) without (job_id)`, 0, `sum without (job_id) (a)`)
	f(`topk(2, a)`, 0, `topk(2, a)`)
	f(`count_values("v", a)`, 0, `count_values("v", a)`)
	f(`a + on(job_id) group_left(x) b`, 0, `a + on (job_id) group_left (x) b`)
	f(`a / ignoring(x) b`, 0, `a / ignoring (x) b`)
	f(`a > bool 2`, 0, `a > bool 2`)
	f(`a and b or c unless a`, 0, `(a and b) or (c unless a)`)
	f(`a + b * c`, 0, `a + (b * c)`)
	f(`(a + b) * c`, 0, `(a + b) * c`)
	f(`a * -2`, 0, `a * (-2)`)
	f(`-a`, 0, `0 - a`)
	f(`label_replace(a, "x", "$1", "job_id", "(.*)")`, 0, `label_replace(a, "x", "$1", "job_id", "(.*)")`)
	f(`histogram_quantile(0.9, sum by (le) (rate(a[5m])))`, 0, `metricsql_drop_nan(histogram_quantile(0.9, sum by (le) (rate(a[5m]))))`)
	f(`1+1`, 0, `2`)
	f(`time() - 5m`, 0, `time() - 300`)
	// MetricsQL: WITH templates.
	f(`WITH (cpu(j) = peakline_cpu_percent{job_id=j}) max(cpu("42")) by (task)`, 0,
		`max by (task) (peakline_cpu_percent{job_id="42"})`)
	f(`WITH (f = {job_id="1"}) a{f} + b{f}`, 0, `a{job_id="1"} + b{job_id="1"}`)
	// MetricsQL: rollups without a window take the step, or 5m at an instant.
	f(`rate(a)`, 0, `rate(a[5m])`)
	f(`rate(a)`, 30*time.Second, `rate(a[30s])`)
	f(`quantile_over_time(0.9, a)`, time.Minute, `quantile_over_time(0.9, a[1m])`)
	f(`rate(a offset 1m)`, time.Minute, `rate(a[1m] offset 1m)`)
	f(`rate(a[2i])`, 15*time.Second, `rate(a[30s])`)
	// MetricsQL: implicit subqueries at the query step.
	f(`rate(sum(a))`, time.Minute, `rate((sum(a))[1m:1m])`)
	f(`max_over_time(sum(a)[10m])`, time.Minute, `max_over_time((sum(a))[10m:1m])`)
	f(`step()`, 15*time.Second, `15`)
	f(`step()`, 0, `300`)
	f(`rate(a[2i])`, 0, `rate(a[10m])`)
	f(`end() - start()`, 15*time.Second, `1772366400 - 1772366100`)
	// MetricsQL: keep_metric_names.
	f(`rate(a[5m]) keep_metric_names`, 0, `label_replace(rate(a[5m]), "__name__", "a", "", "")`)
	f(`rate({__name__=~"a|b"}[5m]) keep_metric_names`, 0,
		`label_replace(rate(a[5m]), "__name__", "a", "", "") or on (__name__) label_replace(rate(b[5m]), "__name__", "b", "", "")`)
	f(`abs({job_id="1"}) keep_metric_names`, 0,
		`label_replace(abs(a{job_id="1"}), "__name__", "a", "", "") or on (__name__) label_replace(abs(b{job_id="1"}), "__name__", "b", "", "")`)
	f(`(a * 2) keep_metric_names`, 0, `label_replace(a * 2, "__name__", "a", "", "")`)
	f(`abs(rate(a) keep_metric_names) keep_metric_names`, time.Minute,
		`label_replace(abs(label_replace(rate(a[1m]), "__name__", "a", "", "")), "__name__", "a", "", "")`)
	f(`rate(nothing_here[5m]) keep_metric_names`, 0, `rate(nothing_here[5m])`)
	// MetricsQL transforms: step transforms are calls; range transforms
	// see the whole range (5m at 1m: 6 steps, the last at end), pinned
	// with @, their names kept in a label of their own where
	// VictoriaMetrics keeps them.
	f(`label_set(a, "x", "y")`, 0, `label_set(a, "x", "y")`)
	f(`sort_by_label(a, "x")`, 0, `metricsql_sort_by_label(a, "x")`)
	f(`range_max(a)`, time.Minute, `range_max((a)[6m:1m] @ 1772366400.000)`)
	f(`range_max(a)`, 0, `range_max((a)[1ms:1ms] @ 1772366400.000)`)
	f(`range_quantile(0.9, a)`, time.Minute,
		`metricsql_name_back(range_quantile(0.9, (label_move(a, "__name__", "__metricsql_name__"))[6m:1m] @ 1772366400.000))`)
	// A step that does not reach end: the last step is before it (the
	// start, 1772366100, is a multiple of 124s).
	f(`running_sum(sum(a))`, 124*time.Second, `running_sum((sum(a))[6m12s:2m4s] @ 1772366348.000)`)
	f(`clamp_min(400, 0) * a`, 0, `scalar(clamp_min(vector(400), 0)) * a`)
	f(`label_replace(1, "x", "y", "", "")`, 0, `label_replace(vector(1), "x", "y", "", "")`)
	f(`now()`, 0, `1772366460`)
	// MetricsQL aggregations.
	f(`median(a) by (x)`, 0, `quantile by (x) (0.5, a)`)
	f(`mode(a) without (x)`, 0, `metricsql_mode(a, "without", "x")`)
	f(`quantiles("q", 0.1, 0.9, a)`, 0, `union(label_set(quantile(0.1, a), "q", "0.1"), label_set(quantile(0.9, a), "q", "0.9"))`)
	f(`topk_max(2, a, "o=rest") by (x)`, time.Minute,
		`metricsql_topk_range(2, a, metricsql_name_back(range_max((label_move(a, "__name__", "__metricsql_name__"))[6m:1m] @ 1772366400.000)), "o=rest", "top", "by", "x")`)
	f(`sum(a, b)`, 0, `sum(union(a, b))`)
	f(`sum(a) by (x) limit 2`, time.Minute, `metricsql_limit(2, sum by (x) (a), last_over_time((sum by (x) (a))[6m:1m] @ 1772366400.000), "by", "x")`)
	f(`topk(1, a) by (x) limit 2`, 0, `metricsql_limit(2, topk by (x) (1, a), last_over_time((topk by (x) (1, a))[1ms:1ms] @ 1772366400.000), "by", "x")`)
	// MetricsQL syntax.
	f(`a default 0`, time.Minute, `metricsql_default_scalar(a, last_over_time((a)[6m:1m] @ 1772366400.000), 0)`)
	f(`a default on(x) b`, 0, `metricsql_default(a, last_over_time((a)[1ms:1ms] @ 1772366400.000), b, "on", "x")`)
	f(`a if b`, 0, `a and b`)
	f(`a ifnot on(x) b`, 0, `a unless on (x) b`)
	f(`a if 1`, 0, `a and on () vector(1)`)
	f(`a or 1`, 0, `a or vector(1)`)
	f(`{job_id="1" or x="2"}`, 0, `union({job_id="1"}, {x="2"})`)
	f(`rate({job_id="1" or x="2"}[1m] offset 1m)`, 0, `union(rate({job_id="1"}[1m] offset 1m), rate({x="2"}[1m] offset 1m))`)
	f(`(a, b)`, 0, `union(a, b)`)
	f(`a * on(x) group_left(y) prefix "p_" b`, 0, `a * on (x) group_left (p_y) label_move(b, "y", "p_y")`)
	f(`a / ignoring(z) group_right(y) prefix "q_" b`, 0, `label_move(a, "y", "q_y") / ignoring (z, q_y) group_right (q_y) b`)
	f(`group_left{x="1"}`, 0, `{__name__="group_left",x="1"}`)
	f(`a + fill_right(0) b`, 0, `(a + b) or ((a unless b) + clamp((a unless b), 0, 0))`)
	f(`(sum(a) + 1) keep_metric_names`, 0, `metricsql_name_back(label_move(sum(a), "__name__", "__metricsql_name__") + 1)`)
	f(`(rate(a[1m]) / on(x) b) keep_metric_names`, 0,
		`metricsql_name_back((rate(a[1m]) / on (x) b) * on (x) group_left (__metricsql_name__) clamp(label_keep(label_move(rate(a[1m]), "__name__", "__metricsql_name__"), "x", "__metricsql_name__"), 1, 1))`)
	f(`sum(a) offset 5m`, 0, `last_over_time((sum(a))[5m:5m] offset 5m)`)
	f(`sum(a) offset 90s`, time.Minute, `last_over_time((sum(a))[1m:1m] offset 1m30s)`)
	f(`sum(a) @ (end() - 1m)`, time.Minute, `last_over_time((sum(a))[1m:1m] @ 1772366340.000)`)

	// What the engine cannot run is bad_data naming it.
	bad := func(q, want string) {
		t.Helper()
		_, err := e.Translate(ctx, q, start, end, 0)
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Type != query.ErrBadData {
			t.Fatalf("%s: got %v, want a bad_data error", q, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %q does not mention %q", q, err, want)
		}
	}
	bad(`rand()`, `"rand"`)
	bad(`stale_samples_over_time(a[5m])`, `"stale_samples_over_time"`)
	bad(`metricsql_mode(a, "")`, `"metricsql_mode"`)
	bad(`label_match(a, "x", "(")`, `label_match`)
	bad(`timezone_offset("Nowhere/Else")`, `timezone_offset`)
	bad(`a @ (b + 1)`, `@`)
	bad(`quantiles("q", a)`, `quantiles takes a label name, one or more phis and the series`)
	bad(`quantiles(q, 0.5, a)`, `the first argument of quantiles is a label name in quotes`)
	bad(`histogram_quantiles("q", b, a)`, `the phis of histogram_quantiles must be numbers`)
	bad(`rate(`, `parse`)
	if _, err := e.Translate(ctx, `rand()`, start, end, 0); !errors.Is(err, query.ErrUnsupportedFunction) {
		t.Fatalf("rand: %v does not wrap ErrUnsupportedFunction", err)
	}
}
