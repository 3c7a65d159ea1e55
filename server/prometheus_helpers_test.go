package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	promapi "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// promEnv is a Peakline server over a real on-disk store, on loopback.
type promEnv struct {
	hs    *httptest.Server
	store *tsdb.Store
	api   v1.API // the Prometheus Go client, pointed at /prometheus
}

func newPromEnv(t *testing.T, cfg server.Config) *promEnv {
	t.Helper()
	return newPromEnvWithRegistry(t, cfg, nil)
}

// newPromEnvWithRegistry serves the server's own metrics from reg.
func newPromEnvWithRegistry(t *testing.T, cfg server.Config, reg *prometheus.Registry) *promEnv {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = store.Close()
	})
	client, err := promapi.NewClient(promapi.Config{Address: hs.URL + "/prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	return &promEnv{hs: hs, store: store, api: v1.NewAPI(client)}
}

// testJob is a Peakline-shaped job ending a minute before now: remote
// write refuses samples more than 10 minutes ahead.
func testJob(id string, tasks, samples int, seed int64) *workload.Job {
	intervalMs := int64(500)
	span := int64(samples) * (intervalMs + 4)
	start := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli() - span - int64(tasks)*60
	return workload.AnsibleJob(id, workload.JobSpec{Tasks: tasks, SamplesPerResource: samples, StartMs: start, IntervalMs: intervalMs}, seed)
}

// jobBatch is a job as a store batch (what JSON ingest and import store).
func jobBatch(j *workload.Job) *tsdb.Batch {
	b := &tsdb.Batch{JobID: j.ID, LastEvent: &tsdb.Event{Counter: j.LastCounter, TimeMs: j.LastEventMs}}
	for _, tk := range j.Tasks {
		b.Tasks = append(b.Tasks, tsdb.Task{Counter: tk.Counter, UUID: tk.UUID, Name: tk.Name, StartMs: tk.StartMs})
	}
	for _, s := range j.Series {
		tk := j.Tasks[s.Task]
		b.Series = append(b.Series, tsdb.SeriesData{Resource: s.Resource, Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name, Ts: s.Ts, Vs: s.Vs})
	}
	return b
}

// jobWriteRequest is a job as remote-write series of the Peakline schema,
// built from the documented label names, not from the server's code.
func jobWriteRequest(j *workload.Job) *prompb.WriteRequest {
	metric := map[string]string{"cpu": "peakline_cpu_percent", "memory": "peakline_memory_bytes", "pids": "peakline_pids"}
	taskLabels := func(name string, tk workload.Task) []prompb.Label {
		return []prompb.Label{
			{Name: "__name__", Value: name}, {Name: "job_id", Value: j.ID},
			{Name: "counter", Value: strconv.FormatInt(tk.Counter, 10)},
			{Name: "task_uuid", Value: tk.UUID}, {Name: "task", Value: tk.Name},
		}
	}
	req := &prompb.WriteRequest{}
	for _, s := range j.Series {
		ts := prompb.TimeSeries{Labels: taskLabels(metric[s.Resource], j.Tasks[s.Task])}
		for i := range s.Ts {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: s.Ts[i], Value: s.Vs[i]})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	for _, tk := range j.Tasks {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels:  taskLabels("peakline_task_start", tk),
			Samples: []prompb.Sample{{Timestamp: tk.StartMs, Value: float64(tk.Counter)}},
		})
	}
	req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
		Labels:  []prompb.Label{{Name: "__name__", Value: "peakline_job_last_event"}, {Name: "job_id", Value: j.ID}},
		Samples: []prompb.Sample{{Timestamp: j.LastEventMs, Value: float64(j.LastCounter)}},
	})
	return req
}

// counterWriteRequest is a request counter of a job, one series per code,
// sampled every 10s over the job's span, with a counter reset halfway.
func counterWriteRequest(j *workload.Job) *prompb.WriteRequest {
	from := j.Tasks[0].StartMs
	req := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{{
		Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "peakline_test_requests_total", Help: "Requests made by the job.",
	}}}
	for ci, code := range []string{"200", "404", "500"} {
		ts := prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "peakline_test_requests_total"}, {Name: "job_id", Value: j.ID},
			{Name: "instance", Value: "runner-1"}, {Name: "code", Value: code},
		}}
		v := 0.0
		n := int((j.LastEventMs - from) / 10_000)
		for k := 0; k <= n; k++ {
			if k == n/2 {
				v = 0 // the process restarted
			}
			v += float64((k*7+ci*3)%11) * float64(ci+1)
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: from + int64(k)*10_000, Value: v})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	return req
}

// encodeWrite is a remote-write body: protobuf, snappy block-compressed.
func encodeWrite(t *testing.T, req *prompb.WriteRequest) []byte {
	t.Helper()
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

// postWrite sends a remote-write body as Prometheus does; header entries
// replace the defaults (an empty value removes one).
func postWrite(t *testing.T, url string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustWrite remote-writes req and wants 204.
func mustWrite(t *testing.T, url string, req *prompb.WriteRequest) {
	t.Helper()
	if code, body := postWrite(t, url, encodeWrite(t, req), nil); code != http.StatusNoContent {
		t.Fatalf("remote write to %s: %d %s", url, code, body)
	}
}

// findTool finds promtool or prometheus in ./bin of the module (where
// `make tools` puts them) or in PATH. A missing tool fails the test,
// except under -short.
func findTool(t *testing.T, name string) string {
	t.Helper()
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if p := filepath.Join(dir, "bin", name); isExecutable(p) {
					return p
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if testing.Short() {
		t.Skipf("%s not found (run make tools); skipped under -short", name)
	}
	t.Fatalf("%s not found in ./bin or PATH: run make tools", name)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// runTool runs a command with a deadline and returns its stdout.
func runTool(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", filepath.Base(name), args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// getText GETs a text document.
func getText(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Uncompressed: server.go's /metrics can come gzipped twice (promhttp's
	// own compression inside echo's gzip middleware) to a gzip client.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
