package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
)

// loadTestJob stores a job through the store (as import does) and its
// request counter through remote write.
func loadTestJob(t *testing.T, env *promEnv, j *workload.Job) {
	t.Helper()
	if _, err := env.store.Append(context.Background(), jobBatch(j)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, env.hs.URL+"/prometheus/api/v1/write", counterWriteRequest(j))
}

// resourceStats are the count and max of a job's samples of one resource.
func resourceStats(j *workload.Job, resource string) (n int, maxV float64, series int) {
	maxV = math.Inf(-1)
	for _, s := range j.Series {
		if s.Resource != resource {
			continue
		}
		series++
		n += len(s.Vs)
		for _, v := range s.Vs {
			maxV = max(maxV, v)
		}
	}
	return n, maxV, series
}

// The Prometheus Go client, as Grafana's data source does, finds the job
// data through every read endpoint Grafana calls.
func TestPrometheusAPIWithClient(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	j := testJob("j1", 6, 400, 1)
	loadTestJob(t, env, j)
	ctx := context.Background()
	end := time.UnixMilli(j.LastEventMs).Add(time.Second)

	// Save & test.
	v, warnings, _, err := env.api.Query(ctx, "1+1", time.Now())
	if err != nil || len(warnings) > 0 {
		t.Fatalf("1+1: %v %v", err, warnings)
	}
	if s, ok := v.(*model.Scalar); !ok || s.Value != 2 {
		t.Fatalf("1+1 = %v (%T), want scalar 2", v, v)
	}

	nCPU, maxCPU, cpuSeries := resourceStats(j, "cpu")
	v = res(env.api.Query(ctx, `max(max_over_time(peakline_cpu_percent{job_id="j1"}[1h]))`, end)).must(t)
	if vec := v.(model.Vector); len(vec) != 1 || float64(vec[0].Value) != maxCPU {
		t.Fatalf("max cpu = %v, want %v", v, maxCPU)
	}
	v = res(env.api.Query(ctx, `count(count_over_time(peakline_cpu_percent{job_id="j1"}[1h]))`, end)).must(t)
	if vec := v.(model.Vector); len(vec) != 1 || int(vec[0].Value) != cpuSeries {
		t.Fatalf("cpu series = %v, want %d", v, cpuSeries)
	}

	// A range query: its last point counts every cpu sample of the hour.
	start := time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Minute)
	end = start.Add(end.Sub(start).Truncate(30*time.Second) + 30*time.Second)
	v = res(env.api.QueryRange(ctx, `sum(count_over_time(peakline_cpu_percent{job_id="j1"}[1h]))`, v1.Range{Start: start, End: end, Step: 30 * time.Second})).must(t)
	m := v.(model.Matrix)
	if len(m) != 1 || len(m[0].Values) < 2 {
		t.Fatalf("range query: %v", m)
	}
	if last := m[0].Values[len(m[0].Values)-1]; int(last.Value) != nCPU || !last.Timestamp.Time().Before(end.Add(time.Nanosecond)) {
		t.Fatalf("last point %v, want %d samples", last, nCPU)
	}
	for i := 1; i < len(m[0].Values); i++ {
		if d := m[0].Values[i].Timestamp.Sub(m[0].Values[i-1].Timestamp); d != 30*time.Second {
			t.Fatalf("points %d apart, want the 30s step", d)
		}
	}

	names, _, _, err := env.api.LabelNames(ctx, nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"__name__", "job_id", "counter", "task_uuid", "task", "code", "instance"} {
		if !slices.Contains(names, model.LabelName(want)) {
			t.Fatalf("label names %v lack %s", names, want)
		}
	}
	vals, _, _, err := env.api.LabelValues(ctx, "__name__", nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"peakline_cpu_percent", "peakline_memory_bytes", "peakline_pids", "peakline_task_start", "peakline_job_last_event", "peakline_test_requests_total"} {
		if !slices.Contains(stringsOf(vals), want) {
			t.Fatalf("metric names %v lack %s", vals, want)
		}
	}
	vals, _, _, err = env.api.LabelValues(ctx, "counter", []string{`peakline_task_start{job_id="j1"}`}, start, end)
	if err != nil || len(vals) != len(j.Tasks) {
		t.Fatalf("counters of j1: %v %v, want %d", vals, err, len(j.Tasks))
	}

	sets, _, _, err := env.api.Series(ctx, []string{`peakline_task_start{job_id="j1"}`, `peakline_job_last_event`}, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(j.Tasks)+1 {
		t.Fatalf("series: %d, want %d task starts and the last event", len(sets), len(j.Tasks)+1)
	}
	for _, s := range sets {
		if s["job_id"] != "j1" {
			t.Fatalf("series %v is not of j1", s)
		}
	}

	meta, err := env.api.Metadata(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if md := meta["peakline_memory_bytes"]; len(md) != 1 || md[0].Type != v1.MetricTypeGauge || md[0].Unit != "bytes" {
		t.Fatalf("metadata of peakline_memory_bytes: %+v", md)
	}
	if md := meta["peakline_test_requests_total"]; len(md) != 1 || md[0].Type != v1.MetricTypeCounter {
		t.Fatalf("remote-written metadata: %+v", md)
	}

	bi, err := env.api.Buildinfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bi.Version, "3.") || bi.GoVersion == "" {
		t.Fatalf("buildinfo %+v: want a Prometheus 3 version", bi)
	}
	ex, err := env.api.QueryExemplars(ctx, `peakline_cpu_percent`, start, end)
	if err != nil || len(ex) != 0 {
		t.Fatalf("exemplars: %v %v", ex, err)
	}
	rules, err := env.api.Rules(ctx, nil)
	if err != nil || len(rules.Groups) != 0 {
		t.Fatalf("rules: %v %v", rules, err)
	}
}

