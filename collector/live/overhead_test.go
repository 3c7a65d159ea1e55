package live

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCollectorOverhead measures the collector's own CPU while it samples a
// sleeping job at 4 Hz and ships to a server that only acknowledges:
//
//	PEAKLINE_OVERHEAD=60s go test -run TestCollectorOverhead -v ./collector/live/
//
// It reports the collector process's user+system time (getrusage
// RUSAGE_SELF, which leaves out the job) as a percentage of one core. The
// acknowledging server runs in the same process, so the figure is an upper
// bound. It fails above 2% of a core.
func TestCollectorOverhead(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("PEAKLINE_OVERHEAD"))
	if err != nil {
		t.Skip("set PEAKLINE_OVERHEAD=60s to measure the collector's overhead")
	}
	requireCgroups(t)
	var posts atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_, _ = io.Copy(io.Discard, r.Body)
			posts.Add(1)
			_, _ = w.Write([]byte(`{}`))
			return
		}
		_, _ = w.Write([]byte(`{"collection": "all"}`))
	}))
	defer ts.Close()

	cfg := LiveConfig{
		Server:   ts.URL,
		JobID:    "overhead",
		SpoolDir: t.TempDir(),
		Command:  []string{"sleep", strconv.FormatFloat(dur.Seconds(), 'f', 3, 64)},
	}
	before, wall := rusage(t), time.Now()
	code, err := Collect(context.Background(), cfg)
	elapsed := time.Since(wall)
	used := rusage(t) - before
	if err != nil || code != 0 {
		t.Fatalf("Collect = %d, %v", code, err)
	}
	pct := float64(used) / float64(elapsed) * 100
	t.Logf("collector CPU %v over %v at 4 Hz: %.3f%% of one core (%.2f ms CPU per second; %d batches posted)",
		used, elapsed.Round(time.Millisecond), pct, float64(used.Microseconds())/1000/elapsed.Seconds(), posts.Load())
	if pct > 2 {
		t.Fatalf("collector overhead %.3f%% of a core, want ≤ 2%%", pct)
	}
}

func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
