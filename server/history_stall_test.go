package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// stallRun stores run i of a one-task template job: "fork sleepers" runs
// durMs at 50 % CPU holding memMiB MiB, and waits for a CPU for cpuShare
// of its time while the node's CPU pressure is nodeShare.
func stallRun(t *testing.T, store *tsdb.Store, id string, i int, durMs int64, memMiB, cpuShare, nodeShare float64) {
	t.Helper()
	t0 := int64(1_796_020_000_000 + i*600_000)
	uuid := fmt.Sprintf("s%d", i)
	b := &tsdb.Batch{JobID: id, Info: tsdb.JobInfo{TemplateID: "9", Status: "successful"},
		Tasks:     []tsdb.Task{{Counter: 3, UUID: uuid, Name: "fork sleepers", StartMs: t0, Play: "p", Path: "/runner/project/site.yml:4"}},
		LastEvent: &tsdb.Event{Counter: 5, TimeMs: t0 + durMs}}
	series := map[string]*tsdb.SeriesData{}
	for _, r := range []string{"cpu", "memory", "cpu_stall", "node_cpu_stall"} {
		series[r] = &tsdb.SeriesData{Resource: r, Counter: 3, UUID: uuid, Task: "fork sleepers"}
	}
	for ts := t0 + 250; ts <= t0+durMs; ts += 250 {
		for r, v := range map[string]float64{"cpu": 50, "memory": memMiB * (1 << 20), "cpu_stall": 0.25 * cpuShare, "node_cpu_stall": 0.25 * nodeShare} {
			series[r].Ts, series[r].Vs = append(series[r].Ts, ts), append(series[r].Vs, v)
		}
	}
	for _, r := range []string{"cpu", "memory", "cpu_stall", "node_cpu_stall"} {
		b.Series = append(b.Series, *series[r])
	}
	if _, err := store.Append(t.Context(), b); err != nil {
		t.Fatal(err)
	}
}

