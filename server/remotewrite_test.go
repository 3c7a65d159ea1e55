package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/server"
)

// getDoc GETs a Peakline JSON document, decoded generically.
func getDoc(t *testing.T, url string) any {
	t.Helper()
	var doc any
	if code := getJSON(t, url, &doc); code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, code, doc)
	}
	return doc
}

// A job remote-written in the Peakline schema reads back like the same
// job imported: graph, tasks and job summary are the same documents.
func TestRemoteWriteJobGraph(t *testing.T) {
	j := testJob("rw42", 8, 600, 7)
	imported := newPromEnv(t, server.Config{EventsURL: testEventsURL})
	if _, err := imported.store.Append(context.Background(), jobBatch(j)); err != nil {
		t.Fatal(err)
	}
	written := newPromEnv(t, server.Config{EventsURL: testEventsURL})

	// First only the first task: the listing caches that job's summary...
	first := jobWriteRequest(j)
	firstTask := &prompb.WriteRequest{}
	for _, ts := range first.Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "counter" && l.Value == "3" {
				firstTask.Timeseries = append(firstTask.Timeseries, ts)
			}
		}
	}
	mustWrite(t, written.hs.URL+"/api/v1/write", firstTask)
	before := getDoc(t, written.hs.URL+"/api/v1/jobs").(map[string]any)["jobs"].([]any)[0].(map[string]any)
	if before["tasks"].(float64) != 1 {
		t.Fatalf("after the first task: %v", before)
	}
	// ...and the rest of the job, written again in full (a retry of the
	// first task's samples is harmless), refreshes it.
	mustWrite(t, written.hs.URL+"/prometheus/api/v1/write", jobWriteRequest(j))

	for _, path := range []string{
		"/api/v1/jobs",
		"/api/v1/jobs/rw42/graph?points=200",
		"/api/v1/jobs/rw42/graph?points=50&algorithm=minmax",
		"/api/v1/jobs/rw42/tasks",
	} {
		want := getDoc(t, imported.hs.URL+path)
		got := getDoc(t, written.hs.URL+path)
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Fatalf("%s remote-written:\n%.2000s\nimported:\n%.2000s", path, gb, wb)
		}
	}
	graph := getDoc(t, written.hs.URL+"/api/v1/jobs/rw42/graph?points=200").(map[string]any)
	if series := graph["series"].([]any); len(series) != 3 || len(graph["tasks"].([]any)) == 0 {
		t.Fatalf("graph of the remote-written job: %d series, tasks %v", len(series), graph["tasks"])
	}
}

// storeState is what a test can see of the whole store.
func storeState(t *testing.T, env *promEnv, at time.Time) string {
	t.Helper()
	v := res(env.api.Query(context.Background(), `count_over_time({__name__=~".+"}[1d]) keep_metric_names`, at)).must(t)
	return v.String()
}

