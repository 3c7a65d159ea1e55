package history

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestRuleCheck(t *testing.T) {
	rule := DefaultRule()
	f := func(metric string, value float64, others []float64, wantBase float64, want bool) {
		t.Helper()
		before := slices.Clone(others)
		base, got := rule.Check(metric, value, others)
		if got != want || (base != wantBase && !(math.IsNaN(base) && math.IsNaN(wantBase))) {
			t.Errorf("Check(%s, %v, %v) = %v, %v; want %v, %v", metric, value, others, base, got, wantBase, want)
		}
		if !slices.Equal(before, others) {
			t.Errorf("Check modified others: %v, was %v", others, before)
		}
	}
	const mib = 1 << 20
	// The example: 232 MB usually, 640 MB now.
	f(MetricMemoryMax, 640e6, []float64{232e6, 230e6, 235e6, 232e6}, 232e6, true)
	// Not enough other runs.
	f(MetricMemoryMax, 640e6, []float64{232e6, 230e6}, 231e6, false)
	f(MetricMemoryMax, 640e6, nil, math.NaN(), false)
	// Below the factor: 1.4× is no regression, however steady.
	f(MetricMemoryMax, 1.4*200*mib, []float64{200 * mib, 200 * mib, 200 * mib}, 200*mib, false)
	f(MetricMemoryMax, 1.5*200*mib, []float64{200 * mib, 200 * mib, 200 * mib}, 200*mib, true)
	// Within the usual spread of a noisy task: 2× the median but the
	// others swing as much.
	f(MetricDuration, 20_000, []float64{5_000, 10_000, 15_000, 9_000, 11_000, 4_000, 16_000}, 10_000, false)
	// Beyond it.
	f(MetricDuration, 40_000, []float64{5_000, 10_000, 15_000, 9_000, 11_000, 4_000, 16_000}, 10_000, true)
	// Floors: a 40 ms task taking 90 ms; 10 MiB to 30 MiB; 2 to 6 processes;
	// 5% to 20% CPU; 0.1 to 0.9 CPU seconds.
	f(MetricDuration, 90, []float64{40, 41, 39, 40}, 40, false)
	f(MetricMemoryMax, 30*mib, []float64{10 * mib, 10 * mib, 10 * mib}, 10*mib, false)
	f(MetricPIDsMax, 6, []float64{2, 2, 2}, 2, false)
	f(MetricPIDsMax, 7, []float64{2, 2, 2}, 2, true)
	f(MetricCPUMax, 20, []float64{5, 5, 6}, 5, false)
	f(MetricCPUMax, 26, []float64{5, 5, 6}, 5, true)
	f(MetricCPUSeconds, 0.9, []float64{0.1, 0.1, 0.1}, 0.1, false)
	f(MetricCPUSeconds, 1.2, []float64{0.1, 0.1, 0.1}, 0.1, true)
	// Lower is never a regression.
	f(MetricMemoryMax, 10*mib, []float64{200 * mib, 200 * mib, 200 * mib}, 200*mib, false)
	// One odd run among the others does not raise the baseline.
	f(MetricMemoryMax, 600*mib, []float64{200 * mib, 200 * mib, 900 * mib, 200 * mib}, 200*mib, true)
	// A zero baseline: any value past the floor.
	f(MetricPIDsMax, 9, []float64{0, 0, 0}, 0, true)
	// Even count: the median is the mean of the middle two.
	f(MetricDuration, 10_000, []float64{1000, 2000, 3000, 4000}, 2500, true)
}

// Zero flags on runs without a change: 200 tasks whose every metric
// varies from run to run by a log-normal factor of σ 5%, with one run on
// a loaded host (every duration 1.3×), over windows of 5, 10 and 20
// runs; the same tasks with one run's memory made 3× heavier are
// flagged there only. At σ 10% a 1.5× value is a 4σ event and the rule
// is expected to flag a few in 10^4 checks: the rate is bounded.
//
// Measured over 10 seeds (350,000 checks each): σ 5% with the loaded
// run, 2 flags (cpu_seconds of the loaded run); σ 10%, 21 flags; σ 10%
// with the loaded run, 84 (52 durations of the loaded run). Templates
// that noisy want a higher serve --regression-factor.
func TestNoFalseAlarmsOnNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	rule := DefaultRule()
	const nTasks = 200
	for _, c := range []struct {
		sigma, load float64
		maxRate     float64
	}{{0.05, 1.3, 0}, {0.10, 1, 2e-4}} {
		for _, nRuns := range []int{5, 10, 20} {
			runs := noisyRuns(rng, nRuns, nTasks, c.sigma, c.load)
			flags := 0
			for _, task := range Match(runs) {
				flags += len(Flag(runs, task, rule))
			}
			checks := nRuns * nTasks * len(Metrics)
			if float64(flags) > c.maxRate*float64(checks) {
				t.Errorf("runs=%d sigma=%v load=%v: %d flags in %d checks on runs without a change, want at most %v of them", nRuns, c.sigma, c.load, flags, checks, c.maxRate)
			}
			if c.maxRate > 0 {
				continue
			}
			// One heavier task in the newest run is found, and only it.
			heavy := &runs[nRuns-1].Tasks[17]
			*heavy.Max.Memory *= 3
			var got []string
			for _, task := range Match(runs) {
				for _, r := range Flag(runs, task, rule) {
					got = append(got, fmt.Sprintf("%s %s %s", task.Name, r.JobID, r.Metric))
				}
			}
			if want := fmt.Sprintf("task 17 run%d memory_max", nRuns-1); len(got) != 1 || got[0] != want {
				t.Errorf("runs=%d sigma=%v: flags %q, want [%q]", nRuns, c.sigma, got, want)
			}
		}
	}
}

