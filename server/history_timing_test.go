package server_test

import (
	"testing"

	"github.com/peakline/peakline/bench"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// BenchmarkHistory: the history of 20 runs × 200 tasks (10k samples per
// resource per run, compacted) from a warm store, in process. Target:
// under 100 ms. Compare runs with
//
//	go test -run '^$' -bench History -count 6 ./server/ | tee new.txt; benchstat old.txt new.txt
func BenchmarkHistory(b *testing.B) {
	store, err := tsdb.Open(b.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	if err := bench.TemplateRuns(b.Context(), store, 20, 200, 10_000, 1); err != nil {
		b.Fatal(err)
	}
	if err := store.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{}, store, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bench.HistoryRequest(srv.Handler(), bench.HistoryTemplate, 20); err != nil { // warms the cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		if n, err = bench.HistoryRequest(srv.Handler(), bench.HistoryTemplate, 20); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "bytes/op")
}
