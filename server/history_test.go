package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// historyDoc is the history answer as a client decodes it.
type historyDoc struct {
	TemplateID   string `json:"template_id"`
	TemplateName string `json:"template_name"`
	RunsInAll    int    `json:"runs_in_all"`
	MinOthers    int    `json:"min_others"`
	Runs         []struct {
		JobID  string `json:"job_id"`
		Start  int64  `json:"start"`
		End    int64  `json:"end"`
		Status string `json:"status"`
	} `json:"runs"`
	Tasks []struct {
		Key  string `json:"key"`
		Name string `json:"name"`
		Runs []struct {
			JobID      string             `json:"job_id"`
			Counter    int64              `json:"counter"`
			DurationMs int64              `json:"duration_ms"`
			CPUSeconds *float64           `json:"cpu_seconds"`
			Max        map[string]float64 `json:"max"`
			Mean       map[string]float64 `json:"mean"`
		} `json:"runs"`
		Regressions []struct {
			JobID    string   `json:"job_id"`
			Metric   string   `json:"metric"`
			Value    float64  `json:"value"`
			Baseline float64  `json:"baseline"`
			Factor   *float64 `json:"factor"`
		} `json:"regressions"`
	} `json:"tasks"`
	TasksOmitted int `json:"tasks_omitted"`
}

// templateRun stores run i of a two-task template job: "allocate cache"
// holds memMiB MiB at most, "say hello" 1 s of 50% CPU.
func templateRun(t *testing.T, store *tsdb.Store, tmpl, id string, i int, memMiB float64) {
	t.Helper()
	start := int64(1_796_010_000_000 + i*600_000)
	b := &tsdb.Batch{JobID: id, Info: tsdb.JobInfo{TemplateID: tmpl, TemplateName: "deploy-web", Status: "successful", Playbook: "site.yml"},
		LastEvent: &tsdb.Event{Counter: 30, TimeMs: start + 5000}}
	for k, name := range []string{"allocate cache", "say hello"} {
		counter, uuid := int64(10+10*k+i), fmt.Sprintf("u%d-%d", i, k)
		t0 := start + int64(k)*3000
		b.Tasks = append(b.Tasks, tsdb.Task{Counter: counter, UUID: uuid, Name: name, StartMs: t0, Play: "web", Path: fmt.Sprintf("/tmp/awx_%d/project/site.yml:%d", i, 10+10*k)})
		mem := tsdb.SeriesData{Resource: "memory", Counter: counter, UUID: uuid, Task: name}
		cpu := tsdb.SeriesData{Resource: "cpu", Counter: counter, UUID: uuid, Task: name}
		for j := range 8 {
			ts := t0 + 250*int64(j+1)
			v := 20.0
			if k == 0 {
				v = memMiB * float64(j+1) / 8
			}
			mem.Ts, mem.Vs = append(mem.Ts, ts), append(mem.Vs, v*(1<<20))
			cpu.Ts, cpu.Vs = append(cpu.Ts, ts), append(cpu.Vs, 50)
		}
		b.Series = append(b.Series, mem, cpu)
	}
	if _, err := store.Append(t.Context(), b); err != nil {
		t.Fatal(err)
	}
}

