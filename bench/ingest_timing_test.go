package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/server"
)

// BenchmarkIngest runs the workload of `peakline bench ingest` in one
// process: the same bodies, sent over loopback from 2 senders (series
// sharded as a remote-write queue shards them) into a fresh server on a
// fresh store per iteration, so that a CPU profile shows the server's
// write path:
//
//	go test -run '^$' -bench BenchmarkIngest -benchtime 3x -cpuprofile cpu.out ./bench/
//
// ns/sample is wall time; cpu-ns/sample is this process's CPU (the
// senders' share included, small: their bodies are encoded before the
// clock starts). Every sample sent must be counted as stored.
func BenchmarkIngest(b *testing.B) {
	spec := ingestSpec{jobs: 50, samplesPerJob: 40_000, tasks: 100, batch: 10_000, shards: 2,
		endMs: time.Now().Add(-time.Minute).UnixMilli(), seed: 1}
	set, err := buildIngestSet(spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct {
		name, path string
		headers    map[string]string
		bodies     [][][]byte
	}{
		{"remote-write", "/api/v1/write", rwHeaders, set.rw},
		{"json", "/api/v1/ingest", jsonHeaders, set.plJSON},
	} {
		b.Run(fmt.Sprintf("path=%s/jobs=%d/n=%d", p.name, spec.jobs, set.samples), func(b *testing.B) {
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				reg := prometheus.NewRegistry()
				srv, err := server.Open(server.Setup{DataDir: b.TempDir()}, nil, reg)
				if err != nil {
					b.Fatal(err)
				}
				hs := httptest.NewServer(srv.Handler())
				c0 := processCPU()
				b.StartTimer()
				_, failed, firstErr := sendShards(context.Background(), hs.URL+p.path, p.headers, p.bodies)
				b.StopTimer()
				cpu += processCPU() - c0
				if failed > 0 {
					b.Fatalf("%d requests failed, the first: %v", failed, firstErr)
				}
				m, err := scrape(context.Background(), hs.URL+"/metrics", "peakline_ingested_samples_total")
				if err != nil {
					b.Fatal(err)
				}
				// JSON ingest counts task records apart from samples.
				if got := m["peakline_ingested_samples_total"]; p.name == "remote-write" && int(got) != set.samples {
					b.Fatalf("stored %v samples, sent %d", got, set.samples)
				}
				hs.Close()
				if err := srv.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(set.samples) * float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/sample")
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/sample")
		})
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
