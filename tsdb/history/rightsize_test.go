package history

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const miB = 1 << 20

// sizedRun makes a run of two tasks: "allocate cache" peaking at
// peakMiB with 20 % CPU for 2 s, then "compress" at cpuMean % for 1 s
// holding 50 MiB.
func sizedRun(id int, status string, peakMiB, cpuMean float64, s Sizing) Run {
	start := int64(1796010000000 + id*100000)
	f := func(v float64) *float64 { return &v }
	return Run{JobID: fmt.Sprint(id), StartMs: start, EndMs: start + 3000, Status: status, Sizing: s, Tasks: []TaskRun{
		{Counter: 18, Name: "allocate cache", Play: "web", Path: "/runner/project/site.yml:10", StartMs: start, EndMs: start + 2000,
			Max: Stats{CPU: f(30), Memory: f(peakMiB * miB)}, Mean: Stats{CPU: f(20), Memory: f(peakMiB * miB / 2)}, CPUSeconds: 0.4},
		{Counter: 21, Name: "compress", Play: "web", Path: "/runner/project/site.yml:20", StartMs: start + 2000, EndMs: start + 3000,
			Max: Stats{CPU: f(cpuMean + 10), Memory: f(50 * miB)}, Mean: Stats{CPU: f(cpuMean), Memory: f(50 * miB)}, CPUSeconds: cpuMean / 100},
	}}
}