func TestTemplateHistory(t *testing.T) {
	hs, store := newTestServer(t)
	for i, mem := range []float64{200, 205, 198, 202, 640} {
		templateRun(t, store, "7", fmt.Sprint(1001+i), i, mem)
	}
	templateRun(t, store, "8", "2001", 0, 100)
	get := func(query string) historyDoc {
		t.Helper()
		var h historyDoc
		if code := getJSON(t, hs.URL+"/api/v1/templates/7/history"+query, &h); code != 200 {
			t.Fatalf("history%s: %d", query, code)
		}
		return h
	}
	h := get("")
	var runs []string
	for _, r := range h.Runs {
		runs = append(runs, r.JobID+"/"+r.Status)
	}
	if h.TemplateID != "7" || h.TemplateName != "deploy-web" || strings.Join(runs, " ") != "1001/successful 1002/successful 1003/successful 1004/successful 1005/successful" {
		t.Fatalf("history %s %q runs %q, want template 7 deploy-web and runs 1001..1005 oldest first", h.TemplateID, h.TemplateName, runs)
	}
	if len(h.Tasks) != 2 || h.Tasks[0].Key != "site.yml:10 allocate cache" || h.Tasks[1].Key != "site.yml:20 say hello" {
		t.Fatalf("tasks %+v, want allocate cache and say hello keyed by site.yml:line", h.Tasks)
	}
	// Exactly the heavy run's memory of allocate cache.
	regs := h.Tasks[0].Regressions
	if len(regs) != 1 || regs[0].JobID != "1005" || regs[0].Metric != "memory_max" || regs[0].Value != 640<<20 || regs[0].Baseline != 201*(1<<20) ||
		regs[0].Factor == nil || *regs[0].Factor != 3.18 || len(h.Tasks[1].Regressions) != 0 {
		t.Errorf("regressions %+v and %+v, want one: 1005 memory_max 640 MiB against 201 MiB (the median of 200, 205, 198, 202), factor 3.18", regs, h.Tasks[1].Regressions)
	}
	// Per task per run: the tasks payload's exact max and mean, CPU seconds.
	for _, task := range h.Tasks {
		for _, r := range task.Runs {
			var tl struct {
				Tasks []struct {
					Counter int64              `json:"counter"`
					Max     map[string]float64 `json:"max"`
					Mean    map[string]float64 `json:"mean"`
				} `json:"tasks"`
			}
			if code := getJSON(t, hs.URL+"/api/v1/jobs/"+r.JobID+"/tasks", &tl); code != 200 {
				t.Fatal(code)
			}
			found := false
			for _, tt := range tl.Tasks {
				if tt.Counter == r.Counter {
					found = true
					if fmt.Sprint(tt.Max, tt.Mean) != fmt.Sprint(r.Max, r.Mean) {
						t.Errorf("%s in %s: max %v mean %v, tasks payload %v %v", task.Key, r.JobID, r.Max, r.Mean, tt.Max, tt.Mean)
					}
				}
			}
			// Up to the next task's start, the last to the last event. 8
			// samples of 50% each over the 250 ms before it: 1 s of CPU;
			// the first of say hello follows a 1250 ms gap, counted as one
			// interval (a task's first sample covers one poll interval):
			// 0.125 s, not 0.5.
			wantMs := map[string]int64{"allocate cache": 3000, "say hello": 2000}[task.Name]
			wantCPU := map[string]float64{"allocate cache": 1, "say hello": 1}[task.Name]
			if !found || r.DurationMs != wantMs || r.CPUSeconds == nil || *r.CPUSeconds != wantCPU {
				t.Errorf("%s in %s: counter %d found %v, duration %d, cpu seconds %v; want %d ms, %v s", task.Key, r.JobID, r.Counter, found, r.DurationMs, deref(r.CPUSeconds), wantMs, wantCPU)
			}
		}
	}
	// last=N keeps the newest N; job=ID ends the window there.
	// runs_in_all says how many runs the window was cut from, so that a
	// page tells a small window from a template with few runs.
	if h := get("?last=2"); len(h.Runs) != 2 || h.Runs[0].JobID != "1004" || h.Runs[1].JobID != "1005" || len(h.Tasks[0].Regressions) != 0 || h.RunsInAll != 5 || h.MinOthers != 3 {
		t.Errorf("last=2: runs %+v, regressions %+v, runs in all %d, min others %d; want 1004, 1005 and none (too few runs) of 5, 3", h.Runs, h.Tasks[0].Regressions, h.RunsInAll, h.MinOthers)
	}
	if h := get("?last=3&job=1004"); len(h.Runs) != 3 || h.Runs[0].JobID != "1002" || h.Runs[2].JobID != "1004" || h.RunsInAll != 4 {
		t.Errorf("last=3&job=1004: runs %+v of %d, want 1002..1004 of the 4 up to 1004", h.Runs, h.RunsInAll)
	}
	if h := get("?job=1002"); len(h.Runs) != 2 || h.RunsInAll != 2 {
		t.Errorf("job=1002: %d runs of %d, want 2 of 2", len(h.Runs), h.RunsInAll)
	}
	if h := get(""); len(h.Runs) != 5 || h.RunsInAll != 5 {
		t.Errorf("the default window: %d runs of %d, want 5 of 5", len(h.Runs), h.RunsInAll)
	}
	// A template without runs: an empty history.
	var empty historyDoc
	if code := getJSON(t, hs.URL+"/api/v1/templates/99/history", &empty); code != 200 || len(empty.Runs) != 0 || len(empty.Tasks) != 0 {
		t.Errorf("template 99: %d %+v, want 200 and no runs", code, empty)
	}
	bad := func(query string, wantCode int, wantMsg string) {
		t.Helper()
		var e struct{ Error string }
		if code := getJSON(t, hs.URL+query, &e); code != wantCode || !strings.Contains(e.Error, wantMsg) {
			t.Errorf("GET %s: %d %q, want %d naming %q", query, code, e.Error, wantCode, wantMsg)
		}
	}
	bad("/api/v1/templates/7/history?last=0", 400, "last: must be a whole number of runs from 1 to 100")
	bad("/api/v1/templates/7/history?last=101", 400, "last: must be")
	bad("/api/v1/templates/7/history?last=x", 400, "last: must be")
	bad("/api/v1/templates/7/history?job=2001", 404, `job: "2001" is not a run of template "7"`)
	bad("/api/v1/templates/"+strings.Repeat("7", 129)+"/history", 400, "id: must be a job template id")
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// History requests while runs are written (and one rewritten) answer
// whole windows: every run listed once, oldest first, each task's
// entries from listed runs only; the rewritten run's new values show.
func TestTemplateHistoryUnderWrites(t *testing.T) {
	hs, store := newTestServer(t)
	for i := range 4 {
		templateRun(t, store, "7", fmt.Sprint(1001+i), i, 200)
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				var h historyDoc
				if code := getJSON(t, hs.URL+"/api/v1/templates/7/history", &h); code != 200 {
					errs <- fmt.Errorf("history: %d", code)
					return
				}
				listed := map[string]bool{}
				for i, r := range h.Runs {
					if listed[r.JobID] || (i > 0 && r.Start < h.Runs[i-1].Start) {
						errs <- fmt.Errorf("runs %+v not each once, oldest first", h.Runs)
						return
					}
					listed[r.JobID] = true
				}
				for _, task := range h.Tasks {
					for _, r := range task.Runs {
						if !listed[r.JobID] {
							errs <- fmt.Errorf("task %s has an entry of unlisted run %s", task.Key, r.JobID)
							return
						}
					}
				}
			}
		}()
	}
	for i := 4; i < 12; i++ {
		templateRun(t, store, "7", fmt.Sprint(1001+i), i, 200)
	}
	// Runs deleted while they are read leave the answer whole: a run
	// deleted between its listing and its read is left out, not a 404.
	for i := range 12 {
		templateRun(t, store, "7", fmt.Sprint(2001+i), i, 200)
		if err := store.Delete(t.Context(), fmt.Sprint(2001+i)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// A late sample of 800 MiB in run 1012's cache task: the cached
	// statistics of its old version are not used.
	start := int64(1_796_010_000_000 + 11*600_000)
	late := &tsdb.Batch{JobID: "1012", Series: []tsdb.SeriesData{{Resource: "memory", Counter: 21, UUID: "u11-0", Task: "allocate cache",
		Ts: []int64{start + 2100}, Vs: []float64{800 << 20}}}}
	if _, err := store.Append(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	var h historyDoc
	if code := getJSON(t, hs.URL+"/api/v1/templates/7/history", &h); code != 200 || len(h.Runs) != 12 {
		t.Fatalf("history: %d, %d runs %+v; want 12", code, len(h.Runs), h.Runs)
	}
	if regs := h.Tasks[0].Regressions; len(regs) != 1 || regs[0].JobID != "1012" || regs[0].Value != 800<<20 {
		t.Errorf("after the rewrite: regressions %+v, want 1012's 800 MiB", regs)
	}
}
