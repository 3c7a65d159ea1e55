package history

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestWaited(t *testing.T) {
	cols := []StallColumn{
		// Task 0: 0.2 + 0.3 s stalled over its 2 s; task 1: 1.5 s over 1 s (capped).
		{Resource: "cpu_stall", Vs: []float64{0.2, 0.3, 0.5, 1}, Task: []int32{0, 0, 1, 1}},
		{Resource: "memory_stall", Vs: []float64{0, 0.1}, Task: []int32{0, 0}},
		{Resource: "node_load", Vs: []float64{2, 4}, Task: []int32{1, 1}},
		{Resource: "cpu", Vs: []float64{99}, Task: []int32{0}}, // not a stall resource
	}
	got := Waited(cols, []int64{2000, 1000, 500})
	want := []map[string]float64{{"cpu": 0.25, "memory": 0.05}, {"cpu": 1, "node_load": 3}, nil}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Waited = %v, want %v", got, want)
	}
	if got := Waited(cols[:1], []int64{0, 1000}); got[0] != nil {
		t.Fatalf("a task of zero duration: Waited = %v, want no share", got[0])
	}
}

// TestFlagContended pins the exact findings of one task over five runs:
// a run whose task waited for a CPU well beyond its usual share has its
// duration and CPU findings contended, not flagged; its memory finding
// stays a regression; a run as slow without the stall is flagged.
func TestFlagContended(t *testing.T) {
	const mib = 1 << 20
	run := func(id string, durMs int64, cpuMax, memMiB, stall float64, waited bool) Run {
		m := memMiB * mib
		tr := TaskRun{Name: "fork sleepers", Play: "p", Path: "site.yml:3", StartMs: 1000, EndMs: 1000 + durMs,
			Max: Stats{CPU: &cpuMax, Memory: &m}, CPUSeconds: cpuMax / 100 * float64(durMs) / 1000}
		if waited {
			tr.Waited = map[string]float64{StallCPU: stall, StallMemory: 0}
		}
		return Run{JobID: id, Status: "successful", Tasks: []TaskRun{tr}}
	}
	flags := func(runs []Run, rule Rule) string {
		var got []string
		for _, r := range Flag(runs, Match(runs)[0], rule) {
			s := fmt.Sprintf("%s %s %v", r.JobID, r.Metric, r.Value)
			if r.Contended {
				s += fmt.Sprintf(" contended %s %v/%v", r.Stall.Signal, r.Stall.Share, r.Stall.Baseline)
			} else if r.Stall != nil {
				s += " (stall without contended)"
			}
			got = append(got, s)
		}
		return strings.Join(got, ", ")
	}
	f := func(name string, runs []Run, rule Rule, want string) {
		t.Helper()
		if got := flags(runs, rule); got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
	base := []Run{run("1", 10_000, 60, 100, 0.05, true), run("2", 10_200, 61, 100, 0.04, true), run("3", 9_900, 59, 101, 0.06, true), run("4", 10_100, 60, 100, 0.05, true)}

	// Run 5 waited 45 % of the task's time against a usual 5 %: slower
	// and burstier because of the node, and heavier on memory on its own.
	contended := append(base[:4:4], run("5", 20_000, 95, 300, 0.45, true))
	f("contended", contended, DefaultRule(),
		"5 duration_ms 20000 contended cpu 0.45/0.05, 5 cpu_max 95 contended cpu 0.45/0.05, 5 cpu_seconds 19 contended cpu 0.45/0.05, 5 memory_max 3.145728e+08")
	// Without the stall rule, the same run is three regressions more.
	off := DefaultRule()
	off.MaxStall = 0
	f("rule off", contended, off, "5 duration_ms 20000, 5 cpu_max 95, 5 cpu_seconds 19, 5 memory_max 3.145728e+08")
	// The same slow run with its usual stall is a regression.
	f("not stalled", append(base[:4:4], run("5", 20_000, 95, 100, 0.07, true)), DefaultRule(),
		"5 duration_ms 20000, 5 cpu_max 95, 5 cpu_seconds 19")
	// Within the threshold (0.14 − 0.05 ≤ 0.10): a regression.
	f("within the threshold", append(base[:4:4], run("5", 20_000, 60, 100, 0.14, true)), DefaultRule(), "5 duration_ms 20000, 5 cpu_seconds 12")
	// A run that measured no stall is judged as before.
	f("no figures", append(base[:4:4], run("5", 20_000, 60, 100, 0, false)), DefaultRule(), "5 duration_ms 20000, 5 cpu_seconds 12")
	// A quiet run among busy ones: its CPU peaks higher (contended, the
	// others were held back), while twice the CPU time is its own.
	busy := []Run{run("1", 10_000, 60, 100, 0.4, true), run("2", 10_000, 61, 100, 0.42, true), run("3", 10_000, 59, 100, 0.38, true), run("4", 10_000, 60, 100, 0.4, true)}
	f("quiet run among busy ones", append(busy, run("5", 10_000, 95, 100, 0.02, true)), DefaultRule(),
		"5 cpu_max 95 contended cpu 0.02/0.4, 5 cpu_seconds 9.5")
	// Older runs without figures: the stall is judged against 0.
	old := []Run{run("1", 10_000, 60, 100, 0, false), run("2", 10_000, 60, 100, 0, false), run("3", 10_000, 60, 100, 0, false)}
	f("baseline without figures", append(old, run("4", 20_000, 60, 100, 0.3, true)), DefaultRule(), "4 duration_ms 20000 contended cpu 0.3/0, 4 cpu_seconds 12 contended cpu 0.3/0")
}

func TestContended(t *testing.T) {
	f := func(share, usual, maxStall float64, wantMore, wantLess bool) {
		t.Helper()
		more, less := Contended(share, usual, maxStall)
		if more != wantMore || less != wantLess {
			t.Errorf("Contended(%v, %v, %v) = %v, %v; want %v, %v", share, usual, maxStall, more, less, wantMore, wantLess)
		}
	}
	f(0.45, 0.05, 0.1, true, false)
	f(0.14, 0.05, 0.1, false, false) // 0.86 unstalled ≥ 0.9 × 0.95
	f(0.15, 0.05, 0.1, true, false)  // 0.85 < 0.855
	// A node busy in every run: 0.70 usually, 0.78 with a hog is 27 %
	// less unstalled time; 0.72 is noise.
	f(0.78, 0.70, 0.1, true, false)
	f(0.72, 0.70, 0.1, false, false)
	f(0.05, 0.45, 0.1, false, true)
	f(1, 0.5, 0.1, true, false)
	f(0.9, 0.05, 0, false, false) // 0 judges none
}

func TestJudgedStall(t *testing.T) {
	f := func(w map[string]float64, wantSig string, wantShare float64, wantOK bool) {
		t.Helper()
		sig, share, ok := judgedStall(w)
		if sig != wantSig || math.Abs(share-wantShare) > 1e-12 || ok != wantOK {
			t.Errorf("judgedStall(%v) = %q, %v, %v; want %q, %v, %v", w, sig, share, ok, wantSig, wantShare, wantOK)
		}
	}
	f(map[string]float64{StallCPU: 0.3, StallNodeCPU: 0.9}, StallCPU, 0.3, true)
	f(map[string]float64{StallNodeCPU: 0.9, StallNodeLoad: 3}, StallNodeCPU, 0.9, true)
	f(map[string]float64{StallNodeLoad: 4}, StallNodeLoad, 0.75, true)
	f(map[string]float64{StallNodeLoad: 0.5}, StallNodeLoad, 0, true)
	f(map[string]float64{StallMemory: 0.5}, "", 0, false)
	f(nil, "", 0, false)
}