// The rule on a window with every case: forks 1 to 5 on 8 hosts whose
// peaks lie on 100 MiB + 50 MiB × forks, an OOM-killed run, a run at its
// cap, a canceled run and one still going.
func TestRightsize(t *testing.T) {
	const img = "quay.io/ansible/awx-ee:24.6.1"
	sz := func(forks int) Sizing {
		return Sizing{Forks: forks, Hosts: 8, EEImage: img, ProjectRevision: "3f2c9e1a7b6d4c0e"}
	}
	oom := sz(5)
	oom.MemoryLimitBytes, oom.OOMKills, oom.OOMCounter = 384*miB, 1, 18
	capped := sz(5)
	capped.MemoryLimitBytes = 360 * miB
	runs := []Run{
		sizedRun(1001, "successful", 150, 91, sz(1)),
		sizedRun(1002, "successful", 200, 92, sz(2)),
		sizedRun(1090, "canceled", 20, 10, sz(2)),
		sizedRun(1003, "successful", 250, 93, sz(3)),
		sizedRun(1004, "successful", 300, 94, sz(4)),
		sizedRun(1005, "failed", 384, 95, oom),
		sizedRun(1006, "successful", 350, 96, sz(5)),
		sizedRun(1007, "successful", 350, 97, capped),
		sizedRun(1091, "running", 30, 10, sz(5)),
	}
	before := fmt.Sprint(runs)
	got := Rightsize("7", runs, SizeOptions{})
	if fmt.Sprint(runs) != before {
		t.Fatal("Rightsize modified its input")
	}
	// Weights of the 7 runs used, newest first: 2^(−k/10) = 1, 0.933,
	// 0.871, 0.812, 0.758, 0.707, 0.660 (total 5.741). Peaks ascending:
	// 150 (0.660), 200, 250, 300, 350, 350, 384 MiB (0.871): 95 % of the
	// weight (5.454) is reached only at 384 MiB, so the target is 384 MiB
	// and the request 384 × 1.15 = 441.6 MiB; the OOM kill at 384 MiB
	// bumps it to max(384 + 100, 384 × 1.2) = 484 MiB.
	pf, base, r2 := int64(50*miB), int64(100*miB), 1.0
	maxForks := 6 // (484 / 1.15 − 100) / 50 = 6.4
	want := RightSize{
		TemplateID: "7", Runs: 9, RunsUsed: 7, LeftOut: LeftOut{Unfinished: 1, Canceled: 1}, Confidence: "medium",
		Memory: MemoryAdvice{RequestBytes: 484 * miB, LimitBytes: 484 * miB, TargetBytes: 384 * miB,
			// Unweighted: p50 300 MiB; p95 at rank 5.7 = 350 + 0.7 × 34 MiB.
			P50Bytes: 300 * miB, P95Bytes: 391957708, MaxBytes: 384 * miB, CurrentLimitBytes: 360 * miB,
			Basis:    "OOM kill of job 1005 at a limit of 384 MiB: max(limit + 100 MiB, limit × 1.2)",
			DrivenBy: &DrivenBy{Task: "allocate cache", Key: "site.yml:10 allocate cache", JobID: "1005", Counter: 18, PeakBytes: 384 * miB}},
		// Run time at 20 % is 2/3 of the total; the 90th percentile falls
		// among the "compress" means 91..97 %, which by weight reach it at
		// 96 % (see TestWeightedQuantile for the rule): 960 millicores.
		CPU: CPUAdvice{RequestMillicores: 960, P90Millicores: 960, PeakMillicores: 1070,
			Basis: "p90 of run time at each task's mean CPU (recency-weighted); no limit"},
		Forks: ForksAdvice{PerForkBytes: &pf, BaseBytes: &base, Fit: Fit{Runs: 5, R2: &r2}, AWXPerForkBytes: 100 * miB,
			MaxForksForLimit: &maxForks, LimitBytes: 484 * miB, Forks: 5},
		OOM:   []OOMRun{{JobID: "1005", Task: "allocate cache", Counter: 18, Kills: 1, LimitBytes: 384 * miB, PeakBytes: 384 * miB}},
		AtCap: []AtCapRun{{JobID: "1007", Task: "allocate cache", Counter: 18, PeakBytes: 350 * miB, LimitBytes: 360 * miB}},
		PodSpecOverride: "apiVersion: v1\nkind: Pod\nspec:\n    serviceAccountName: default\n    automountServiceAccountToken: false\n" +
			"    containers:\n        - image: quay.io/ansible/awx-ee:24.6.1\n          name: worker\n" +
			"          args:\n            - ansible-runner\n            - worker\n            - --private-data-dir=/runner\n" +
			"          resources:\n            requests:\n                cpu: 960m\n                memory: 484Mi\n" +
			"            limits:\n                memory: 484Mi\n",
		Notes: []string{
			"2 runs left out: 1 still going, 1 canceled",
			"1 runs reached 95% of their memory limit: their peaks are what the limit let them have, so their need may be higher",
			"2 runs OOM-killed or at their limit left out of the fork fit",
			"memory per fork 50 MiB measured over 5 runs, against AWX's 100 MiB (SYSTEM_TASK_FORKS_MEM)",
			"confidence medium: 7 runs, p95 of the peaks 25% above their median",
		},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("rightsize\n got %s\nwant %s", g, w)
	}

	// A given limit: (1024 / 1.15 − 100) / 50 = 15.8 forks.
	got = Rightsize("7", runs, SizeOptions{LimitBytes: 1 << 30})
	if f := got.Forks; f.MaxForksForLimit == nil || *f.MaxForksForLimit != 15 || f.LimitBytes != 1<<30 {
		t.Errorf("limit 1 GiB: max forks %v for %d, want 15 for %d", f.MaxForksForLimit, f.LimitBytes, 1<<30)
	}
}

// A change of project revision or EE image starts the window afresh; a
// run that names neither changes nothing.
func TestRightsizeWindow(t *testing.T) {
	f := func(want int, wantNote string, sizings ...Sizing) {
		t.Helper()
		var runs []Run
		for i, s := range sizings {
			runs = append(runs, sizedRun(1001+i, "successful", 100, 50, s))
		}
		got := Rightsize("7", runs, SizeOptions{})
		if got.RunsUsed != want || got.LeftOut.BeforeChange != len(runs)-want {
			t.Errorf("runs used %d (before change %d), want %d", got.RunsUsed, got.LeftOut.BeforeChange, want)
		}
		if wantNote != "" && !slices.Contains(got.Notes, wantNote) {
			t.Errorf("notes %q lack %q", got.Notes, wantNote)
		}
	}
	a, b := Sizing{ProjectRevision: "aaaaaaaaaaaaaaaa"}, Sizing{ProjectRevision: "bbbbbbbbbbbbbbbbbbbb"}
	f(2, "window starts after job 1002: project revision bbbbbbbbbbbb from job 1004 on (was aaaaaaaaaaaa)", a, a, b, b)
	f(3, "window starts after job 1001: project revision bbbbbbbbbbbb from job 1004 on (was aaaaaaaaaaaa)", a, b, Sizing{}, b)
	f(4, "", a, a, Sizing{}, a)
	e1, e2 := Sizing{EEImage: "ee:1"}, Sizing{EEImage: "ee:2", ProjectRevision: "aaaaaaaaaaaaaaaa"}
	f(1, "window starts after job 1002: execution environment ee:2 from job 1003 on (was ee:1)", e1, e1, e2)
}

