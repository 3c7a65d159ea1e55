package server_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/server"
)

// startPrometheus runs a real Prometheus server (built by make tools) on a
// free loopback port with an empty store and the remote-write receiver
// on, and returns its URL. It is stopped when the test ends.
func startPrometheus(t *testing.T, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.enable-remote-write-receiver",
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case err := <-done:
			t.Fatalf("prometheus exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60s:\n%s", logs.String())
		}
	}
}

// conformanceQueries are evaluated by Prometheus and by Peakline over the
// same samples. Each is PromQL, so Peakline's MetricsQL front must pass
// it through unchanged in meaning.
var conformanceQueries = []string{
	// Selectors and matchers.
	`peakline_cpu_percent`,
	`peakline_cpu_percent{job_id="cj1"}`,
	`peakline_memory_bytes{task=~"task [0-2] .*"}`,
	`peakline_pids{task!~".*idle.*", job_id!="cj2"}`,
	`{__name__=~"peakline_(cpu_percent|pids)", job_id="cj1"}`,
	`peakline_cpu_percent{counter!="3"}`,
	`peakline_task_start`,
	`peakline_cpu_percent offset 1m`,
	// *_over_time.
	`max_over_time(peakline_cpu_percent[1m])`,
	`min_over_time(peakline_memory_bytes[2m])`,
	`avg_over_time(peakline_cpu_percent[30s])`,
	`sum_over_time(peakline_pids[1m])`,
	`count_over_time(peakline_cpu_percent[1m])`,
	`quantile_over_time(0.9, peakline_cpu_percent[2m])`,
	`stddev_over_time(peakline_memory_bytes[1m])`,
	`last_over_time(peakline_pids[1m])`,
	`changes(peakline_pids[1m])`,
	`max_over_time(sum by (job_id) (peakline_cpu_percent)[2m:10s])`,
	// Counters.
	`rate(peakline_test_requests_total[1m])`,
	`rate(peakline_test_requests_total[5m])`,
	`increase(peakline_test_requests_total[2m])`,
	`irate(peakline_test_requests_total[1m])`,
	`resets(peakline_test_requests_total[10m])`,
	`rate(peakline_test_requests_total[2m] offset 1m)`,
	`sum by (code) (rate(peakline_test_requests_total[2m]))`,
	// Aggregations.
	`sum by (counter) (peakline_cpu_percent)`,
	`avg by (task) (peakline_memory_bytes)`,
	`max by (job_id) (peakline_cpu_percent)`,
	`min without (task_uuid, task) (peakline_pids)`,
	`count by (__name__) ({__name__=~"peakline_.*"})`,
	`topk(3, peakline_cpu_percent)`,
	`bottomk(2, peakline_memory_bytes)`,
	`topk by (code) (1, rate(peakline_test_requests_total[2m]))`,
	`quantile(0.5, peakline_cpu_percent)`,
	`stddev by (job_id) (peakline_cpu_percent)`,
	`count_values("pids", peakline_pids)`,
	`sort_desc(sum by (task) (peakline_cpu_percent))`,
	`sum(peakline_cpu_percent) / count(peakline_cpu_percent)`,
	// Binary operations and matching.
	`peakline_memory_bytes / 1048576`,
	`peakline_cpu_percent > 50`,
	`peakline_cpu_percent > bool 50`,
	`peakline_cpu_percent / on(job_id, counter, task_uuid, task) peakline_pids`,
	`peakline_cpu_percent * on(job_id) group_left() sum by (job_id) (rate(peakline_test_requests_total[2m]))`,
	`peakline_cpu_percent * on(job_id) group_left(instance) max by (job_id, instance) (peakline_test_requests_total)`,
	`sum by (job_id, code) (rate(peakline_test_requests_total[2m])) / ignoring(code) group_left() sum by (job_id) (rate(peakline_test_requests_total[2m]))`,
	`peakline_cpu_percent and on(counter, job_id) (peakline_pids > 4)`,
	`peakline_cpu_percent unless on(counter, job_id) (peakline_pids > 4)`,
	`peakline_pids or peakline_task_start`,
	`vector(1) + scalar(max(peakline_pids))`,
	// Functions.
	`label_replace(peakline_cpu_percent, "task_no", "$1", "task", "task ([0-9]+) .*")`,
	`label_replace(sum by (counter) (peakline_pids), "c", "counter-$1", "counter", "(.*)")`,
	`abs(deriv(peakline_memory_bytes[1m]))`,
	`clamp_max(peakline_cpu_percent, 100)`,
	`round(peakline_cpu_percent, 0.1)`,
	`timestamp(peakline_task_start)`,
	`predict_linear(peakline_memory_bytes[2m], 60)`,
	`delta(peakline_memory_bytes[1m])`,
	`absent(peakline_nothing)`,
	`time() - timestamp(peakline_pids)`,
}

