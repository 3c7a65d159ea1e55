package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// BenchmarkJobsListUnderIngest measures GET /api/v1/jobs on a store of
// 1,000 finished jobs, idle and while 20 jobs ingest live (a batch every
// 100 ms each). A write to one job must leave the other jobs' cached
// summaries warm, so the p50 under load stays within 2× of idle:
//
//	go test -run '^$' -bench BenchmarkJobsListUnderIngest ./server/
func BenchmarkJobsListUnderIngest(b *testing.B) {
	const finished, live = 1000, 20
	dir := b.TempDir()
	store, err := tsdb.Open(dir, tsdb.Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	startMs := time.Now().Add(-3 * time.Hour).UnixMilli()
	for i := range finished {
		j := workload.AnsibleJob(fmt.Sprintf("done-%04d", i), workload.JobSpec{Tasks: 5, SamplesPerResource: 200, StartMs: startMs + int64(i)*1000}, int64(i))
		if _, err := store.Append(ctx, jobBatch(j)); err != nil {
			b.Fatal(err)
		}
	}
	// Each phase starts on a reopened store, with nothing cached.
	var hs *httptest.Server
	reopen := func() {
		if hs != nil {
			hs.Close()
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
		if store, err = tsdb.Open(dir, tsdb.Options{}, nil, nil); err != nil {
			b.Fatal(err)
		}
		srv, err := server.New(server.Config{}, store, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		hs = httptest.NewServer(srv.Handler())
	}
	defer func() {
		hs.Close()
		store.Close()
	}()
	reopen()

	list := func() time.Duration {
		t0 := time.Now()
		resp, err := http.Get(hs.URL + "/api/v1/jobs")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < 1000 {
			b.Fatalf("jobs list: %d, %d bytes", resp.StatusCode, n)
		}
		return time.Since(t0)
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	idle := make([]time.Duration, 0, 50)
	for range 50 {
		idle = append(idle, list())
	}
	reopen()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			id := fmt.Sprintf("live-%02d", w)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				t := time.Now().UnixMilli()
				batch := &tsdb.Batch{JobID: id, Series: []tsdb.SeriesData{
					{Resource: "cpu", Counter: 3, UUID: "u", Task: "t", Ts: []int64{t}, Vs: []float64{float64(k % 100)}},
					{Resource: "memory", Counter: 3, UUID: "u", Task: "t", Ts: []int64{t}, Vs: []float64{float64(1 << 20 * (k%50 + 1))}},
				}}
				if _, err := store.Append(ctx, batch); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	loaded := make([]time.Duration, 0, b.N)
	for b.Loop() {
		loaded = append(loaded, list())
	}
	close(stop)
	wg.Wait()
	idleP50, liveP50 := p50(idle), p50(loaded)
	b.ReportMetric(idleP50, "idle-p50-ms")
	b.ReportMetric(liveP50, "live-p50-ms")
	b.ReportMetric(liveP50/idleP50, "live/idle")
}
