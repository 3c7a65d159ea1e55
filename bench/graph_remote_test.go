package bench

import (
	"strings"
	"testing"
)

// TestGraphCommandRemote runs graph --remote on one small job: written
// through a stateless serve (this test binary, main_test.go) into a real
// VictoriaMetrics, whose raw reads and the graph must each account for
// every sample of the job before anything is timed (graphRemoteSize).
func TestGraphCommandRemote(t *testing.T) {
	needTool(t, toolVM)
	table, ms, _ := runBench(t, "graph", "--remote", "--sizes", "1e3", "--tasks", "10", "--warm", "2", "--cold", "1")
	want := map[string]int{ // subject: rows, one per engine read it is set against
		"graph via stateless peakline, cached":        2,
		"graph via stateless peakline, uncached":      2,
		"graph via stateless peakline, fresh replica": 1,
	}
	for subject, n := range want {
		got := find(ms, "p50 latency", subject)
		if len(got) != n {
			t.Fatalf("%s: %d p50 rows, want %d: %+v", subject, len(got), n, got)
		}
		for _, m := range got {
			if m.Workload != "1e3x10" || !strings.HasPrefix(m.Peer, "victoriametrics raw read: ") || !(m.Value > 0) || !(m.PeerValue > 0) || !(m.Speedup > 0) {
				t.Fatalf("bad row %+v", m)
			}
		}
	}
	// The graph is bounded by its points; the raw read grows with the job.
	for _, m := range find(ms, "bytes on the wire (gzip)", "") {
		if m.Value < 100 || m.Value > 100_000 || m.PeerValue < 1000 {
			t.Fatalf("wire bytes: %+v", m)
		}
	}
	if !strings.Contains(table, "/api/v1/export") {
		t.Fatalf("the table does not name the engine's reads:\n%s", table)
	}
}