// Fewer than 5 runs is low confidence, and says so; no runs recommend
// nothing; runs without forks or with one fork count give no fit.
func TestRightsizeFew(t *testing.T) {
	got := Rightsize("7", nil, SizeOptions{})
	if got.RunsUsed != 0 || got.PodSpecOverride != "" || got.Memory.RequestBytes != 0 || got.Confidence != "low" ||
		!slices.Contains(got.Notes, "no finished run with memory samples: nothing to recommend") {
		t.Errorf("no runs: %+v", got)
	}
	var runs []Run
	for i := range 3 {
		runs = append(runs, sizedRun(1001+i, "successful", 100, 50, Sizing{Forks: 5, Hosts: 2}))
	}
	got = Rightsize("7", runs, SizeOptions{})
	if got.Confidence != "low" || !slices.Contains(got.Notes, "confidence low: 3 runs (fewer than 5)") {
		t.Errorf("3 runs: confidence %s, notes %q", got.Confidence, got.Notes)
	}
	// 100 MiB × 1.15 = 115 MiB.
	if got.Memory.RequestBytes != 115*miB || got.Memory.Basis != "p95 of per-run peaks (recency-weighted) + 15%" {
		t.Errorf("3 runs: request %d (%s), want %d", got.Memory.RequestBytes, got.Memory.Basis, 115*miB)
	}
	if got.Forks.PerForkBytes != nil || got.Forks.Forks != 2 || got.Forks.Fit.Runs != 3 ||
		!slices.Contains(got.Notes, "every run with known forks had 2 effective fork(s): runs with other --forks (or host counts) are needed to fit the memory per fork") {
		t.Errorf("one effective fork count: %+v, notes %q", got.Forks, got.Notes)
	}
}

// An OOM kill with no known limit bumps the run's own peak.
func TestRightsizeOOMWithoutLimit(t *testing.T) {
	runs := []Run{sizedRun(1001, "successful", 100, 50, Sizing{}), sizedRun(1002, "failed", 1000, 50, Sizing{OOMKills: 1, OOMCounter: 21})}
	got := Rightsize("7", runs, SizeOptions{})
	// max(1000 + 100, 1000 × 1.2) = 1200 MiB.
	if got.Memory.RequestBytes != 1200*miB || len(got.OOM) != 1 || got.OOM[0].Task != "compress" || got.OOM[0].LimitBytes != 0 {
		t.Errorf("OOM without limit: request %d, oom %+v", got.Memory.RequestBytes, got.OOM)
	}
}

func TestWeightedQuantile(t *testing.T) {
	f := func(vs, ws []float64, q, want float64) {
		t.Helper()
		v0, w0 := slices.Clone(vs), slices.Clone(ws)
		if got := weightedQuantile(vs, ws, q); got != want {
			t.Errorf("weightedQuantile(%v, %v, %v) = %v, want %v", vs, ws, q, got, want)
		}
		if !slices.Equal(vs, v0) || !slices.Equal(ws, w0) {
			t.Errorf("inputs modified")
		}
	}
	f(nil, nil, 0.5, 0)
	f([]float64{3, 1, 2}, []float64{1, 1, 1}, 0.5, 2)
	f([]float64{3, 1, 2}, []float64{1, 1, 1}, 1, 3)
	f([]float64{3, 1, 2}, []float64{1, 1, 1}, 2.0/3, 2) // reached exactly at 2
	f([]float64{3, 1, 2}, []float64{1, 1, 8}, 0.95, 3)
	f([]float64{3, 1, 2}, []float64{0.1, 1, 8}, 0.95, 2)
}