// qres is a query answer of the Go client, for one-line checks.
type qres struct {
	v   model.Value
	err error
}

func res(v model.Value, _ v1.Warnings, _ v1.Infos, err error) qres { return qres{v, err} }

func (r qres) must(t *testing.T) model.Value {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func stringsOf(vals model.LabelValues) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

// promDoc is the Prometheus JSON envelope, decoded loosely.
type promDoc struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
	Warnings  []string        `json:"warnings"`
}

func promGet(t *testing.T, rawURL string) (int, promDoc) {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return decodeProm(t, resp)
}

func promPost(t *testing.T, rawURL string, form url.Values) (int, promDoc) {
	t.Helper()
	resp, err := http.PostForm(rawURL, form)
	if err != nil {
		t.Fatal(err)
	}
	return decodeProm(t, resp)
}

func decodeProm(t *testing.T, resp *http.Response) (int, promDoc) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var d promDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", resp.Request.URL, err, b)
	}
	return resp.StatusCode, d
}

// Errors come in the Prometheus envelope with Prometheus' error types and
// status codes.
func TestPrometheusAPIErrors(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	j := testJob("j1", 4, 200, 2)
	loadTestJob(t, env, j)
	slow := newPromEnv(t, server.Config{Prometheus: server.PromConfig{QueryTimeout: time.Nanosecond}})
	small := newPromEnv(t, server.Config{Prometheus: server.PromConfig{QueryMaxSamples: 10}})
	loadTestJob(t, small, j)
	endS := fmt.Sprint(j.LastEventMs / 1000)

	f := func(env *promEnv, path string, params url.Values, code int, errType, msg string) {
		t.Helper()
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			var (
				got int
				doc promDoc
			)
			if method == http.MethodGet {
				got, doc = promGet(t, env.hs.URL+"/prometheus/api/v1"+path+"?"+params.Encode())
			} else {
				got, doc = promPost(t, env.hs.URL+"/prometheus/api/v1"+path, params)
			}
			if got != code || doc.Status != "error" || doc.ErrorType != errType || !strings.Contains(doc.Error, msg) {
				t.Fatalf("%s %s?%s: %d %+v, want %d %s containing %q", method, path, params.Encode(), got, doc, code, errType, msg)
			}
		}
	}
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	f(env, "/query", q("query", "rate("), 400, "bad_data", "parse")
	f(env, "/query", q("query", ""), 400, "bad_data", "")
	f(env, "/query", q("query", "buckets_limit(3, peakline_pids)"), 400, "bad_data", `"buckets_limit"`)
	f(env, "/query", q("query", "no_such_function(peakline_pids)"), 400, "bad_data", `"no_such_function"`)
	f(env, "/query", q("query", "sum(rate(peakline_pids[5m]))", "time", "yesterday"), 400, "bad_data", `invalid parameter "time"`)
	f(env, "/query", q("query", "1", "timeout", "-1s"), 400, "bad_data", `invalid parameter "timeout"`)
	f(env, "/query", q("query", "1", "limit", "-1"), 400, "bad_data", `invalid parameter "limit"`)
	// Many-to-many matching fails in evaluation.
	f(env, "/query", q("query", `peakline_cpu_percent{job_id="j1"} + on(job_id) peakline_pids{job_id="j1"}`, "time", endS), 422, "execution", "many-to-many")
	f(env, "/query_range", q("query", "1", "end", "100", "step", "1"), 400, "bad_data", `invalid parameter "start"`)
	f(env, "/query_range", q("query", "1", "start", "100", "end", "10", "step", "1"), 400, "bad_data", "end timestamp must not be before start time")
	f(env, "/query_range", q("query", "1", "start", "0", "end", "10", "step", "0"), 400, "bad_data", "zero or negative query resolution step")
	f(env, "/query_range", q("query", "1", "start", "0", "end", "11001", "step", "1"), 400, "bad_data", "11,000 points")
	f(env, "/query_range", q("query", "1", "start", "0", "end", "10", "step", "fast"), 400, "bad_data", `invalid parameter "step"`)
	f(env, "/query_range", q("query", "peakline_pids[5m]", "start", "0", "end", "10", "step", "1s"), 400, "bad_data", "range vector")
	f(env, "/series", q(), 400, "bad_data", "no match[] parameter provided")
	f(env, "/series", q("match[]", `{job_id=~".*"}`), 400, "bad_data", "non-empty matcher")
	f(env, "/series", q("match[]", `sum(x)`), 400, "bad_data", "series selector")
	f(env, "/labels", q("start", "soon"), 400, "bad_data", `invalid parameter "start"`)
	f(env, "/label/%ff/values", q(), 400, "bad_data", "invalid label name")
	f(slow, "/query", q("query", "vector(1)"), 503, "timeout", "")
	f(small, "/query_range", q("query", `peakline_cpu_percent{job_id="j1"}`, "start", fmt.Sprint(j.Tasks[0].StartMs/1000), "end", endS, "step", "1"), 422, "execution", "too many samples")

	// The real client sees the error type.
	_, _, _, err := env.api.Query(context.Background(), "rate(", time.Now())
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) || apiErr.Type != v1.ErrBadData {
		t.Fatalf("client error %#v, want bad_data", err)
	}
	// The Peakline API keeps its own envelope.
	code, body := post(t, env.hs.URL+"/api/v1/ingest", []byte("{"), nil)
	if code != 400 || !strings.Contains(body, `"error"`) || strings.Contains(body, "errorType") {
		t.Fatalf("ingest error: %d %s", code, body)
	}
}