// noisyRuns makes nRuns runs of nTasks tasks whose values vary by a
// log-normal factor of sigma around a per-task level; run 1 takes load
// times as long throughout (a loaded host).
func noisyRuns(rng *rand.Rand, nRuns, nTasks int, sigma, load float64) []Run {
	type level struct{ dur, cpu, mem, pids float64 }
	levels := make([]level, nTasks)
	for i := range levels {
		levels[i] = level{
			dur:  math.Exp(rng.Float64()*8) + 50, // 50 ms to 50 s
			cpu:  5 + rng.Float64()*150,
			mem:  (20 + rng.Float64()*500) * (1 << 20),
			pids: float64(1 + rng.IntN(30)),
		}
	}
	noise := func() float64 { return math.Exp(rng.NormFloat64() * sigma) }
	runs := make([]Run, nRuns)
	for r := range runs {
		runs[r].JobID = fmt.Sprintf("run%d", r)
		at := int64(1_796_000_000_000 + r*3_600_000)
		slow := 1.0
		if r == 1 {
			slow = load
		}
		for i, l := range levels {
			dur := int64(l.dur * noise() * slow)
			cpu := l.cpu * noise()
			tr := TaskRun{
				Name: fmt.Sprintf("task %d", i), Play: "p", Path: fmt.Sprintf("/r/project/site.yml:%d", i*3),
				StartMs: at, EndMs: at + dur,
				Max:        StatsOf(map[string]float64{"cpu": cpu, "memory": l.mem * noise(), "pids": math.Round(l.pids * noise())}),
				CPUSeconds: cpu / 100 * float64(dur) / 1000 * 0.6,
			}
			tr.Mean = tr.Max
			runs[r].Tasks = append(runs[r].Tasks, tr)
			at += dur
		}
	}
	return runs
}

func TestCPUSeconds(t *testing.T) {
	f := func(ts []int64, vs []float64, task []int32, nTasks int, want []float64) {
		t.Helper()
		got := CPUSeconds(nil, ts, vs, task, nTasks)
		if len(got) != len(want) {
			t.Fatalf("CPUSeconds = %v, want %v", got, want)
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Fatalf("CPUSeconds = %v, want %v", got, want)
			}
		}
	}
	// 100% for 4 × 250 ms (the first sample counts the median interval).
	f([]int64{0, 250, 500, 750}, []float64{100, 100, 100, 100}, []int32{0, 0, 0, 0}, 1, []float64{1})
	// Two tasks: each sample to its own.
	f([]int64{1000, 1250, 1500, 1750}, []float64{200, 200, 50, 50}, []int32{0, 0, 1, 1}, 2, []float64{1, 0.25})
	// A 10 s gap within a task counts four median intervals (1 s).
	f([]int64{0, 250, 500, 10500}, []float64{100, 100, 100, 100}, []int32{0, 0, 0, 0}, 1, []float64{1.75})
	// A task's first sample counts at most one median interval, however
	// far the previous task's last sample is: cgroup_perf_recap's
	// per-task files, as in real run 9001 of a small playbook, where
	// "wait a bit" began 526 ms after "role task"'s last sample at 198%
	// (0.5 s of CPU, not 1.04).
	f([]int64{0, 250, 500, 1026, 1276}, []float64{50, 50, 50, 198, 112}, []int32{0, 0, 0, 1, 1}, 2, []float64{0.375, 0.775})
	f([]int64{0, 250, 500, 10500}, []float64{100, 100, 100, 100}, []int32{0, 0, 0, 1}, 2, []float64{0.75, 0.25})
	// No samples; a task without samples.
	f(nil, nil, nil, 2, []float64{0, 0})
	f([]int64{5}, []float64{100}, []int32{1}, 3, []float64{0, 0, 0})
	// Samples of no task (index out of range) are skipped.
	f([]int64{0, 100}, []float64{100, 100}, []int32{-1, 0}, 1, []float64{0.1})
}

