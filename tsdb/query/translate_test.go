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
	e := query.New(store.Queryable(), query.Options{})
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
	f(`histogram_quantile(0.9, sum by (le) (rate(a[5m])))`, 0, `histogram_quantile(0.9, sum by (le) (rate(a[5m])))`)
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
	bad(`range_median(a)`, `"range_median"`)
	bad(`range_first(a)`, `"range_first"`)
	bad(`median(a)`, `"median"`)
	bad(`stale_samples_over_time(a[5m])`, `"stale_samples_over_time"`)
	bad(`a{job_id="1" or job_id="2"}`, `or-delimited`)
	bad(`sum(a) limit 3`, `limit`)
	bad(`(a, b)`, `unions`)
	bad(`a default b`, `default`)
	bad(`sum(a) offset 5m`, `offset`)
	bad(`(sum(a) + 1) keep_metric_names`, `keep_metric_names`)
	bad(`rate(`, `parse`)
	if _, err := e.Translate(ctx, `range_median(a)`, start, end, 0); !errors.Is(err, query.ErrUnsupportedFunction) {
		t.Fatalf("range_median: %v does not wrap ErrUnsupportedFunction", err)
	}
}
