package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/tsdb"
)

// DELETE answers before the samples are removed (the removal is held) and
// the job is already gone from every API; a remote write to it meanwhile
// gets 503 with Retry-After; after the removal the job can be stored again.
func TestDeleteAnswersBeforeCleanup(t *testing.T) {
	hold := make(chan struct{})
	reg := prometheus.NewRegistry()
	hs, store := newTestServerWith(t, tsdb.Options{HoldDeletes: hold, DeleteWait: 200 * time.Millisecond}, reg)
	jobs := map[string]*workload.Job{}
	for i, id := range []string{"gone", "kept"} {
		jobs[id] = workload.AnsibleJob(id, workload.JobSpec{Tasks: 3, SamplesPerResource: 400, StartMs: 1796009960000 + int64(i)*3600_000}, int64(i))
		if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(jobs[id]), nil); code != 200 {
			t.Fatalf("ingest %s: %d %s", id, code, body)
		}
	}
	del := func(id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/api/v1/jobs/"+url.PathEscape(id), nil)
		req.Header.Set("X-Peakline-CSRF", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del("gone"); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	metric := func(want string) {
		t.Helper()
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		if !strings.Contains(b.String(), "\n"+want+"\n") {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	// The removal has not run: the delete answered without it.
	metric("peakline_delete_pending 1")
	metric("peakline_deletes_total 0")

	for _, path := range []string{"/api/v1/jobs/gone/graph", "/api/v1/jobs/gone/tasks"} {
		if code := getJSON(t, hs.URL+path, nil); code != 404 {
			t.Fatalf("GET %s of a deleted job: %d, want 404", path, code)
		}
	}
	var list struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	getJSON(t, hs.URL+"/api/v1/jobs", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].JobID != "kept" {
		t.Fatalf("jobs after delete = %+v, want only kept", list)
	}
	type promDoc struct {
		Status string `json:"status"`
		Data   any    `json:"data"`
	}
	at := "&time=" + url.QueryEscape("1796013590")
	for path, want := range map[string]string{
		"/prometheus/api/v1/query?query=" + url.QueryEscape(`count by (job_id) (peakline_cpu_percent)`) + at:                                        `job_id:kept`,
		"/prometheus/api/v1/query_range?query=" + url.QueryEscape(`count by (job_id) (peakline_pids)`) + "&start=1796009960&end=1796013700&step=60": `job_id:kept`,
		"/prometheus/api/v1/label/job_id/values":                                  `[kept]`,
		"/prometheus/api/v1/series?match[]=" + url.QueryEscape(`{job_id="gone"}`): `[]`,
		"/prometheus/api/v1/labels?match[]=" + url.QueryEscape(`{job_id="gone"}`): `[]`,
	} {
		var doc promDoc
		if code := getJSON(t, hs.URL+path, &doc); code != 200 || doc.Status != "success" {
			t.Fatalf("GET %s: %d %+v", path, code, doc)
		}
		got := fmt.Sprint(doc.Data)
		if strings.Contains(got, "gone") || !strings.Contains(got, want) {
			t.Fatalf("GET %s = %s, want %s and no trace of the deleted job", path, got, want)
		}
	}

	// A remote write to the job is refused until the removal ends.
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "peakline_job_last_event"}, {Name: "job_id", Value: "gone"}},
		Samples: []prompb.Sample{{Timestamp: 1796009990000, Value: 99}},
	}}}
	hreq, _ := http.NewRequest(http.MethodPost, hs.URL+"/prometheus/api/v1/write", bytes.NewReader(encodeWrite(t, req)))
	hreq.Header.Set("Content-Type", "application/x-protobuf")
	hreq.Header.Set("Content-Encoding", "snappy")
	client := &http.Client{Timeout: 30 * time.Second} // bounds a hang, not a speed check
	resp, err := client.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("remote write to a job being deleted: %d, Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := del("gone"); code != 404 {
		t.Fatalf("second delete: %d, want 404", code)
	}
	if code := del("never-stored"); code != 404 {
		t.Fatalf("delete of an unknown job: %d, want 404", code)
	}

	hold <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	metric("peakline_delete_pending 0")
	metric("peakline_deletes_total 1")
	if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(jobs["gone"]), nil); code != 200 {
		t.Fatalf("re-ingest after delete: %d %s", code, body)
	}
	var g graphDoc
	if code := getJSON(t, hs.URL+"/api/v1/jobs/gone/graph?points=10000", &g); code != 200 || len(g.Series) != 3 {
		t.Fatalf("graph after re-ingest: %d, %d series", code, len(g.Series))
	}
	for _, s := range g.Series {
		if s.RawSamples != 400 {
			t.Fatalf("%s after re-ingest: %d raw samples, want 400", s.Resource, s.RawSamples)
		}
	}
}
