package ship

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShipperKeepsRejectedBatch(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": "series[0].t: not increasing"}`, http.StatusBadRequest)
	}))
	defer ts.Close()
	dir := t.TempDir()
	sp, err := OpenSpool(dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	s := newShipper(ts.URL, ts.Client(), sp, 100, testLogger(t))
	s.Enqueue([]byte("gzip body"), 3)
	go s.Run(t.Context())
	waitFor(t, "the rejected batch to be kept", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+spoolRejectedExt))
		return len(m) == 1
	})
	m, _ := filepath.Glob(filepath.Join(dir, "*"+spoolRejectedExt))
	if b, _ := os.ReadFile(m[0]); string(b) != "gzip body" || !strings.HasSuffix(m[0], spoolExt+spoolRejectedExt) {
		t.Fatalf("kept %s = %q", m[0], b)
	}
	if n := s.LoadSpool(); n != 0 {
		t.Fatalf("a rejected batch is queued again on restart (%d)", n)
	}
}

// TestShipperAnswers sends two batches to a real HTTP server that answers
// the first POST with one status and every later POST with 200: a 4xx
// other than 408, 425 and 429 drops the first batch (logged once with the
// server's message, counted, kept as .rejected) with no wait; every other
// answer, and a connection dropped without an answer, is retried after a
// backoff or the Retry-After wait, and both batches arrive in order.
func TestShipperAnswers(t *testing.T) {
	const minBackoff = 2 * time.Second
	date := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	jitter := [2]time.Duration{minBackoff * 8 / 10, minBackoff * 12 / 10}
	exact := func(d time.Duration) [2]time.Duration { return [2]time.Duration{d, d} }
	// f checks one first answer: status (0 drops the connection) with a
	// Retry-After header (when not ""), and the wait it must cause (none
	// when rejected).
	f := func(status int, retryAfterHdr string, rejected bool, wait [2]time.Duration) {
		t.Helper()
		var mu sync.Mutex
		var got []string
		delivered := make(chan struct{})
		posts := 0
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			defer mu.Unlock()
			posts++
			if posts == 1 {
				switch {
				case status == 0:
					conn, _, _ := w.(http.Hijacker).Hijack()
					_ = conn.Close()
				default:
					if retryAfterHdr != "" {
						w.Header().Set("Retry-After", retryAfterHdr)
					}
					w.Header().Set("Date", date.Format(http.TimeFormat))
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					fmt.Fprintf(w, `{"error": "refused with %d"}`, status)
				}
				return
			}
			got = append(got, string(body))
			if string(body) == "batch-2" {
				close(delivered)
			}
		}))
		defer ts.Close()
		dir := t.TempDir()
		sp, err := OpenSpool(dir, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		s := newShipper(ts.URL, ts.Client(), sp, 100, slog.New(slog.NewTextHandler(&logs, nil)))
		s.minBackoff, s.maxBackoff = minBackoff, 8*minBackoff
		var waits []time.Duration
		s.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
			waits = append(waits, d) // only run's goroutine calls timer
			c := make(chan time.Time, 1)
			c <- date
			return c, func() bool { return false }
		}
		s.Enqueue([]byte("batch-1"), 3)
		s.Enqueue([]byte("batch-2"), 2)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		select {
		case <-delivered:
		case <-time.After(20 * time.Second):
			t.Fatalf("status %d: batch-2 not delivered", status)
		}
		if unsent := s.Finish(cancel, 10*time.Second); unsent != 0 {
			t.Fatalf("status %d: %d samples unsent", status, unsent)
		}
		kept, _ := filepath.Glob(filepath.Join(dir, "*"+spoolRejectedExt))
		rejectLines := strings.Count(logs.String(), "server rejected a batch")
		mu.Lock()
		defer mu.Unlock()
		if rejected {
			keptBody := ""
			if len(kept) == 1 {
				b, _ := os.ReadFile(kept[0])
				keptBody = string(b)
			}
			msg := fmt.Sprintf("refused with %d", status)
			if !slices.Equal(got, []string{"batch-2"}) || keptBody != "batch-1" || len(waits) != 0 ||
				s.rejectedBatches != 1 || s.rejectedSamples != 3 || s.sentBatches != 1 || s.sentSamples != 2 ||
				rejectLines != 1 || !strings.Contains(logs.String(), msg) {
				t.Errorf("status %d: delivered %q, kept %q (%q), waits %v, rejected %d batches %d samples, sent %d/%d, %d reject log lines; log:\n%s",
					status, got, kept, keptBody, waits, s.rejectedBatches, s.rejectedSamples, s.sentBatches, s.sentSamples, rejectLines, logs.String())
			}
			return
		}
		if !slices.Equal(got, []string{"batch-1", "batch-2"}) || len(kept) != 0 || len(waits) != 1 ||
			waits[0] < wait[0] || waits[0] > wait[1] || s.rejectedBatches != 0 || s.sentBatches != 2 || s.sentSamples != 5 || rejectLines != 0 {
			t.Errorf("status %d Retry-After %q: delivered %q, kept %q, waits %v (want one in %v), rejected %d, sent %d/%d; log:\n%s",
				status, retryAfterHdr, got, kept, waits, wait, s.rejectedBatches, s.sentBatches, s.sentSamples, logs.String())
		}
	}
	for _, status := range []int{400, 404, 409, 413, 415, 422} {
		f(status, "", true, [2]time.Duration{})
	}
	f(400, "3", true, [2]time.Duration{}) // a Retry-After on a refusal changes nothing
	for _, status := range []int{408, 425, 429, 500, 502, 503, 504} {
		f(status, "", false, jitter)
	}
	f(0, "", false, jitter)                                                              // no answer at all
	f(503, "3", false, exact(3*time.Second))                                             // delay-seconds
	f(429, "5", false, exact(5*time.Second))                                             // Too Many Requests too
	f(408, "1", false, exact(minBackoff))                                                // never sooner than minBackoff
	f(503, "3600", false, exact(5*time.Minute))                                          // bounded by maxRetryAfter
	f(503, date.Add(7*time.Second).Format(http.TimeFormat), false, exact(7*time.Second)) // HTTP-date
	f(503, date.Add(-time.Hour).Format(http.TimeFormat), false, jitter)                  // a date past: backoff
	f(503, "soon", false, jitter)                                                        // unparsable: backoff
}

// TestOpenSpoolRemovesStaleTemps: a half-written batch of a collector
// that is gone is removed when a spool is opened; those of live
// processes, whole batches and rejected ones stay.
func TestOpenSpoolRemovesStaleTemps(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	names := map[string]bool{ // name → kept
		fmt.Sprintf("%020d-%d-%06d%s%s", 1, gone.Process.Pid, 1, spoolExt, spoolTempExt):     false,
		fmt.Sprintf("%020d-%d-%06d%s%s", 2, os.Getpid(), 1, spoolExt, spoolTempExt):          true,
		fmt.Sprintf("%020d-%d-%06d%s%s", 3, 1, 1, spoolExt, spoolTempExt):                    true, // init lives
		fmt.Sprintf("%020d-%d-%06d%s", 4, gone.Process.Pid, 2, spoolExt):                     true,
		fmt.Sprintf("%020d-%d-%06d%s%s", 5, gone.Process.Pid, 3, spoolExt, spoolRejectedExt): true,
		"notes.tmp": true,
	}
	for name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenSpool(dir, time.Now); err != nil {
		t.Fatal(err)
	}
	for name, kept := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		if (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}
