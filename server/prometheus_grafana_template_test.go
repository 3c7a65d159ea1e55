package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// The template panels of the shipped Grafana dashboard run on Peakline:
// the template picker lists the template ids of the jobs' info series,
// and each panel's query gives one row per task and run of $template
// only, its value the task's peak in that run (run t2's first task holds
// three times the memory of the other runs').
func TestGrafanaTemplatePanels(t *testing.T) {
	b, err := os.ReadFile("../web/grafana/dashboards/peakline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	env := newPromEnv(t, server.Config{})
	ctx := context.Background()
	const tasks = 4
	runs := []string{"t1", "t2", "t3"}
	// The tasks with samples of each resource, the same in every run; the
	// first with memory samples is the one made heavier in t2.
	withSamples := map[string]map[string]bool{}
	var heavyTask string
	for _, s := range jobBatch(testJob("t0", tasks, 40, 31)).Series {
		if withSamples[s.Resource] == nil {
			withSamples[s.Resource] = map[string]bool{}
		}
		withSamples[s.Resource][s.Task] = true
		if s.Resource == "memory" && heavyTask == "" {
			heavyTask = s.Task
		}
	}
	var from, to time.Time
	for _, id := range runs {
		j := testJob(id, tasks, 40, 31) // one seed: the same task names in every run
		batch := jobBatch(j)
		batch.Info = tsdb.JobInfo{TemplateID: "7", TemplateName: "deploy-web"}
		if id == "t2" {
			for i := range batch.Series {
				if s := &batch.Series[i]; s.Resource == "memory" && s.Task == heavyTask {
					for k := range s.Vs {
						s.Vs[k] *= 3
					}
				}
			}
		}
		if _, err := env.store.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
		from = time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Minute)
		to = time.UnixMilli(j.LastEventMs).Truncate(time.Second).Add(time.Second)
	}
	other := testJob("o1", tasks, 40, 31)
	ob := jobBatch(other)
	ob.Info = tsdb.JobInfo{TemplateID: "8"}
	if _, err := env.store.Append(ctx, ob); err != nil {
		t.Fatal(err)
	}

	ids, _, _, err := env.api.LabelValues(ctx, "template_id", []string{"peakline_job_info"}, from, to)
	if err != nil || fmt.Sprint(ids) != "[7 8]" {
		t.Fatalf("template picker: %v %v, want [7 8]", ids, err)
	}
	fill := strings.NewReplacer(`$template`, "7", `$__range`, fmt.Sprintf("%ds", int(to.Sub(from).Seconds())))
	panels := 0
	for _, p := range d.Panels {
		if len(p.Targets) != 1 || !strings.Contains(p.Targets[0].Expr, "$template") {
			continue
		}
		panels++
		vec := res(env.api.Query(ctx, fill.Replace(p.Targets[0].Expr), to)).must(t).(model.Vector)
		peak := map[string]map[string]float64{} // task → run → value
		for _, s := range vec {
			if s.Metric["template_id"] != "7" {
				t.Fatalf("%s: row %v is not labelled with template 7", p.Title, s.Metric)
			}
			task, run := string(s.Metric["task"]), string(s.Metric["job_id"])
			if peak[task] == nil {
				peak[task] = map[string]float64{}
			}
			peak[task][run] = float64(s.Value)
		}
		resource := map[string]string{"Memory": "memory", "CPU": "cpu", "PIDs": "pids"}[strings.Fields(p.Title)[0]]
		if len(peak) != len(withSamples[resource]) || len(peak) == 0 {
			t.Fatalf("%s: %d task rows, want %d (the tasks with %s samples): %v", p.Title, len(peak), len(withSamples[resource]), resource, vec)
		}
		for task, byRun := range peak {
			if len(byRun) != len(runs) || byRun["o1"] != 0 {
				t.Fatalf("%s: task %s has runs %v, want %v only", p.Title, task, byRun, runs)
			}
		}
		if strings.HasPrefix(p.Title, "Memory") {
			heavy := peak[heavyTask]
			if heavy["t2"] != 3*heavy["t1"] || heavy["t1"] != heavy["t3"] || heavy["t1"] <= 0 {
				t.Fatalf("%s: peaks of %q %v, want t2 three times t1 and t3", p.Title, heavyTask, heavy)
			}
		}
	}
	if panels != 3 {
		t.Fatalf("%d template panels, want 3 (memory, CPU, PIDs)", panels)
	}
}
