package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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

	// Without the optional headers a valid body is taken, as Prometheus does.
	if code, resp := postWrite(t, url, valid, map[string]string{"Content-Type": "", "Content-Encoding": "", "X-Prometheus-Remote-Write-Version": ""}); code != 204 {
		t.Fatalf("valid body without headers: %d %s", code, resp)
	}
}

// Refused samples are counted by reason and never keep the rest of a
// batch out; a batch of which nothing could be stored is a 400 listing
// the counts.
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
	mustWrite(t, url, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", s(0, 1), s(10, 2), s(20, 3))}})

	// Sent again as is: stored once, and no refusal (a retry is harmless).
	mustWrite(t, url, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", s(0, 1), s(10, 2), s(20, 3))}})

	badPeakline := prompb.TimeSeries{Labels: []prompb.Label{
		{Name: "__name__", Value: "peakline_cpu_percent"}, {Name: "job_id", Value: "p"}, {Name: "counter", Value: "three"},
	}, Samples: []prompb.Sample{s(5, 50)}}
	noName := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job_id", Value: "p"}}, Samples: []prompb.Sample{s(5, 1)}}
	mixed := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("x",
			s(20, 99), // another value at the newest stored time
			s(30, 4),  // new
			prompb.Sample{Timestamp: now.Add(time.Hour).UnixMilli(), Value: 5},                          // too far ahead
			prompb.Sample{Timestamp: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), Value: 6}, // before the 100-year window
		),
		series("y", s(0, 7), s(10, 8)),
		badPeakline,
		noName,
	}}
	if code, resp := postWrite(t, url, encodeWrite(t, mixed), nil); code != 204 {
		t.Fatalf("mixed batch: %d %s", code, resp)
	}
	v := res(store.api.Query(context.Background(), `count_over_time({job_id="p"}[2h]) keep_metric_names`, now)).must(t)
	counts := map[string]float64{}
	for _, smp := range v.(model.Vector) {
		counts[string(smp.Metric["__name__"])] = float64(smp.Value)
	}
	if counts["x"] != 4 || counts["y"] != 2 || len(counts) != 2 {
		t.Fatalf("stored %v, want x: 4 samples, y: 2", counts)
	}
	v = res(store.api.Query(context.Background(), `x`, time.UnixMilli(t0+20_000))).must(t)
	if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != 3 {
		t.Fatalf("x at t0+20s = %v, want the first value 3 kept", v)
	}

	allBad := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("x", s(30, 40), prompb.Sample{Timestamp: now.Add(time.Hour).UnixMilli(), Value: 5}),
		badPeakline,
	}}
	code, resp := postWrite(t, url, encodeWrite(t, allBad), nil)
	if code != 400 || !strings.Contains(resp, "stored none of the 3 samples: 1 duplicate_timestamp, 1 invalid_peakline_labels, 1 too_far_in_future") {
		t.Fatalf("all refused: %d %s", code, resp)
	}

	metrics := getText(t, store.hs.URL+"/metrics")
	for _, want := range []string{
		`peakline_remote_write_rejected_samples_total{reason="duplicate_timestamp"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="too_far_in_future"} 2`,
		`peakline_remote_write_rejected_samples_total{reason="too_old"} 1`,
		`peakline_remote_write_rejected_samples_total{reason="invalid_labels"} 1`,
		`peakline_remote_write_rejected_samples_total{reason="invalid_peakline_labels"} 2`,
		`peakline_remote_write_samples_total 9`,
		`prometheus_engine_queries_concurrent_max 8`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
}