// Flag's shortcut (one sort per metric, Check only past the factor and
// the floor) flags exactly what checking every run with Check flags.
func TestFlagMatchesCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	rule := DefaultRule()
	for round := range 30 {
		runs := noisyRuns(rng, 3+round%15, 40, 0.4, 1)
		// Some tasks missing in some runs, some values tied.
		for r := range runs {
			if r%4 == 3 {
				runs[r].Tasks = runs[r].Tasks[:30]
			}
			ten := 10.0
			runs[r].Tasks[5].Max.PIDs = &ten
			if r%5 == 2 {
				runs[r].Status = "running"
			}
		}
		for _, task := range Match(runs) {
			got := Flag(runs, task, rule)
			var want []string
			for _, m := range Metrics {
				for ri, at := range task.At {
					if at < 0 {
						continue
					}
					v, ok := runs[ri].Tasks[at].Value(m)
					if !ok {
						continue
					}
					var others []float64
					for rj, bt := range task.At {
						if rj != ri && bt >= 0 && !Unfinished(runs[rj].Status) {
							o, _ := runs[rj].Tasks[bt].Value(m)
							others = append(others, o)
						}
					}
					if _, bad := rule.Check(m, v, others); bad {
						want = append(want, runs[ri].JobID+" "+m)
					}
				}
			}
			var gotS []string
			for _, r := range got {
				gotS = append(gotS, r.JobID+" "+r.Metric)
			}
			slices.Sort(gotS)
			slices.Sort(want)
			if !slices.Equal(gotS, want) {
				t.Fatalf("round %d %s: Flag %q, Check on every run %q", round, task.Key, gotS, want)
			}
		}
	}
}

// A run still going is checked against the finished runs, but is no
// baseline for them: its tasks are cut short, so it would pull the usual
// value down and make the next finished run look heavy.
func TestFlagRunningRun(t *testing.T) {
	const mib = 1 << 20
	run := func(id, status string, memMiB float64, durMs int64) Run {
		m := memMiB * mib
		return Run{JobID: id, Status: status, Tasks: []TaskRun{{Name: "allocate cache", Play: "web", StartMs: 1000, EndMs: 1000 + durMs, Max: Stats{Memory: &m}}}}
	}
	flags := func(runs []Run) string {
		var got []string
		for _, r := range Flag(runs, Match(runs)[0], DefaultRule()) {
			got = append(got, fmt.Sprintf("%s %s %v/%v", r.JobID, r.Metric, r.Value/mib, r.Baseline/mib))
		}
		return strings.Join(got, ", ")
	}
	f := func(name string, runs []Run, want string) {
		t.Helper()
		if got := flags(runs); got != want {
			t.Errorf("%s: flags %q, want %q", name, got, want)
		}
	}
	// Counted as a baseline, the three running runs cut short at 10 MiB
	// would make the usual value 55 MiB with a wide spread, and the
	// 200 MiB run would pass unflagged.
	f("running runs are no baseline", []Run{
		run("1", "successful", 100, 5000), run("2", "running", 10, 100), run("3", "failed", 100, 5000),
		run("4", "pending", 10, 100), run("5", "successful", 100, 5000), run("6", "running", 10, 100),
		run("7", "successful", 200, 5000),
	}, "7 memory_max 200/100")
	// A running run that is already heavier than usual is flagged.
	f("a running run is checked", []Run{
		run("1", "successful", 100, 5000), run("2", "successful", 101, 5000), run("3", "successful", 99, 5000),
		run("4", "running", 400, 2000),
	}, "4 memory_max 400/100")
	// Only two finished runs: too few to judge anything.
	f("too few finished runs", []Run{
		run("1", "successful", 100, 5000), run("2", "running", 100, 5000), run("3", "successful", 100, 5000),
		run("4", "running", 400, 2000),
	}, "")
	// Unknown and final statuses count as finished.
	for _, st := range []string{"", "successful", "failed", "error", "canceled", "timeout"} {
		if Unfinished(st) {
			t.Errorf("Unfinished(%q) = true, want false", st)
		}
	}
	for _, st := range []string{"new", "pending", "waiting", "running"} {
		if !Unfinished(st) {
			t.Errorf("Unfinished(%q) = false, want true", st)
		}
	}
}