// Bodies that are not remote write get a 4xx and store nothing.
func TestRemoteWriteRejectsBadBodies(t *testing.T) {
	const maxBody, maxDecoded = 64 << 10, 1 << 20
	env := newPromEnv(t, server.Config{MaxBodyBytes: maxBody, MaxDecodedBytes: maxDecoded})
	url := env.hs.URL + "/prometheus/api/v1/write"
	j := testJob("keep", 3, 100, 8)
	mustWrite(t, url, jobWriteRequest(j))
	at := time.Now()
	intact := storeState(t, env, at)
	if !strings.Contains(intact, "keep") {
		t.Fatalf("baseline not stored: %s", intact)
	}

	valid := encodeWrite(t, counterWriteRequest(testJob("new", 3, 100, 9)))
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 1024)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	// claims n decoded bytes in its snappy header, with little behind it.
	claims := func(n uint64, size int) []byte {
		b := binary.AppendUvarint(nil, n)
		return append(b, bytes.Repeat([]byte{0}, size)...)
	}
	f := func(name string, body []byte, header map[string]string, code int, msg string) {
		t.Helper()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		allocBefore := ms.TotalAlloc
		got, resp := postWrite(t, url, body, header)
		runtime.ReadMemStats(&ms)
		if got != code || !strings.Contains(resp, msg) {
			t.Fatalf("%s: %d %s, want %d with %q", name, got, resp, code, msg)
		}
		if alloc := ms.TotalAlloc - allocBefore; alloc > 32<<20 {
			t.Fatalf("%s: allocated %d bytes answering", name, alloc)
		}
		if s := storeState(t, env, at); s != intact {
			t.Fatalf("%s: the store changed:\n%s\nwas\n%s", name, s, intact)
		}
	}
	f("garbage", garbage, nil, 400, "snappy")
	f("empty", nil, nil, 400, "snappy")
	f("truncated", valid[:len(valid)/2], nil, 400, "snappy")
	f("snappy, not protobuf", snappy.Encode(nil, bytes.Repeat([]byte{0xff}, 200)), nil, 400, "not a Prometheus remote write request")
	f("oversized", bytes.Repeat([]byte{1}, maxBody+1), nil, 413, "")
	f("bomb over the limit", claims(4<<30-1, 1000), nil, 413, "decodes to 4294967295 bytes")
	f("bomb of 4 GiB", claims(4<<30, 1000), nil, 400, "snappy")
	f("bomb under the limit", claims(maxDecoded-1, 1000), nil, 400, "corrupt")
	f("gzip", valid, map[string]string{"Content-Encoding": "gzip"}, 415, "Content-Encoding must be snappy")
	f("json", valid, map[string]string{"Content-Type": "application/json"}, 415, "Content-Type must be application/x-protobuf")
	f("remote write 2.0", valid, map[string]string{"Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"}, 415, "proto=io.prometheus.write.v2.Request")

	// With the default limit (64 MiB) a body claiming 48 MiB is refused
	// as corrupt before anything that size is allocated.
	big := newPromEnv(t, server.Config{})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocBefore := ms.TotalAlloc
	if code, resp := postWrite(t, big.hs.URL+"/api/v1/write", claims(48<<20, 1000), nil); code != 400 || !strings.Contains(resp, "corrupt") {
		t.Fatalf("48 MiB claim: %d %s", code, resp)
	}
	runtime.ReadMemStats(&ms)
	if alloc := ms.TotalAlloc - allocBefore; alloc > 16<<20 {
		t.Fatalf("a 1 KB body claiming 48 MiB allocated %d bytes", alloc)
	}

	// Without a Content-Type a body is refused: a browser's cross-site fetch can send one so.
	if code, resp := postWrite(t, url, valid, map[string]string{"Content-Type": "", "Content-Encoding": "", "X-Prometheus-Remote-Write-Version": ""}); code != 415 {
		t.Fatalf("valid body without headers: %d %s", code, resp)
	}
}