// TestTemplateHistoryStall checks the history API carries each run's
// stall shares per task, and that the slow run that waited for a CPU has
// its duration and CPU seconds contended while its memory is a
// regression; the graph and tasks payloads carry the shares too, and no
// stall series.
func TestTemplateHistoryStall(t *testing.T) {
	hs, store := newTestServer(t)
	for i := range 4 {
		stallRun(t, store, fmt.Sprint(3001+i), i, 4000, 100, 0.05, 0.5)
	}
	stallRun(t, store, "3005", 4, 8000, 300, 0.5, 0.9)

	type doc struct {
		Tasks []struct {
			Runs []struct {
				JobID  string             `json:"job_id"`
				Waited map[string]float64 `json:"waited"`
			} `json:"runs"`
			Regressions []struct {
				JobID     string  `json:"job_id"`
				Metric    string  `json:"metric"`
				Value     float64 `json:"value"`
				Baseline  float64 `json:"baseline"`
				Contended bool    `json:"contended"`
				Stall     *struct {
					Signal   string  `json:"signal"`
					Share    float64 `json:"share"`
					Baseline float64 `json:"baseline"`
				} `json:"stall"`
			} `json:"regressions"`
		} `json:"tasks"`
	}
	get := func(query string) string {
		t.Helper()
		var h doc
		if code := getJSON(t, hs.URL+"/api/v1/templates/9/history"+query, &h); code != 200 {
			t.Fatalf("history%s: %d", query, code)
		}
		if len(h.Tasks) != 1 {
			t.Fatalf("history%s: %d tasks, want 1", query, len(h.Tasks))
		}
		var out []string
		for _, r := range h.Tasks[0].Runs {
			out = append(out, fmt.Sprintf("%s waited %v", r.JobID, r.Waited))
		}
		for _, r := range h.Tasks[0].Regressions {
			s := fmt.Sprintf("%s %s %v/%v", r.JobID, r.Metric, r.Value, r.Baseline)
			if r.Contended {
				s += fmt.Sprintf(" contended %s %v/%v", r.Stall.Signal, r.Stall.Share, r.Stall.Baseline)
			}
			out = append(out, s)
		}
		return strings.Join(out, "\n")
	}
	runs := "3001 waited map[cpu:0.05 node_cpu:0.5]\n3002 waited map[cpu:0.05 node_cpu:0.5]\n3003 waited map[cpu:0.05 node_cpu:0.5]\n3004 waited map[cpu:0.05 node_cpu:0.5]\n3005 waited map[cpu:0.5 node_cpu:0.9]\n"
	want := runs + "3005 duration_ms 8000/4000 contended cpu 0.5/0.05\n3005 cpu_seconds 4/2 contended cpu 0.5/0.05\n3005 memory_max 3.145728e+08/1.048576e+08"
	if got := get(""); got != want {
		t.Errorf("history:\n%s\nwant\n%s", got, want)
	}
	// max_stall=0 judges no contention: the same findings, all regressions.
	want = runs + "3005 duration_ms 8000/4000\n3005 cpu_seconds 4/2\n3005 memory_max 3.145728e+08/1.048576e+08"
	if got := get("?max_stall=0"); got != want {
		t.Errorf("history?max_stall=0:\n%s\nwant\n%s", got, want)
	}
	// A threshold above the excess: regressions again.
	if got := get("?max_stall=0.5"); got != want {
		t.Errorf("history?max_stall=0.5:\n%s\nwant\n%s", got, want)
	}
	for _, q := range []string{"-0.1", "1.5", "x", "NaN"} {
		var e struct{ Error string }
		if code := getJSON(t, hs.URL+"/api/v1/templates/9/history?max_stall="+q, &e); code != 400 || !strings.Contains(e.Error, "max_stall: must be a share") {
			t.Errorf("max_stall=%s: %d %q, want 400 naming max_stall", q, code, e.Error)
		}
	}

	// The graph: the task carries its shares; no stall series is drawn.
	var g struct {
		Series []struct {
			Resource string `json:"resource"`
		} `json:"series"`
		Tasks []struct {
			Name   string             `json:"name"`
			Waited map[string]float64 `json:"waited"`
		} `json:"tasks"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs/3005/graph", &g); code != 200 {
		t.Fatal(code)
	}
	var res []string
	for _, s := range g.Series {
		res = append(res, s.Resource)
	}
	if strings.Join(res, ",") != "cpu,memory" || len(g.Tasks) != 1 || fmt.Sprint(g.Tasks[0].Waited) != "map[cpu:0.5 node_cpu:0.9]" {
		t.Errorf("graph: series %v, tasks %+v; want cpu,memory and waited cpu 0.5, node_cpu 0.9", res, g.Tasks)
	}
	// The job list counts the stall samples but shows no peak of them:
	// what a job waited for is no resource it used.
	var jl struct {
		Jobs []struct {
			JobID   string                     `json:"job_id"`
			Samples map[string]int             `json:"samples"`
			Peaks   map[string]json.RawMessage `json:"peaks"`
		} `json:"jobs"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs", &jl); code != 200 {
		t.Fatal(code)
	}
	for _, j := range jl.Jobs {
		var peaks []string
		for r := range j.Peaks {
			peaks = append(peaks, r)
		}
		slices.Sort(peaks)
		if n := j.Samples["cpu"]; n == 0 || j.Samples["cpu_stall"] != n || j.Samples["node_cpu_stall"] != n || strings.Join(peaks, ",") != "cpu,memory" {
			t.Errorf("job list: %s samples %v peaks %v, want as many stall samples as CPU ones and peaks of cpu and memory only", j.JobID, j.Samples, peaks)
		}
	}
	// The ingest names every resource it takes when refusing another.
	resp, err := http.Post(hs.URL+"/api/v1/ingest", "application/json",
		strings.NewReader(`{"job_id":"x","series":[{"resource":"cpu_wait","counter":0,"uuid":"","task":"","t":[1796020000000],"v":[1]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "series[0].resource: must be one of cpu, memory, pids, cpu_stall, memory_stall, cpu_throttled, node_cpu_stall, node_load, got"; resp.StatusCode != 400 || !strings.Contains(string(body), want) {
		t.Errorf("ingest of resource cpu_wait: %d %s, want 400 naming %q", resp.StatusCode, body, want)
	}
}
