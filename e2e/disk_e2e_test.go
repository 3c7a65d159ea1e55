package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/tsdb/disktest"
)

// diskIngest posts ingest batches of one task and 4000 CPU samples each,
// a job per batch, and remembers the jobs acknowledged.
type diskIngest struct {
	t     *testing.T
	base0 int64 // unix ms of job 0; job i starts i×10 s later
	next  int
	acked []string
}

type ingestAnswer struct {
	code       int
	retryAfter time.Duration
	msg        string
}

// post sends job i.
func (d *diskIngest) post(url string, i int) ingestAnswer {
	d.t.Helper()
	rng := rand.New(rand.NewPCG(uint64(i), 5))
	job := fmt.Sprintf("disk-%04d", i)
	startMs := d.base0 + int64(i)*10_000
	ts, vs := make([]int64, 4000), make([]float64, 4000)
	for k := range ts {
		ts[k], vs[k] = startMs+int64(k)*10, math.Round(rng.Float64()*40000)/100
	}
	b := &ship.Batch{
		JobID:  job,
		Tasks:  []ship.Task{{Counter: 3, UUID: "u-" + job, Name: "fill", StartMs: startMs}},
		Series: []ship.Series{{Resource: "cpu", Counter: 3, UUID: "u-" + job, Task: "fill", Ts: ts, Vs: vs}},
	}
	err := (&ship.Client{BaseURL: url}).Send(context.Background(), b)
	if err == nil {
		d.acked = append(d.acked, job)
		return ingestAnswer{code: http.StatusOK}
	}
	var se *ship.StatusError
	if !errors.As(err, &se) {
		d.t.Fatal(err)
	}
	return ingestAnswer{se.StatusCode, se.RetryAfter, se.Message}
}

// untilRefused posts new jobs until one is not taken.
func (d *diskIngest) untilRefused(url string) ingestAnswer {
	d.t.Helper()
	for range 2000 {
		i := d.next
		d.next++
		if a := d.post(url, i); a.code != http.StatusOK {
			return a
		}
	}
	d.t.Fatalf("%d batches were all taken", d.next)
	return ingestAnswer{}
}

// more posts n new jobs and requires each taken.
func (d *diskIngest) more(url string, n int) {
	d.t.Helper()
	for range n {
		i := d.next
		d.next++
		if a := d.post(url, i); a.code != http.StatusOK {
			d.t.Fatalf("job %d: %+v, want 200", i, a)
		}
	}
}

// checkAcked requires every acknowledged job whole on the server.
func (d *diskIngest) checkAcked(s *served) {
	d.t.Helper()
	for _, job := range d.acked {
		if n := s.rawSamples(d.t, job); n != 4000 {
			d.t.Fatalf("job %s has %d samples after the restart, 4000 were acknowledged", job, n)
		}
	}
}

type healthDoc struct {
	Status string `json:"status"`
	Writes *struct {
		Refused bool   `json:"refused"`
		Reason  string `json:"reason"`
	} `json:"writes"`
}