// A batch goes through the store's one write path: samples already
// stored are skipped (a retry is harmless; another value at a stored
// time keeps the stored one and is counted), and a batch with any sample
// outside the admission window, a non-finite value in a Peakline series
// or bad labels is refused whole with a 400 naming the series, sample
// and value, storing nothing of it.
func TestRemoteWritePartialBatch(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	reg := prometheus.NewRegistry()
	store := newPromEnvWithRegistry(t, server.Config{Prometheus: server.PromConfig{Now: func() time.Time { return now }, Registerer: reg}}, reg)
	url := store.hs.URL + "/api/v1/write"
	t0 := now.Add(-time.Hour).UnixMilli()
	series := func(name string, samples ...prompb.Sample) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "job_id", Value: "p"}}, Samples: samples}
	}
	s := func(dtSec int64, v float64) prompb.Sample { return prompb.Sample{Timestamp: t0 + dtSec*1000, Value: v} }
	at := func(ms int64, v float64) prompb.Sample { return prompb.Sample{Timestamp: ms, Value: v} }
	mustWrite(t, url, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", s(0, 1), s(10, 2), s(20, 3))}})

	// Sent again as is: stored once, and no refusal (a retry is harmless).
	mustWrite(t, url, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", s(0, 1), s(10, 2), s(20, 3))}})

	mixed := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("x",
			s(20, 99), // another value at the newest stored time
			s(30, 4),  // new
		),
		series("y", s(0, 7), s(10, 8)),
	}}
	if code, resp := postWrite(t, url, encodeWrite(t, mixed), nil); code != 204 {
		t.Fatalf("mixed batch: %d %s", code, resp)
	}
	counts := func() map[string]float64 {
		v := res(store.api.Query(context.Background(), `count_over_time({job_id="p"}[2h]) keep_metric_names`, now)).must(t)
		out := map[string]float64{}
		for _, smp := range v.(model.Vector) {
			out[string(smp.Metric["__name__"])] = float64(smp.Value)
		}
		return out
	}
	want := map[string]float64{"x": 4, "y": 2}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	v := res(store.api.Query(context.Background(), `x`, time.UnixMilli(t0+20_000))).must(t)
	if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != 3 {
		t.Fatalf("x at t0+20s = %v, want the first value 3 kept", v)
	}

	badPeakline := prompb.TimeSeries{Labels: []prompb.Label{
		{Name: "__name__", Value: "peakline_cpu_percent"}, {Name: "job_id", Value: "p"}, {Name: "counter", Value: "three"},
	}, Samples: []prompb.Sample{s(5, 50)}}
	cpu := func(samples ...prompb.Sample) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "peakline_cpu_percent"}, {Name: "counter", Value: "3"}, {Name: "job_id", Value: "p"},
			{Name: "task", Value: "t"}, {Name: "task_uuid", Value: "u"},
		}, Samples: samples}
	}
	noName := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job_id", Value: "p"}}, Samples: []prompb.Sample{s(5, 1)}}
	future := now.Add(time.Hour).UnixMilli()
	refused := func(name string, msg string, ts ...prompb.TimeSeries) {
		t.Helper()
		code, resp := postWrite(t, url, encodeWrite(t, &prompb.WriteRequest{Timeseries: ts}), nil)
		if code != 400 || !strings.Contains(resp, msg) {
			t.Fatalf("%s: %d %s, want 400 with %q", name, code, resp, msg)
		}
		if got := counts(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: stored %v, want %v", name, got, want)
		}
	}
	refused("too far ahead", fmt.Sprintf("series[1].t[1]: %d (%s) is more than --max-future-skew 10m0s ahead", future, time.UnixMilli(future).UTC().Format("2006-01-02T15:04:05.000Z")),
		series("y", s(40, 9)), series("x", s(40, 5), at(future, 5)))
	refused("1900", "series[0].t[0]: -2208988800000 is before 2000-01-01T00:00:00Z; send unix milliseconds",
		series("x", at(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 6), s(40, 5)))
	refused("microseconds", fmt.Sprintf("series[0].t[0]: %d looks like microseconds; send unix milliseconds", (t0+40_000)*1000),
		series("x", at((t0+40_000)*1000, 6)))
	refused("bad Peakline labels", `series[1].labels: {__name__=\"peakline_cpu_percent\", counter=\"three\", job_id=\"p\"}: counter must be a decimal number`, /* JSON-escaped */
		series("y", s(40, 9)), badPeakline)
	refused("no name", "series[0].labels: has no __name__ label", noName, series("y", s(40, 9)))
	refused("+Inf in a Peakline series", "series[0].v[1]: peakline_cpu_percent must be a finite number, got +Inf",
		cpu(s(40, 5), s(41, math.Inf(1))))
	refused("all conflicting", "stored none of the 1 samples: 1 duplicate_timestamp", series("x", s(30, 40)))

	// A staleness marker of a Peakline series is dropped and counted;
	// other metrics keep Prometheus semantics (NaN and markers stored).
	mustWrite(t, url, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		cpu(s(40, 5), s(41, math.Float64frombits(value.StaleNaN))),
		series("y", s(40, math.NaN())),
	}})
	want = map[string]float64{"x": 4, "y": 3, "peakline_cpu_percent": 1}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the staleness marker: stored %v, want %v", got, want)
	}
	if code := getJSON(t, store.hs.URL+"/api/v1/jobs", new(any)); code != 200 {
		t.Fatalf("GET /api/v1/jobs: %d", code)
	}

	metrics := getText(t, store.hs.URL+"/metrics")
	for _, want := range []string{
		`peakline_remote_write_rejected_samples_total{reason="duplicate_timestamp"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="too_far_in_future"} 3`,
		`peakline_remote_write_rejected_samples_total{reason="too_old"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="not_milliseconds"} 1`,
		`peakline_remote_write_rejected_samples_total{reason="invalid_labels"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="invalid_peakline_labels"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="non_finite"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="stale_marker"} 1`,
		`peakline_remote_write_samples_total 8`,
		`prometheus_engine_queries_concurrent_max 8`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
}