// conformancePairs are MetricsQL spellings on Peakline next to the PromQL
// Prometheus runs for them, in a range query at a 30s step (a window
// left out is the step: the counter is sampled every 10s).
var conformancePairs = [][2]string{
	{`rate(peakline_test_requests_total)`, `rate(peakline_test_requests_total[30s])`},
	{`sum(increase(peakline_test_requests_total{code="500"})) by (job_id)`, `sum by (job_id) (increase(peakline_test_requests_total{code="500"}[30s]))`},
	{`WITH (cpu(j) = peakline_cpu_percent{job_id=j}) max(cpu("cj1")) by (counter)`, `max by (counter) (peakline_cpu_percent{job_id="cj1"})`},
	{`max_over_time(sum(peakline_pids) by (job_id)[1m])`, `max_over_time(sum by (job_id) (peakline_pids)[1m:30s])`},
}

// The same samples, remote-written into a real Prometheus and into
// Peakline, give the same answers to the same queries, instant and range.
func TestConformanceWithPrometheus(t *testing.T) {
	promURL := startPrometheus(t, findTool(t, "prometheus"))
	peak := newPromEnv(t, server.Config{})
	j1 := testJob("cj1", 8, 1200, 11)
	j2 := testJob("cj2", 4, 600, 12)
	for _, req := range []*prompb.WriteRequest{jobWriteRequest(j1), counterWriteRequest(j1), jobWriteRequest(j2), counterWriteRequest(j2)} {
		mustWrite(t, promURL+"/api/v1/write", req)
		mustWrite(t, peak.hs.URL+"/prometheus/api/v1/write", req)
	}
	client, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	ctx := context.Background()

	first := time.UnixMilli(min(j1.Tasks[0].StartMs, j2.Tasks[0].StartMs)).Truncate(10 * time.Second)
	last := time.UnixMilli(max(j1.LastEventMs, j2.LastEventMs)).Truncate(10 * time.Second)
	instants := []time.Time{first.Add(last.Sub(first) / 2).Add(1234 * time.Millisecond), last, last.Add(3 * time.Minute)}
	rng := v1.Range{Start: first, End: last.Add(2 * time.Minute), Step: 10 * time.Second}

	compared, nonEmpty := 0, 0
	check := func(name, peakQ, promQ string) {
		t.Helper()
		for _, at := range instants {
			want := res(prom.Query(ctx, promQ, at)).must(t)
			got, _, _, err := peak.api.Query(ctx, peakQ, at)
			if err != nil {
				t.Fatalf("%s at %s: %v", name, at, err)
			}
			if diff := compareValues(got, want); diff != "" {
				t.Errorf("%s at %s: %s\npeakline:   %s\nprometheus: %s", name, at, diff, clip(got), clip(want))
			}
			compared++
			if !isEmpty(want) {
				nonEmpty++
			}
		}
		want := res(prom.QueryRange(ctx, promQ, rng)).must(t)
		got, _, _, err := peak.api.QueryRange(ctx, peakQ, rng)
		if err != nil {
			t.Fatalf("%s over %v: %v", name, rng, err)
		}
		if diff := compareValues(got, want); diff != "" {
			t.Errorf("%s over the range: %s\npeakline:   %s\nprometheus: %s", name, diff, clip(got), clip(want))
		}
		compared++
		if !isEmpty(want) {
			nonEmpty++
		}
	}
	for _, q := range conformanceQueries {
		check(q, q, q)
	}
	for _, p := range conformancePairs {
		// Only the range query has the step the MetricsQL spelling uses.
		r := rng
		r.Step = 30 * time.Second
		want := res(prom.QueryRange(ctx, p[1], r)).must(t)
		got := res(peak.api.QueryRange(ctx, p[0], r)).must(t)
		if diff := compareValues(got, want); diff != "" || isEmpty(want) {
			t.Errorf("%s vs %s: %s (empty: %v)", p[0], p[1], diff, isEmpty(want))
		}
	}
	// Most answers hold data: the comparison is not of empty results.
	if nonEmpty < compared*9/10 {
		t.Errorf("only %d of %d answers hold data", nonEmpty, compared)
	}
	t.Logf("%d queries (+%d MetricsQL pairs), %d answers compared, %d non-empty", len(conformanceQueries), len(conformancePairs), compared, nonEmpty)
}