func (s *served) health(t *testing.T) healthDoc {
	t.Helper()
	var h healthDoc
	code, body := s.get(t, "/healthz")
	if code != 200 || json.Unmarshal(body, &h) != nil {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	return h
}

// TestServeDiskFull runs `peakline serve` on a 64 MiB tmpfs with
// --min-free-disk 8MiB: filled up, it answers ingest 507 with
// Retry-After and /healthz degraded before the write-ahead log fails;
// once the filler is removed it takes writes again by itself, and after
// SIGTERM and a restart every acknowledged sample is there and the log
// needed no repair.
func TestServeDiskFull(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	data := filepath.Join(mnt, "data")
	s := serve(t, "--data", data, "--min-free-disk", "8MiB")
	filler := disktest.Fill(t, mnt, 12<<20)
	d := &diskIngest{t: t, base0: time.Now().Add(-2 * time.Hour).UnixMilli()} // the head's window: the log
	a := d.untilRefused(s.URL)
	if a.code != http.StatusInsufficientStorage || a.retryAfter == 0 || !strings.Contains(a.msg, "--min-free-disk 8.0MiB") {
		t.Fatalf("ingest on a full disk: %+v, want 507 with Retry-After naming --min-free-disk", a)
	}
	if len(d.acked) == 0 {
		t.Fatal("no batch was taken before the disk filled")
	}
	if h := s.health(t); h.Status != "degraded" || h.Writes == nil || !h.Writes.Refused {
		t.Fatalf("/healthz on a full disk: %+v, want degraded with writes refused", h)
	}
	if n := s.rawSamples(t, d.acked[0]); n != 4000 { // reads go on
		t.Fatalf("job %s reads %d samples while writes are refused, want 4000", d.acked[0], n)
	}
	disktest.Free(t, filler)
	// The refused batch is sent again, as a client following Retry-After
	// would, until it is taken: at the server's next look at the disk.
	refused := d.next - 1
	freed := time.Now()
	for a.code != http.StatusOK {
		if time.Since(freed) > 10*time.Second {
			t.Fatalf("writes still refused 10s after space was freed: %+v", a)
		}
		time.Sleep(50 * time.Millisecond)
		a = d.post(s.URL, refused)
	}
	t.Logf("writes taken again %s after space was freed", time.Since(freed).Round(time.Millisecond))
	d.more(s.URL, 20)
	if h := s.health(t); h.Status != "ok" {
		t.Fatalf("/healthz after space was freed: %+v, want ok", h)
	}
	s.stop(t)
	s = serve(t, "--data", data, "--min-free-disk", "8MiB")
	d.checkAcked(s)
	if strings.Contains(s.out.String(), "corrupt") {
		t.Fatalf("the restart found a corrupt log:\n%s", s.out.String())
	}
	s.stop(t)
}

// TestServeWALWriteFailure runs `peakline serve --min-free-disk 0` (no
// rule) on a 64 MiB tmpfs until a write fails in the write-ahead log:
// /healthz then says writes are refused until the store reopens; once
// space is freed the next write reopens the store, which repairs the
// log, and is taken without a restart, and after a restart every write
// acknowledged before the failure and after the reopen is there.
func TestServeWALWriteFailure(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	data := filepath.Join(mnt, "data")
	s := serve(t, "--data", data, "--min-free-disk", "0")
	filler := disktest.Fill(t, mnt, 4<<20+31108)
	d := &diskIngest{t: t, base0: time.Now().Add(-2 * time.Hour).UnixMilli()} // the head's window: the log
	if a := d.untilRefused(s.URL); a.code != http.StatusServiceUnavailable || a.retryAfter == 0 || !strings.Contains(a.msg, "no space left on device") {
		t.Fatalf("ingest on a full disk without the rule: %+v, want 503 with Retry-After for no space left", a)
	}
	before := len(d.acked)
	if h := s.health(t); h.Status != "degraded" || h.Writes == nil || !strings.Contains(h.Writes.Reason, "reopens and repairs the log") {
		t.Fatalf("/healthz after a failed log write: %+v, want degraded saying the store reopens", h)
	}
	disktest.Free(t, filler)
	// The first write since the failure reopens the store (its first
	// attempt is not held back), and the rest are taken.
	d.more(s.URL, 20)
	if h := s.health(t); h.Status != "ok" {
		t.Fatalf("/healthz after the store reopened: %+v, want ok", h)
	}
	if !strings.Contains(s.out.String(), "store reopened: writes are taken again") {
		t.Fatalf("no log of the reopen:\n%s", s.out.String())
	}
	s.stop(t)
	s = serve(t, "--data", data, "--min-free-disk", "0")
	if strings.Contains(s.out.String(), "write-ahead log is corrupt") {
		t.Fatalf("the restart after the store reopened itself found a corrupt log:\n%s", s.out.String())
	}
	d.checkAcked(s)
	t.Logf("%d jobs acknowledged before the failure, %d after the store reopened itself, all there", before, len(d.acked)-before)
	s.stop(t)
}

// TestServeBackfillDiskFull runs `peakline serve --min-free-disk 8MiB`
// on a 64 MiB tmpfs with room above the threshold for recent batches but
// not for a backfill block's chunk file: an old job is answered 507 with
// Retry-After naming --min-free-disk while recent jobs are taken; once
// space is freed the old job is taken, and after a restart every
// acknowledged job is there.
func TestServeBackfillDiskFull(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	data := filepath.Join(mnt, "data")
	s := serve(t, "--data", data, "--min-free-disk", "8MiB")
	filler := disktest.Fill(t, mnt, 28<<20)
	old := &diskIngest{t: t, base0: time.Now().Add(-48 * time.Hour).UnixMilli()}
	recent := &diskIngest{t: t, base0: time.Now().Add(-2 * time.Hour).UnixMilli(), next: 1}
	if a := old.post(s.URL, 0); a.code != http.StatusInsufficientStorage || a.retryAfter == 0 || !strings.Contains(a.msg, "--min-free-disk 8.0MiB") {
		t.Fatalf("old job on a nearly full disk: %+v, want 507 with Retry-After naming --min-free-disk", a)
	}
	recent.more(s.URL, 5)
	if h := s.health(t); h.Status != "ok" {
		t.Fatalf("/healthz while recent writes are taken: %+v, want ok", h)
	}
	disktest.Free(t, filler)
	freed := time.Now()
	for a := old.post(s.URL, 0); a.code != http.StatusOK; a = old.post(s.URL, 0) {
		if time.Since(freed) > 10*time.Second {
			t.Fatalf("old job still refused 10s after space was freed: %+v", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop(t)
	s = serve(t, "--data", data, "--min-free-disk", "8MiB")
	old.checkAcked(s)
	recent.checkAcked(s)
	if len(old.acked) != 1 || len(recent.acked) != 5 {
		t.Fatalf("acknowledged %d old and %d recent jobs, want 1 and 5", len(old.acked), len(recent.acked))
	}
	s.stop(t)
}