// A job's info sent by remote write as peakline_job_info series (a
// collector writing straight to /api/v1/write) gives it its template like
// an ingest batch: the jobs list shows and filters it, the newest status
// wins, and the template's history holds the run.
func TestRemoteWriteJobInfo(t *testing.T) {
	env := newPromEnv(t, server.Config{EventsURL: testEventsURL})
	req := jobWriteRequest(testJob("rw7", 4, 600, 3))
	firstMs := req.Timeseries[0].Samples[0].Timestamp
	info := func(status string, atMs int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "peakline_job_info"}, {Name: "job_id", Value: "rw7"}, {Name: "status", Value: status},
			{Name: "template_id", Value: "7"}, {Name: "template_name", Value: "deploy-web"},
		}, Samples: []prompb.Sample{{Timestamp: atMs, Value: 1}}}
	}
	req.Timeseries = append(req.Timeseries, info("running", firstMs))
	mustWrite(t, env.hs.URL+"/api/v1/write", req)
	mustWrite(t, env.hs.URL+"/api/v1/write", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{info("successful", firstMs+1000)}})

	jobs := getDoc(t, env.hs.URL+"/api/v1/jobs?template=7").(map[string]any)["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("jobs of template 7: %v, want rw7", jobs)
	}
	j := jobs[0].(map[string]any)
	if got := fmt.Sprint(j["job_id"], " ", j["template_id"], " ", j["template_name"], " ", j["status"]); got != "rw7 7 deploy-web successful" {
		t.Errorf("job = %q, want rw7 of template 7 deploy-web, successful (the newest status)", got)
	}
	h := getDoc(t, env.hs.URL+"/api/v1/templates/7/history").(map[string]any)
	runs := h["runs"].([]any)
	if len(runs) != 1 || runs[0].(map[string]any)["job_id"] != "rw7" || runs[0].(map[string]any)["status"] != "successful" || h["template_name"] != "deploy-web" {
		t.Errorf("history of template 7: %v, want the one run rw7, successful", h)
	}

	// How the job was measured comes the same way, to the jobs list and
	// the graph payload; a value other than cgroup or process-tree is a
	// 400 naming measured.
	measured := func(val string) *prompb.WriteRequest {
		return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{
			{Name: "__name__", Value: "peakline_job_info"}, {Name: "job_id", Value: "rw7"}, {Name: "measured", Value: val},
		}, Samples: []prompb.Sample{{Timestamp: firstMs + 2000, Value: 1}}}}}
	}
	if code, resp := postWrite(t, env.hs.URL+"/api/v1/write", encodeWrite(t, measured("process tree")), nil); code != 400 || !strings.Contains(resp, `measured must be cgroup or process-tree or empty, got \"process tree\"`) {
		t.Errorf("remote write of measured=\"process tree\": %d %s, want 400 naming measured", code, resp)
	}
	mustWrite(t, env.hs.URL+"/api/v1/write", measured("process-tree"))
	j = getDoc(t, env.hs.URL+"/api/v1/jobs?template=7").(map[string]any)["jobs"].([]any)[0].(map[string]any)
	if got := fmt.Sprint(j["job_id"], " ", j["status"], " ", j["measured"]); got != "rw7 successful process-tree" {
		t.Errorf("job after measured = %q, want rw7 successful process-tree", got)
	}
	if g := getDoc(t, env.hs.URL+"/api/v1/jobs/rw7/graph?points=10").(map[string]any); g["measured"] != "process-tree" {
		t.Errorf("graph of rw7: measured = %v, want process-tree", g["measured"])
	}
}