// compareValues describes how got differs from want ("" when equal):
// same type, same series (in any order), same timestamps, values within a
// relative 1e-9.
func compareValues(got, want model.Value) string {
	if got.Type() != want.Type() {
		return fmt.Sprintf("type %s, want %s", got.Type(), want.Type())
	}
	switch w := want.(type) {
	case *model.Scalar:
		g := got.(*model.Scalar)
		if g.Timestamp != w.Timestamp || !closeTo(float64(g.Value), float64(w.Value)) {
			return fmt.Sprintf("scalar %v, want %v", g, w)
		}
	case model.Vector:
		g := got.(model.Vector)
		if len(g) != len(w) {
			return fmt.Sprintf("%d samples, want %d", len(g), len(w))
		}
		sortVector(g)
		sortVector(w)
		for i := range w {
			if !g[i].Metric.Equal(w[i].Metric) || g[i].Timestamp != w[i].Timestamp || !closeTo(float64(g[i].Value), float64(w[i].Value)) {
				return fmt.Sprintf("sample %v, want %v", g[i], w[i])
			}
		}
	case model.Matrix:
		g := got.(model.Matrix)
		if len(g) != len(w) {
			return fmt.Sprintf("%d series, want %d", len(g), len(w))
		}
		sort.Slice(g, func(a, b int) bool { return g[a].Metric.String() < g[b].Metric.String() })
		sort.Slice(w, func(a, b int) bool { return w[a].Metric.String() < w[b].Metric.String() })
		for i := range w {
			if !g[i].Metric.Equal(w[i].Metric) || len(g[i].Values) != len(w[i].Values) {
				return fmt.Sprintf("series %s with %d points, want %s with %d", g[i].Metric, len(g[i].Values), w[i].Metric, len(w[i].Values))
			}
			for k := range w[i].Values {
				gp, wp := g[i].Values[k], w[i].Values[k]
				if gp.Timestamp != wp.Timestamp || !closeTo(float64(gp.Value), float64(wp.Value)) {
					return fmt.Sprintf("%s: point %v, want %v", w[i].Metric, gp, wp)
				}
			}
		}
	default:
		if got.String() != want.String() {
			return "differs"
		}
	}
	return ""
}

func sortVector(v model.Vector) {
	sort.Slice(v, func(a, b int) bool { return v[a].Metric.String() < v[b].Metric.String() })
}

func closeTo(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func isEmpty(v model.Value) bool {
	switch v := v.(type) {
	case model.Vector:
		return len(v) == 0
	case model.Matrix:
		return len(v) == 0
	}
	return false
}

func clip(v model.Value) string {
	s := strings.ReplaceAll(v.String(), "\n", "; ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
