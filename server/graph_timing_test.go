package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// BenchmarkGraph measures the graph endpoint on a finished synthetic job,
// in process and over loopback HTTP, per job size, and in process with the
// decoded-job cache off (every request decodes the job from the blocks):
//
//	go test -run '^$' -bench BenchmarkGraph -benchmem ./server/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkGraph(b *testing.B) {
	for _, size := range []int{10_000, 1_000_000} {
		job := workload.AnsibleJob("bench", workload.JobSpec{Tasks: 200, SamplesPerResource: size, StartMs: 1796009960000}, 1)
		// The store's clock stands at the job's end: a long synthetic job
		// reaches past the wall clock, beyond the admission window.
		jobEnd := time.UnixMilli(job.LastEventMs)
		dir := b.TempDir()
		store, err := tsdb.Open(dir, tsdb.Options{Now: func() time.Time { return jobEnd }}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Append(context.Background(), jobBatch(job)); err != nil {
			b.Fatal(err)
		}
		if err := store.Compact(context.Background()); err != nil {
			b.Fatal(err)
		}
		srv, err := server.New(server.Config{}, store, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		h := srv.Handler()
		hs := httptest.NewServer(h)
		name := fmt.Sprintf("samples=%.0e", float64(size))
		b.Run(name+"/in-process", func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/jobs/bench/graph?points=1000", nil))
				if rec.Code != 200 || rec.Body.Len() < 1000 {
					b.Fatalf("graph: %d, %d bytes", rec.Code, rec.Body.Len())
				}
				n = rec.Body.Len()
			}
			b.ReportMetric(float64(n), "bytes/payload")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(3*size), "ns/sample")
		})
		b.Run(name+"/http-gzip", func(b *testing.B) {
			b.ReportAllocs()
			var wire int64
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/jobs/bench/graph?points=1000", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				resp, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				wire, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || wire < 100 {
					b.Fatalf("graph: %d, %d bytes", resp.StatusCode, wire)
				}
			}
			b.ReportMetric(float64(wire), "bytes/wire")
		})
		hs.Close()
		store.Close()
		// Uncached: the same job decoded from the blocks on every request.
		store, err = tsdb.Open(dir, tsdb.Options{CacheSamples: -1}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		srv, err = server.New(server.Config{}, store, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		h = srv.Handler()
		b.Run(name+"/in-process-uncached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/jobs/bench/graph?points=1000", nil))
				if rec.Code != 200 || rec.Body.Len() < 1000 {
					b.Fatalf("graph: %d, %d bytes", rec.Code, rec.Body.Len())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(3*size), "ns/sample")
		})
		store.Close()
	}
}
