package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peakline/peakline/downsample"
)

// runBench runs `bench ARGS --no-progress --json F --svg G` and returns
// the table, the measurements and the SVG.
func runBench(t *testing.T, args ...string) (string, []Measurement, string) {
	t.Helper()
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.svg")
	cmd := Command()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--no-progress", "--json", jsonPath, "--svg", svgPath))
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var ms []Measurement
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatalf("--json: %v", err)
	}
	if len(ms) == 0 {
		t.Fatal("--json holds no measurement")
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, string(svg))
	if !strings.Contains(out.String(), "# machine: ") {
		t.Fatalf("no machine line in the table:\n%s", out.String())
	}
	return out.String(), ms, string(svg)
}

// find returns the measurements of a metric and subject.
func find(ms []Measurement, metric, subject string) []Measurement {
	var out []Measurement
	for _, m := range ms {
		if m.Metric == metric && (subject == "" || m.Subject == subject) {
			out = append(out, m)
		}
	}
	return out
}

// needTool fails (or, under -short, skips) when a peer binary is missing.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := FindTool(name); err != nil {
		if testing.Short() {
			t.Skipf("%v; skipped under -short", err)
		}
		t.Fatalf("%v", err)
	}
}

func TestDownsampleCommand(t *testing.T) {
	table, ms, svg := runBench(t, "downsample", "--quick", "--sizes", "3000", "--points", "100,400", "--shapes", "randomwalk,spiky", "--min-time", "1ms")
	for _, a := range downsample.Names() {
		got := find(ms, "time per input point", a)
		if len(got) != 4 {
			t.Fatalf("%s: %d ns/point measurements, want 2 shapes x 2 n", a, len(got))
		}
		for _, m := range got {
			if m.Peer != peerLTTB || !(m.Value > 0) || !(m.PeerValue > 0) || !(m.Speedup > 0) {
				t.Fatalf("bad measurement %+v", m)
			}
		}
	}
	// go-lttb is the same algorithm as lttb: the same picture.
	for _, m := range find(ms, "pixel error", "lttb") {
		if m.Value != m.PeerValue {
			t.Fatalf("%s: lttb pixel error %v, go-lttb %v", m.Workload, m.Value, m.PeerValue)
		}
	}
	if !strings.Contains(table, "randomwalk/3000/n=100") || !strings.Contains(svg, "go-lttb") {
		t.Fatalf("table or SVG lacks the workloads:\n%s", table)
	}
}

func TestGraphCommand(t *testing.T) {
	_, ms, _ := runBench(t, "graph", "--quick", "--sizes", "1e3", "--tasks", "20", "--warm", "2", "--cold", "1")
	for _, subject := range []string{"graph in-process cached", "graph in-process uncached", "graph HTTP gzip cached", "graph cold store open", "graph cold process"} {
		got := find(ms, "p50 latency", subject)
		if len(got) != 1 || !(got[0].Value > 0) || !(got[0].PeerValue > 0) {
			t.Fatalf("%s: %+v", subject, got)
		}
	}
	wire := find(ms, "bytes on the wire (gzip)", "")
	if len(wire) != 1 || wire[0].Value < 100 || wire[0].Value > 100_000 {
		t.Fatalf("wire bytes: %+v", wire)
	}
}

func TestIngestCommandPeaklineOnly(t *testing.T) {
	table, ms, _ := runBench(t, "ingest", "--quick", "--peers", "", "--jobs", "2", "--samples", "500", "--tasks", "4")
	got := find(ms, "ingest throughput", "")
	if len(got) != 3 {
		t.Fatalf("throughput rows: %+v", got)
	}
	for _, m := range got {
		if !(m.Value > 0) || !strings.HasSuffix(m.Peer, "(not run)") {
			t.Fatalf("bad row %+v", m)
		}
	}
	for _, m := range find(ms, "disk after compaction", "") {
		if !(m.Value > 0.5 && m.Value < 100) {
			t.Fatalf("bytes per sample on disk: %+v", m)
		}
	}
	// Every sample sent was stored: both Peakline runs count them.
	if !strings.Contains(table, "peakline remote write 3") {
		t.Fatalf("no stored count in the notes:\n%s", table)
	}
}

func TestIngestCommandAgainstPeers(t *testing.T) {
	needTool(t, toolPrometheus)
	needTool(t, toolVM)
	_, ms, _ := runBench(t, "ingest", "--quick", "--require-peers", "--jobs", "2", "--samples", "500", "--tasks", "4")
	got := find(ms, "ingest throughput", "")
	if len(got) != 3 {
		t.Fatalf("throughput rows: %+v", got)
	}
	for _, m := range append(got, find(ms, "disk after compaction", "")...) {
		if !(m.Value > 0) || !(m.PeerValue > 0) || !(m.Speedup > 0) {
			t.Fatalf("bad row %+v", m)
		}
	}
}

func TestSoakCommand(t *testing.T) {
	table, ms, _ := runBench(t, "soak", "--quick", "--jobs", "3", "--duration", "3s", "--job-length", "2s", "--flush", "250ms")
	stored := find(ms, "count check", "samples stored")
	if len(stored) != 1 || stored[0].Value == 0 || stored[0].Value != stored[0].PeerValue {
		t.Fatalf("count check: %+v\n%s", stored, table)
	}
	if lost := find(ms, "count check", "samples lost (sent, not stored)"); len(lost) != 1 || lost[0].Value != 0 {
		t.Fatalf("lost samples: %+v", lost)
	}
	if !strings.Contains(table, "every sample stored exactly once") {
		t.Fatalf("no verdict:\n%s", table)
	}
	if len(find(ms, "graph latency under load vs idle", "")) != 4 {
		t.Fatalf("graph rows: %+v", find(ms, "graph latency under load vs idle", ""))
	}
}

func TestSeriesCommand(t *testing.T) {
	needTool(t, toolPrometheus)
	needTool(t, toolVM)
	_, ms, _ := runBench(t, "series", "--quick", "--require-peers", "--jobs", "10", "--tasks", "5", "--settle", "500ms")
	held := find(ms, "series held", "peakline")
	if len(held) != 2 {
		t.Fatalf("series rows: %+v", held)
	}
	for _, m := range held {
		if m.Value == 0 || m.Value != m.PeerValue {
			t.Fatalf("servers hold different series counts: %+v", m)
		}
	}
}

func TestHistoryCommand(t *testing.T) {
	_, ms, _ := runBench(t, "history", "--quick", "--runs", "5", "--tasks", "10", "--samples", "500", "--requests", "2")
	for _, metric := range []string{"p50 latency", "p99 latency", "max latency"} {
		got := find(ms, metric, "history")
		if len(got) != 1 || !(got[0].Value > 0) || got[0].PeerValue != 100 || got[0].Workload != "5 runs × 10 tasks, 500 samples/resource/run" {
			t.Fatalf("%s: %+v", metric, got)
		}
	}
}
