package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/disktest"
)

type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// diskJobJSON is ingest job i: one task, 4000 CPU samples of random
// values from startMs.
func diskJobJSON(i int, startMs int64) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 3))
	job := fmt.Sprintf("full-%04d", i)
	ts, vs := make([]int64, 4000), make([]float64, 4000)
	for k := range ts {
		ts[k], vs[k] = startMs+int64(k)*10, math.Round(rng.Float64()*40000)/100
	}
	b, _ := json.Marshal(map[string]any{
		"job_id": job,
		"tasks":  []map[string]any{{"counter": 3, "uuid": "u-" + job, "name": "fill", "start": startMs}},
		"series": []map[string]any{{"resource": "cpu", "counter": 3, "uuid": "u-" + job, "task": "fill", "t": ts, "v": vs}},
	})
	return b
}

// TestDiskFullOverHTTP runs the disk-full sequence against a real server
// on a 64 MiB tmpfs: ingest until refused (507 with Retry-After, for
// JSON and remote write alike), /healthz degraded with the reason while
// reads go on, space freed, writes taken again by themselves, and after
// a close and reopen every acknowledged sample is there.
func TestDiskFullOverHTTP(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	clock := &manualClock{now: time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)}
	opts := tsdb.Options{Now: clock.Now, MinFreeDisk: 8 << 20}
	reg := prometheus.NewRegistry()
	store, err := tsdb.Open(dir, opts, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() }) // before the unmount
	hs := serveStore(t, store, reg)
	filler := disktest.Fill(t, mnt, 12<<20)
	clock.Advance(time.Second)

	// Within the head's window of the clock: the writes go to the
	// write-ahead log (TestBackfillDiskFullOverHTTP writes old samples).
	startMs := func(i int) int64 { return clock.Now().Add(-2*time.Hour + time.Duration(i)*10*time.Second).UnixMilli() }
	var acked []string
	next := 0
	ingest := func() (int, http.Header, string) {
		i := next
		next++
		code, header, msg := postDiskJob(t, hs.URL, i, startMs(i))
		if code == http.StatusOK {
			acked = append(acked, fmt.Sprintf("full-%04d", i))
		}
		return code, header, msg
	}
	code, header, msg := 200, http.Header{}, ""
	for range 1000 {
		if code, header, msg = ingest(); code != http.StatusOK {
			break
		}
	}
	if code != http.StatusInsufficientStorage || header.Get("Retry-After") != "10" || !strings.Contains(msg, "--min-free-disk") {
		t.Fatalf("ingest on a full disk: %d Retry-After %q %q, want 507 with Retry-After 10 naming --min-free-disk", code, header.Get("Retry-After"), msg)
	}
	if len(acked) == 0 {
		t.Fatal("no batch was taken before the disk filled")
	}

	// Remote write is refused the same way (5xx: senders retry).
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "node_load1"}, {Name: "instance", Value: "a"}}}
	for k := range 4000 {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: startMs(next) + int64(k)*10, Value: float64(k)})
	}
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}
	rw, err := http.NewRequest(http.MethodPost, hs.URL+"/api/v1/write", strings.NewReader(string(encodeWrite(t, req))))
	if err != nil {
		t.Fatal(err)
	}
	rw.Header.Set("Content-Type", "application/x-protobuf")
	rw.Header.Set("Content-Encoding", "snappy")
	rw.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(rw)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || resp.Header.Get("Retry-After") != "10" {
		t.Fatalf("remote write on a full disk: %d Retry-After %q, want 507 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	var health struct {
		Status string `json:"status"`
		Writes *struct {
			Refused      bool   `json:"refused"`
			Reason       string `json:"reason"`
			FreeBytes    int64  `json:"free_bytes"`
			MinFreeBytes int64  `json:"min_free_bytes"`
		} `json:"writes"`
	}
	if code := getJSON(t, hs.URL+"/healthz", &health); code != 200 || health.Status != "degraded" || health.Writes == nil ||
		!health.Writes.Refused || health.Writes.MinFreeBytes != 8<<20 || !strings.Contains(health.Writes.Reason, "--min-free-disk") {
		t.Fatalf("/healthz on a full disk: %d %+v, want 200 degraded naming --min-free-disk", code, health)
	}
	var tasks struct {
		Tasks []struct {
			Samples map[string]int `json:"samples"`
		} `json:"tasks"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs/"+acked[0]+"/tasks", &tasks); code != 200 || len(tasks.Tasks) != 1 || tasks.Tasks[0].Samples["cpu"] != 4000 {
		t.Fatalf("reading job %s while writes are refused: %d %+v, want its task with 4000 CPU samples", acked[0], code, tasks)
	}
	if got := counterValue(t, reg, "peakline_disk_refused_writes_total", map[string]string{"reason": "min_free_disk"}); got != 2 {
		t.Fatalf("peakline_disk_refused_writes_total{reason=min_free_disk} = %v, want 2 (the JSON batch and the remote write)", got)
	}

	disktest.Free(t, filler)
	clock.Advance(time.Second)
	for range 20 {
		if code, _, msg := ingest(); code != http.StatusOK {
			t.Fatalf("ingest after space was freed: %d %s", code, msg)
		}
	}
	health.Writes = nil
	if code := getJSON(t, hs.URL+"/healthz", &health); code != 200 || health.Status != "ok" || health.Writes != nil {
		t.Fatalf("/healthz after space was freed: %d %+v, want ok", code, health)
	}

	hs.Close()
	store = reopenHasJobs(t, store, dir, opts, acked)
	if d := store.Damage(); len(d.Logs) != 0 {
		t.Fatalf("the log is corrupt after the refusals: %+v", d.Logs)
	}
	t.Logf("%d batches acknowledged (%d after space was freed), all there after the reopen", len(acked), 20)
}

// postDiskJob posts ingest job i (diskJobJSON) from startMs to the
// server at url and returns the status, the headers and the error message
// of the answer.
func postDiskJob(t *testing.T, url string, i int, startMs int64) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(url+"/api/v1/ingest", "application/json", strings.NewReader(string(diskJobJSON(i, startMs))))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body.Error
}

// reopenHasJobs closes store, opens dir again with opts and fails unless
// each of jobs reads back whole: 4000 CPU samples and one task. It
// returns the reopened store, also closed when the test ends.
func reopenHasJobs(t *testing.T, store *tsdb.Store, dir string, opts tsdb.Options, jobs []string) *tsdb.Store {
	t.Helper()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := tsdb.Open(dir, opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() }) // before the unmount, should a job be missing
	for _, job := range jobs {
		j, err := store.ReadJob(context.Background(), job, math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatalf("job %s after the reopen: %v", job, err)
		}
		if len(j.Columns) != 1 || len(j.Columns[0].Ts) != 4000 || len(j.Tasks) != 1 {
			t.Fatalf("job %s after the reopen: %d columns, %d tasks, want 4000 CPU samples and 1 task", job, len(j.Columns), len(j.Tasks))
		}
	}
	return store
}

// TestBackfillDiskFullOverHTTP ingests an old job (its samples go to a
// backfill block) on a nearly full 64 MiB tmpfs: with --min-free-disk it
// is refused with 507 and Retry-After before anything is written, naming
// the flag; with the rule off the block write runs out of space and is
// refused the same way, naming the cause. Either way a recent job is
// taken next to it, /healthz stays ok, the old job is taken once space is
// freed, and after a reopen every acknowledged job is there.
func TestBackfillDiskFullOverHTTP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minFree int64
		leave   int64
		msg     string
	}{
		{"min-free-disk", 8 << 20, 28 << 20, "--min-free-disk 8.0MiB"},
		{"rule-off", -1, 4 << 20, "no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := disktest.MountTmpfs(t, 64<<20)
			dir := filepath.Join(mnt, "data")
			clock := &manualClock{now: time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)}
			opts := tsdb.Options{Now: clock.Now, MinFreeDisk: tc.minFree}
			reg := prometheus.NewRegistry()
			store, err := tsdb.Open(dir, opts, nil, reg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() }) // before the unmount
			hs := serveStore(t, store, reg)
			filler := disktest.Fill(t, mnt, tc.leave)
			clock.Advance(time.Second)
			ingest := func(i int, startMs int64) (int, http.Header, string) { return postDiskJob(t, hs.URL, i, startMs) }
			old := clock.Now().Add(-48 * time.Hour).UnixMilli()
			recent := clock.Now().Add(-time.Hour).UnixMilli()
			if code, header, msg := ingest(0, old); code != http.StatusInsufficientStorage || header.Get("Retry-After") != "10" || !strings.Contains(msg, tc.msg) {
				t.Fatalf("old job on a full disk: %d Retry-After %q %q, want 507 with Retry-After 10 naming %q", code, header.Get("Retry-After"), msg, tc.msg)
			}
			if code, _, msg := ingest(1, recent); code != http.StatusOK {
				t.Fatalf("recent job next to the refused old one: %d %s", code, msg)
			}
			var health struct {
				Status string `json:"status"`
			}
			if code := getJSON(t, hs.URL+"/healthz", &health); code != 200 || health.Status != "ok" {
				t.Fatalf("/healthz while recent writes are taken: %d %+v, want ok", code, health)
			}
			disktest.Free(t, filler)
			clock.Advance(time.Second)
			if code, _, msg := ingest(0, old); code != http.StatusOK {
				t.Fatalf("old job after space was freed: %d %s", code, msg)
			}
			hs.Close()
			store = reopenHasJobs(t, store, dir, opts, []string{"full-0000", "full-0001"})
		})
	}
}
