package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/peakline/peakline/server"
)

// grafanaDashboard is the part of web/grafana's dashboard JSON that holds
// queries.
type grafanaDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr    string `json:"expr"`
			Instant bool   `json:"instant"`
			RefID   string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
	Annotations struct {
		List []struct {
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
}

// Every query of the shipped Grafana dashboard runs on Peakline, with the
// dashboard variables filled in as Grafana does, and finds the job.
func TestGrafanaDashboardQueries(t *testing.T) {
	b, err := os.ReadFile("../web/grafana/dashboards/peakline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	env := newPromEnv(t, server.Config{})
	j := testJob("g1", 6, 400, 21)
	loadTestJob(t, env, j)
	loadTestJob(t, env, testJob("g2", 3, 100, 22))
	ctx := context.Background()
	from := time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Minute)
	to := time.UnixMilli(j.LastEventMs).Truncate(time.Second).Add(time.Second)
	fill := strings.NewReplacer(`$job`, "g1", `$__range`, fmt.Sprintf("%ds", int(to.Sub(from).Seconds())))
	rng := v1.Range{Start: from, End: to.Add(time.Minute), Step: 5 * time.Second}

	// The job picker.
	jobs, _, _, err := env.api.LabelValues(ctx, "job_id", nil, from, to)
	if err != nil || !slices.Contains(jobs, "g1") {
		t.Fatalf("job picker: %v %v", jobs, err)
	}

	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "$template") {
				continue // TestGrafanaTemplatePanels
			}
			q := fill.Replace(tg.Expr)
			queries++
			if !tg.Instant {
				m := res(env.api.QueryRange(ctx, q, rng)).must(t).(model.Matrix)
				if len(m) == 0 {
					t.Fatalf("%s: %s found nothing", p.Title, q)
				}
				for _, s := range m {
					if s.Metric["job_id"] != "g1" || s.Metric["counter"] == "" || s.Metric["task"] == "" {
						t.Fatalf("%s: series %v lacks the labels of the legend and the link", p.Title, s.Metric)
					}
				}
				continue
			}
			vec := res(env.api.Query(ctx, q, to)).must(t).(model.Vector)
			if len(vec) != len(j.Tasks) {
				t.Fatalf("%s %s: %d rows, want one per task (%d)", p.Title, tg.RefID, len(vec), len(j.Tasks))
			}
			if tg.RefID == "A" { // CPU max, per task
				for _, s := range vec {
					want := math.Inf(-1)
					for _, sr := range j.Series {
						if sr.Resource == "cpu" && fmt.Sprint(j.Tasks[sr.Task].Counter) == string(s.Metric["counter"]) {
							want = slices.Max(sr.Vs)
						}
					}
					if float64(s.Value) != want {
						t.Fatalf("CPU max of task %s = %v, want %v", s.Metric["counter"], s.Value, want)
					}
				}
			}
		}
	}
	if queries != 11 {
		t.Fatalf("%d dashboard queries, want 3 graphs and 8 table columns (max, mean and time of the peak)", queries)
	}

	// Task starts: every value is a start time in ms.
	if len(d.Annotations.List) != 1 {
		t.Fatalf("annotations: %+v", d.Annotations)
	}
	m := res(env.api.QueryRange(ctx, fill.Replace(d.Annotations.List[0].Expr), rng)).must(t).(model.Matrix)
	starts := map[int64]bool{}
	for _, s := range m {
		for _, p := range s.Values {
			starts[int64(p.Value)] = true
		}
	}
	for _, tk := range j.Tasks {
		if !starts[tk.StartMs] {
			t.Fatalf("task %d starting at %d has no annotation in %v", tk.Counter, tk.StartMs, starts)
		}
	}
	if len(starts) != len(j.Tasks) {
		t.Fatalf("%d annotation times for %d tasks", len(starts), len(j.Tasks))
	}
}
