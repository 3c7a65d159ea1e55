package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/server"
)

// wantClientBadData fails unless the Prometheus client got bad_data
// naming msg.
func wantClientBadData(t *testing.T, err error, msg string) {
	t.Helper()
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) || apiErr.Type != v1.ErrBadData || !strings.Contains(apiErr.Msg, msg) {
		t.Fatalf("%v, want bad_data containing %q", err, msg)
	}
}

// Queries whose subqueries would take the process down are refused
// before evaluation; a Grafana panel's subquery still runs.
func TestPrometheusQueryLimits(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	j := testJob("j1", 4, 200, 4)
	loadTestJob(t, env, j)
	ctx := context.Background()
	now := time.UnixMilli(j.LastEventMs)

	for _, q := range []string{`max_over_time(vector(1)[365d:1ms])`, `max_over_time(vector(1)[2h:1ms])`} {
		_, _, _, err := env.api.Query(ctx, q, now)
		wantClientBadData(t, err, `invalid parameter "query": subquery (vector(1))`)
		wantClientBadData(t, err, "over the limit of 500000 points per query (--query-max-points)")
		code, doc := promGet(t, env.hs.URL+"/prometheus/api/v1/query?"+url.Values{"query": {q}}.Encode())
		if code != http.StatusBadRequest || doc.Status != "error" || doc.ErrorType != "bad_data" {
			t.Fatalf("GET %s: %d %+v", q, code, doc)
		}
	}
	// The range query's own steps widen its subqueries' span.
	_, _, _, err := env.api.QueryRange(ctx, `max_over_time(vector(1)[1m:100ms])`, v1.Range{Start: now.Add(-24 * time.Hour), End: now, Step: time.Minute})
	wantClientBadData(t, err, "--query-max-points")

	// A Grafana panel over a day at 60s: max_over_time(rate(x[1m])[1h:15s]).
	v, _, _, err := env.api.QueryRange(ctx, `max(max_over_time(rate(peakline_test_requests_total{job_id="j1"}[1m])[1h:15s]))`,
		v1.Range{Start: now.Add(-24 * time.Hour), End: now, Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if m := v.(model.Matrix); len(m) != 1 || len(m[0].Values) == 0 {
		t.Fatalf("grafana subquery: %v", v)
	}

	// A million-term 1+1+… is refused at once, by length, naming the field.
	huge := strings.Repeat("1+", 1_000_000) + "1"
	for _, path := range []string{"/query", "/query_range", "/format_query"} {
		code, doc := promPost(t, env.hs.URL+"/prometheus/api/v1"+path, url.Values{"query": {huge}, "start": {"0"}, "end": {"60"}, "step": {"1"}})
		if code != http.StatusBadRequest || doc.ErrorType != "bad_data" || !strings.Contains(doc.Error, `invalid parameter "query": query is 2000001 bytes long, over the limit of 65536 bytes (--query-max-length)`) {
			t.Fatalf("%s of a million terms: %d %+v", path, code, doc)
		}
	}
	// Within the length, the operators are bounded before parsing.
	code, doc := promPost(t, env.hs.URL+"/prometheus/api/v1/format_query", url.Values{"query": {strings.Repeat("x+", 5000) + "x"}})
	if code != http.StatusBadRequest || !strings.Contains(doc.Error, "5000 operators") {
		t.Fatalf("format_query of 5,000 operators: %d %+v", code, doc)
	}
	code, doc = promGet(t, env.hs.URL+"/prometheus/api/v1/format_query?"+url.Values{"query": {"sum(rate(x[5m]))by(job)"}}.Encode())
	var formatted string
	if code != http.StatusOK || json.Unmarshal(doc.Data, &formatted) != nil || formatted != "sum(rate(x[5m])) by(job)" {
		t.Fatalf("format_query: %d %+v", code, doc)
	}
}

// Non-finite values are the strings Prometheus writes.
func TestPrometheusNonFiniteValues(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	f := func(path string, params url.Values, want string) {
		t.Helper()
		resp, err := http.Get(env.hs.URL + "/prometheus/api/v1" + path + "?" + params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("%s %v: %d\n got %s\nwant %s", path, params, resp.StatusCode, b, want)
		}
	}
	f("/query", url.Values{"query": {"1/0"}, "time": {"100"}}, `{"status":"success","data":{"resultType":"scalar","result":[100,"+Inf"]}}`)
	// Prometheus writes fractions of a second with three digits.
	f("/query", url.Values{"query": {"-1/0"}, "time": {"100.5"}}, `{"status":"success","data":{"resultType":"scalar","result":[100.500,"-Inf"]}}`)
	f("/query", url.Values{"query": {"vector(0/0)"}, "time": {"100"}}, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[100,"NaN"]}]}}`)
	f("/query_range", url.Values{"query": {"vector(time()/(time()-101))"}, "start": {"100"}, "end": {"102"}, "step": {"1"}},
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[100,"-100"],[101,"+Inf"],[102,"102"]]}]}}`)
}

// engineQueries is the engine's gauge of the queries running or waiting.
func engineQueries(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "prometheus_engine_queries" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no prometheus_engine_queries gauge")
	return 0
}

// A client that leaves ends its query's evaluation: the engine's count
// of running queries drops back to zero long before the query could have
// finished (uncanceled it still runs after 20s), and the one slot is
// free for the next query.
func TestPrometheusCanceledQueryStops(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := newPromEnvWithRegistry(t, server.Config{Prometheus: server.PromConfig{QueryMaxConcurrency: 1, QueryTimeout: time.Hour}}, reg)
	// 100 series of 1,000 samples 10s apart: a sliding median over them
	// at 11,000 steps sorts about 10^10 values, minutes of work.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	app := env.store.Appendable().Appender(context.Background())
	for s := range 100 {
		ls := labels.FromStrings("__name__", "peakline_test_heavy", "job_id", "heavy", "series", fmt.Sprint(s))
		for k := range 1000 {
			if _, err := app.Append(0, ls, base.Add(time.Duration(k-1000)*10*time.Second).UnixMilli(), float64((k*7919+s)%1000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Go(func() {
		_, _, _, err = env.api.QueryRange(ctx, `quantile_over_time(0.5, peakline_test_heavy[1d])`,
			v1.Range{Start: base.Add(-30 * time.Hour), End: base, Step: 10 * time.Second})
	})
	waitFor(t, func() bool { return engineQueries(t, reg) == 1 })
	// While it runs, it holds the one slot: another query waits for it
	// until its own timeout.
	code, doc := promGet(t, env.hs.URL+"/prometheus/api/v1/query?"+url.Values{"query": {"1"}, "timeout": {"50ms"}}.Encode())
	if code != http.StatusServiceUnavailable || doc.ErrorType != "timeout" {
		t.Fatalf("query while the slot is taken: %d %+v", code, doc)
	}
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled query: %v", err)
	}
	waitFor(t, func() bool { return engineQueries(t, reg) == 0 })
	// The slot is free: the next query runs.
	if _, _, _, err := env.api.Query(context.Background(), "1", base); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing after 30s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