// Parameters arrive as Grafana sends them: GET or POST form, unix seconds
// or RFC 3339, steps as durations or seconds, repeated match[].
func TestPrometheusAPIParameters(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	j := testJob("j1", 4, 200, 3)
	loadTestJob(t, env, j)
	start := time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Second)
	end := time.UnixMilli(j.LastEventMs).Truncate(time.Second)
	base := env.hs.URL + "/prometheus/api/v1"
	qs := `sum(peakline_pids{job_id="j1"})`

	var want json.RawMessage
	for _, p := range []url.Values{
		{"query": {qs}, "start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(end.Unix())}, "step": {"15"}},
		{"query": {qs}, "start": {start.Format(time.RFC3339)}, "end": {end.UTC().Format(time.RFC3339Nano)}, "step": {"15s"}},
		{"query": {qs}, "start": {fmt.Sprintf("%d.000", start.Unix())}, "end": {fmt.Sprint(end.Unix())}, "step": {"15000ms"}},
	} {
		for _, post := range []bool{false, true} {
			var (
				code int
				doc  promDoc
			)
			if post {
				code, doc = promPost(t, base+"/query_range", p)
			} else {
				code, doc = promGet(t, base+"/query_range?"+p.Encode())
			}
			if code != 200 || doc.Status != "success" {
				t.Fatalf("query_range %v: %d %+v", p, code, doc)
			}
			if want == nil {
				want = doc.Data
				if !strings.Contains(string(want), `"resultType":"matrix"`) || !strings.Contains(string(want), `"values":[[`) {
					t.Fatalf("matrix answer: %s", want)
				}
			} else if string(doc.Data) != string(want) {
				t.Fatalf("query_range %v (post %v) answered\n%s\nnot\n%s", p, post, doc.Data, want)
			}
		}
	}

	// Values are [unix_seconds, "string"]; a vector has "value".
	code, doc := promGet(t, base+"/query?"+url.Values{"query": {`peakline_task_start{job_id="j1",counter="3"}`}, "time": {fmt.Sprintf("%.3f", float64(j.Tasks[0].StartMs+1000)/1000)}}.Encode())
	wantVec := fmt.Sprintf(`"value":[%d.%03d,"3"]`, (j.Tasks[0].StartMs+1000)/1000, (j.Tasks[0].StartMs+1000)%1000)
	if code != 200 || !strings.Contains(string(doc.Data), `"resultType":"vector"`) || !strings.Contains(string(doc.Data), wantVec) {
		t.Fatalf("vector answer: %d %s, want %s", code, doc.Data, wantVec)
	}
	// limit cuts series with a warning.
	code, doc = promGet(t, base+"/query?"+url.Values{"query": {`count_over_time(peakline_pids[1h])`}, "time": {fmt.Sprint(end.Unix())}, "limit": {"2"}}.Encode())
	var vec struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(doc.Data, &vec); err != nil || code != 200 || len(vec.Result) != 2 || len(doc.Warnings) != 1 {
		t.Fatalf("limit 2: %d %s %v", code, doc.Data, doc.Warnings)
	}
	// Repeated match[] (GET and POST), and the __name__ values.
	for _, post := range []bool{false, true} {
		p := url.Values{"match[]": {`peakline_pids{job_id="j1"}`, `peakline_cpu_percent{job_id="j1"}`}}
		if post {
			code, doc = promPost(t, base+"/label/__name__/values", p)
		} else {
			code, doc = promGet(t, base+"/label/__name__/values?"+p.Encode())
		}
		if code != 200 || string(doc.Data) != `["peakline_cpu_percent","peakline_pids"]` {
			t.Fatalf("__name__ values: %d %s", code, doc.Data)
		}
	}
	// A Grafana-style label_values lookup of job ids in a window.
	code, doc = promGet(t, base+"/label/job_id/values?"+url.Values{"start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(end.Unix())}}.Encode())
	if code != 200 || string(doc.Data) != `["j1"]` {
		t.Fatalf("job ids: %d %s", code, doc.Data)
	}
	// A UTF-8 label name with a "%" reaches the engine decoded once.
	code, doc = promGet(t, base+"/label/"+url.PathEscape("50%off")+"/values")
	if code != 200 || string(doc.Data) != `[]` {
		t.Fatalf("values of label \"50%%off\": %d %s", code, doc.Data)
	}
	// Buildinfo carries no "features": Grafana reads that as Prometheus.
	code, doc = promGet(t, base+"/status/buildinfo")
	if code != 200 || strings.Contains(string(doc.Data), "features") || !strings.Contains(string(doc.Data), `"version":"3.`) {
		t.Fatalf("buildinfo: %d %s", code, doc.Data)
	}
	for path, want := range map[string]string{"/query_exemplars?query=peakline_pids": `[]`, "/rules": `{"groups":[]}`, "/alerts": `{"alerts":[]}`} {
		if code, doc := promGet(t, base+path); code != 200 || string(doc.Data) != want {
			t.Fatalf("%s: %d %s, want %s", path, code, doc.Data, want)
		}
	}
}

// MetricsQL over HTTP: WITH templates, rollups without a window and
// keep_metric_names give what their PromQL spelling gives.
func TestMetricsQLOverHTTP(t *testing.T) {
	env := newPromEnv(t, server.Config{})
	j := testJob("j1", 5, 300, 4)
	loadTestJob(t, env, j)
	ctx := context.Background()
	end := time.UnixMilli(j.LastEventMs).Truncate(time.Second)
	r := v1.Range{Start: time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Second), End: end, Step: 20 * time.Second}

	same := func(mql, promql string, instant bool) model.Value {
		t.Helper()
		var got, want model.Value
		var err error
		if instant {
			got, _, _, err = env.api.Query(ctx, mql, end)
			if err == nil {
				want, _, _, err = env.api.Query(ctx, promql, end)
			}
		} else {
			got, _, _, err = env.api.QueryRange(ctx, mql, r)
			if err == nil {
				want, _, _, err = env.api.QueryRange(ctx, promql, r)
			}
		}
		if err != nil {
			t.Fatalf("%s / %s: %v", mql, promql, err)
		}
		if got.String() != want.String() || got.String() == "" {
			t.Fatalf("%s gave\n%s\n%s gave\n%s", mql, got, promql, want)
		}
		return got
	}
	same(`WITH (cpu(j) = peakline_cpu_percent{job_id=j}) max(cpu("j1")) by (counter)`,
		`max by (counter) (peakline_cpu_percent{job_id="j1"})`, false)
	same(`WITH (f = {job_id="j1", code="500"}) increase(peakline_test_requests_total{f}[5m])`,
		`increase(peakline_test_requests_total{job_id="j1",code="500"}[5m])`, true)
	same(`rate(peakline_test_requests_total{job_id="j1"})`, `rate(peakline_test_requests_total{job_id="j1"}[5m])`, true)
	same(`sum(rate(peakline_test_requests_total{job_id="j1"}))`, `sum(rate(peakline_test_requests_total{job_id="j1"}[20s]))`, false)

	// keep_metric_names keeps each series' own name.
	v := same(`rate({__name__=~"peakline_(cpu_percent|pids)", job_id="j1", counter="3"}[1m]) keep_metric_names`,
		`label_replace(rate(peakline_cpu_percent{job_id="j1",counter="3"}[1m]), "__name__", "peakline_cpu_percent", "", "") or on(__name__) `+
			`label_replace(rate(peakline_pids{job_id="j1",counter="3"}[1m]), "__name__", "peakline_pids", "", "")`, false)
	m := v.(model.Matrix)
	names := map[model.LabelValue]bool{}
	for _, s := range m {
		names[s.Metric[model.MetricNameLabel]] = true
	}
	if len(names) != 2 || !names["peakline_cpu_percent"] || !names["peakline_pids"] {
		t.Fatalf("keep_metric_names kept %v", names)
	}
	// Without it the engine drops the names and the series collide.
	if _, _, _, err := env.api.QueryRange(ctx, `rate({__name__=~"peakline_(cpu_percent|pids)", job_id="j1", counter="3"}[1m])`, r); err == nil ||
		!strings.Contains(err.Error(), "same labelset") {
		t.Fatalf("without keep_metric_names: %v, want a duplicate labelset error", err)
	}

	// A MetricsQL function left out is bad_data naming it.
	_, _, _, err := env.api.Query(ctx, `buckets_limit(3, peakline_pids{job_id="j1"})`, end)
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) || apiErr.Type != v1.ErrBadData || !strings.Contains(apiErr.Msg, "buckets_limit") {
		t.Fatalf("buckets_limit: %#v", err)
	}
}
