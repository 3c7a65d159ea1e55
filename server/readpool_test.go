package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/peakline/peakline/bench"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// get answers GET url: status, body, Retry-After.
func getAll(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

// historyEstimate is what the history of runs runs of tasks tasks with
// samples samples per resource reserves.
func historyEstimate(runs, tasks, samples int) int64 {
	return int64(runs*tasks)*server.HistoryTaskRunBytes + int64(3*samples)*server.ReadSampleBytes
}

// The heavy reads share --max-read-bytes: a history, graph, tasks or
// jobs list whose estimate does not fit in what the reads being served
// leave is refused with 429 and Retry-After naming the flag, one that
// fits is answered in full, and every reservation is given back.
func TestReadPoolBoundsHeavyReads(t *testing.T) {
	const runs, tasks, samples = 10, 30, 200
	est := historyEstimate(runs, tasks, samples)
	const budget = 4 << 20
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := server.New(server.Config{MaxReadBytes: budget}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if err := bench.TemplateRuns(t.Context(), store, runs, tasks, samples, 1); err != nil {
		t.Fatal(err)
	}
	historyURL := fmt.Sprintf("%s/api/v1/templates/%s/history?last=%d", hs.URL, bench.HistoryTemplate, runs)
	jobSamples := 3 * samples
	jobEst := int64(jobSamples)*server.ReadSampleBytes + tasks*server.ReadTaskBytes
	cases := []struct {
		url, what string
		est       int64
	}{
		{historyURL, fmt.Sprintf("the history of %d runs", runs), est},
		{hs.URL + "/api/v1/jobs/run-003/graph?points=100", fmt.Sprintf(`job "run-003" (%d samples, %d tasks)`, jobSamples, tasks), jobEst},
		{hs.URL + "/api/v1/jobs/run-003/tasks", fmt.Sprintf(`job "run-003" (%d samples, %d tasks)`, jobSamples, tasks), jobEst},
		{hs.URL + "/api/v1/jobs?limit=5", fmt.Sprintf("a page of 5 of %d jobs", runs), runs*server.ListSpanBytes + 5*server.ListJobBytes},
	}
	for _, tc := range cases {
		code, want, _ := getAll(t, tc.url)
		if code != http.StatusOK {
			t.Fatalf("GET %s with the pool free: %d %s", tc.url, code, want)
		}
		// Room for exactly this read: answered, the same.
		if !s.HoldReads(budget - tc.est) {
			t.Fatal("the pool is not free")
		}
		if code, got, _ := getAll(t, tc.url); code != http.StatusOK || got != want {
			t.Errorf("GET %s with room for it: %d, the answer differs: %v", tc.url, code, got != want)
		}
		// One byte less: refused.
		if !s.HoldReads(1) {
			t.Fatal("the pool is fuller than reserved")
		}
		code, got, retry := getAll(t, tc.url)
		wantErr := fmt.Sprintf(`{"error":"too many requests: %s needs about %d bytes, and the reads being served hold too much of the %d allowed at once (serve --max-read-bytes); retry after 1 s"}`, jsonEscape(tc.what), tc.est, budget) + "\n"
		if code != http.StatusTooManyRequests || retry != "1" || got != wantErr {
			t.Errorf("GET %s past the budget: %d (Retry-After %q) %q, want 429 (Retry-After 1) %q", tc.url, code, retry, got, wantErr)
		}
		s.FreeReads(budget - tc.est + 1)
		if n := s.ReadsReserved(); n != 0 {
			t.Fatalf("after GET %s: %d bytes still reserved", tc.url, n)
		}
	}

	// Concurrent histories: each is answered in full or refused, never
	// anything else, and the first always fits.
	_, want, _ := getAll(t, historyURL)
	const n = 16
	var wg sync.WaitGroup
	codes := make([]int, n)
	bodies := make([]string, n)
	for i := range n {
		wg.Go(func() { codes[i], bodies[i], _ = getAll(t, historyURL) })
	}
	wg.Wait()
	ok := 0
	for i := range n {
		switch {
		case codes[i] == http.StatusOK && bodies[i] == want:
			ok++
		case codes[i] == http.StatusTooManyRequests && bodies[i] == fmt.Sprintf(`{"error":"too many requests: the history of %d runs needs about %d bytes, and the reads being served hold too much of the %d allowed at once (serve --max-read-bytes); retry after 1 s"}`, runs, est, budget)+"\n":
		default:
			t.Errorf("concurrent history %d: %d %.200s", i, codes[i], bodies[i])
		}
	}
	if ok == 0 {
		t.Errorf("none of %d concurrent histories was answered", n)
	}
	if n := s.ReadsReserved(); n != 0 {
		t.Fatalf("after the concurrent histories: %d bytes still reserved", n)
	}
}

func jsonEscape(s string) string {
	out := ""
	for _, r := range s {
		if r == '"' {
			out += `\"`
		} else {
			out += string(r)
		}
	}
	return out
}

// The history of 100 runs × 300 tasks holds no more than it reserves:
// the live heap's high-water mark while it is served (the store's cache
// warm, garbage collected at once) stays under the estimate.
func TestHistoryMemoryWithinEstimate(t *testing.T) {
	const runs, tasks, samples = 100, 300, 200
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := bench.TemplateRuns(t.Context(), store, runs, tasks, samples, 1); err != nil {
		t.Fatal(err)
	}
	// The blocks merged before, not while, the heap is watched: the runs
	// are older than the head's window, so each went into backfill blocks
	// of its own, one per day it touched, and the TSDB's own loop merged
	// each day's dozens of overlapping blocks a minute after Open,
	// allocating tens of MB beside the history (under -race one pass held
	// 61.8 MB, the others 5-27 MB).
	if err := store.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bench.HistoryRequest(srv.Handler(), bench.HistoryTemplate, runs); err != nil { // warms the cache
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	est := historyEstimate(runs, tasks, samples)
	for pass := range 3 {
		runtime.GC()
		// HeapAlloc's figure, read without stopping the world (which
		// runtime.ReadMemStats does, starving the request under -race).
		heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(heap)
		before := heap[0].Value.Uint64()
		peak := before
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				metrics.Read(heap)
				peak = max(peak, heap[0].Value.Uint64())
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		n, err := bench.HistoryRequest(srv.Handler(), bench.HistoryTemplate, runs)
		close(stop)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		held := int64(peak - before)
		t.Logf("pass %d: held %d bytes at most (%d per task-run), answer %d bytes, estimate %d", pass, held, held/(runs*tasks), n, est)
		if held > est {
			t.Errorf("pass %d: the history held %d bytes, more than its estimate of %d", pass, held, est)
		}
	}
}