func TestQuantile(t *testing.T) {
	f := func(sorted []float64, q, want float64) {
		t.Helper()
		if got := Quantile(sorted, q); got != want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", sorted, q, got, want)
		}
	}
	f([]float64{7}, 0.95, 7)
	f([]float64{1, 2}, 0.5, 1.5)
	f([]float64{1, 2, 3, 4, 5}, 0.95, 4.8)
	f([]float64{1, 2, 3, 4, 5}, 1, 5)
	f([]float64{1, 2, 3, 4, 5}, 0, 1)
}

func TestFitLine(t *testing.T) {
	base, slope, r2, ok := fitLine([]float64{1, 2, 3, 4}, []float64{3, 5, 8, 9})
	// slope = Sxy / Sxx = 10.5 / 5 = 2.1, base = 6.25 − 2.1 × 2.5 = 1,
	// residuals −0.1, −0.2, 0.7, −0.4 → SSres 0.7 over SStot 22.75.
	if !ok || base != 1 || slope != 2.1 || fmt.Sprintf("%.6f", r2) != fmt.Sprintf("%.6f", 1-0.7/22.75) {
		t.Errorf("fitLine = %v %v %v %v", base, slope, r2, ok)
	}
	if _, _, _, ok := fitLine([]float64{2, 2}, []float64{1, 3}); ok {
		t.Error("fitLine of one x: ok")
	}
}

// The text form of the recommendation of TestRightsize's window.
func TestRightsizeWriteText(t *testing.T) {
	sz := func(forks int) Sizing { return Sizing{Forks: forks, Hosts: 8} }
	oom := sz(5)
	oom.MemoryLimitBytes, oom.OOMKills, oom.OOMCounter = 384*miB, 1, 18
	runs := []Run{
		sizedRun(1001, "successful", 150, 91, sz(1)), sizedRun(1002, "successful", 200, 92, sz(2)),
		sizedRun(1003, "successful", 250, 93, sz(3)), sizedRun(1004, "failed", 384, 95, oom),
	}
	rs := Rightsize("7", runs, SizeOptions{})
	var b strings.Builder
	if err := rs.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	// p95 of 150, 200, 250, 384 MiB at rank 2.85: 250 + 0.85 × 134. CPU:
	// 20 % holds 2/3 of the weighted run time; among the compress means
	// 91, 92, 93, 95 % (weights 0.81, 0.87, 0.93, 1) the 90th percentile
	// falls at 93 %.
	want := `template 7: 4 of 4 runs used, confidence low
memory   request 484 MiB, limit 484 MiB: OOM kill of job 1004 at a limit of 384 MiB: max(limit + 100 MiB, limit × 1.2)
         run peaks p50 225 MiB, p95 363.9 MiB, max 384 MiB; current limit 384 MiB
         driven by "allocate cache" (site.yml:10 allocate cache): 384 MiB in job 1004 at task 18
cpu      request 930m: p90 of run time at each task's mean CPU (recency-weighted); no limit; peak 1050m
forks    50 MiB per fork over 100 MiB (3 runs, r² 1.0000); AWX assumes 100 MiB
         at most 6 forks in 484 MiB
oom      job 1004: killed in "allocate cache" (task 18) at a limit of 384 MiB, 1 kills
note     1 runs OOM-killed or at their limit left out of the fork fit
note     memory per fork 50 MiB measured over 3 runs, against AWX's 100 MiB (SYSTEM_TASK_FORKS_MEM)
note     confidence low: 4 runs (fewer than 5)
`
	if b.String() != want {
		t.Errorf("text\n%s\nwant\n%s", b.String(), want)
	}
	empty := Rightsize("9", nil, SizeOptions{})
	b.Reset()
	if err := empty.WriteText(&b); err != nil || b.String() != "template 9: 0 of 0 runs used, confidence low\n  no finished run with memory samples: nothing to recommend\n" {
		t.Errorf("no runs: %q", b.String())
	}
}
