package history

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The document has the shape: runs oldest first, per task one
// entry per run it appears in, regressions with value, baseline and
// factor; the task cap is said.
func TestBuild(t *testing.T) {
	var runs []Run
	for i, mem := range []float64{232e6, 230e6, 235e6, 232e6, 640e6} {
		start := int64(1796010000000 + i*100000)
		runs = append(runs, Run{JobID: fmt.Sprint(1001 + i), StartMs: start, EndMs: start + 21000, Status: "successful", Tasks: []TaskRun{
			{Counter: 18, Name: "allocate cache", Play: "web", Path: "/runner/project/site.yml:14", StartMs: start, EndMs: start + 2400,
				Max: StatsOf(map[string]float64{"memory": mem}), Mean: StatsOf(map[string]float64{"memory": mem / 2})},
			{Counter: 21, Name: "say hello", Play: "web", Path: "/runner/project/site.yml:20", StartMs: start + 2400, EndMs: start + 2500,
				Max: StatsOf(map[string]float64{"cpu": 50}), Mean: StatsOf(map[string]float64{"cpu": 25}), CPUSeconds: 0.05},
		}})
	}
	runs[2].Tasks = runs[2].Tasks[:1] // "say hello" skipped in 1003
	h := Build("7", "deploy-web", runs, DefaultRule(), 0)
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"template_id":"7","template_name":"deploy-web","runs":[` +
		`{"job_id":"1001","start":1796010000000,"end":1796010021000,"status":"successful"},` +
		`{"job_id":"1002","start":1796010100000,"end":1796010121000,"status":"successful"},` +
		`{"job_id":"1003","start":1796010200000,"end":1796010221000,"status":"successful"},` +
		`{"job_id":"1004","start":1796010300000,"end":1796010321000,"status":"successful"},` +
		`{"job_id":"1005","start":1796010400000,"end":1796010421000,"status":"successful"}],` +
		`"tasks":[{"key":"site.yml:14 allocate cache","name":"allocate cache","play":"web","role":"","task_path":"site.yml:14","runs":[` +
		`{"job_id":"1001","counter":18,"start":1796010000000,"duration_ms":2400,"max":{"memory":232000000},"mean":{"memory":116000000}},` +
		`{"job_id":"1002","counter":18,"start":1796010100000,"duration_ms":2400,"max":{"memory":230000000},"mean":{"memory":115000000}},` +
		`{"job_id":"1003","counter":18,"start":1796010200000,"duration_ms":2400,"max":{"memory":235000000},"mean":{"memory":117500000}},` +
		`{"job_id":"1004","counter":18,"start":1796010300000,"duration_ms":2400,"max":{"memory":232000000},"mean":{"memory":116000000}},` +
		`{"job_id":"1005","counter":18,"start":1796010400000,"duration_ms":2400,"max":{"memory":640000000},"mean":{"memory":320000000}}],` +
		`"regressions":[{"job_id":"1005","metric":"memory_max","value":640000000,"baseline":232000000,"factor":2.76}],` +
		`"distribution":{"duration_ms":{"runs":5,"p50":2400,"p95":2400,"max":2400},"memory_max":{"runs":5,"p50":232000000,"p95":559000000,"max":640000000}}},` +
		`{"key":"site.yml:20 say hello","name":"say hello","play":"web","role":"","task_path":"site.yml:20","runs":[` +
		`{"job_id":"1001","counter":21,"start":1796010002400,"duration_ms":100,"cpu_seconds":0.05,"max":{"cpu":50},"mean":{"cpu":25}},` +
		`{"job_id":"1002","counter":21,"start":1796010102400,"duration_ms":100,"cpu_seconds":0.05,"max":{"cpu":50},"mean":{"cpu":25}},` +
		`{"job_id":"1004","counter":21,"start":1796010302400,"duration_ms":100,"cpu_seconds":0.05,"max":{"cpu":50},"mean":{"cpu":25}},` +
		`{"job_id":"1005","counter":21,"start":1796010402400,"duration_ms":100,"cpu_seconds":0.05,"max":{"cpu":50},"mean":{"cpu":25}}],` +
		`"regressions":[],` +
		`"distribution":{"cpu_max":{"runs":4,"p50":50,"p95":50,"max":50},"cpu_seconds":{"runs":4,"p50":0.05,"p95":0.05,"max":0.05},"duration_ms":{"runs":4,"p50":100,"p95":100,"max":100}}}],"tasks_omitted":0,"min_others":3,"runs_in_all":5,` +
		// p95 of the run peaks 230, 232, 232, 235, 640 MB: rank 0.95 × 4 =
		// 3.8, so 235 + 0.8 × (640 − 235) = 559 MB.
		`"distribution":{"cpu_max":{"runs":4,"p50":50,"p95":50,"max":50},"cpu_seconds":{"runs":4,"p50":0.05,"p95":0.05,"max":0.05},` +
		`"duration_ms":{"runs":5,"p50":21000,"p95":21000,"max":21000},"memory_max":{"runs":5,"p50":232000000,"p95":559000000,"max":640000000}}}`
	if string(got) != want {
		t.Errorf("history\n got %s\nwant %s", got, want)
	}

	h = Build("7", "", runs, DefaultRule(), 1)
	if len(h.Tasks) != 1 || h.TasksOmitted != 1 || h.Tasks[0].Name != "allocate cache" {
		t.Errorf("capped at 1 task: %d tasks, %d omitted; want 1 and 1", len(h.Tasks), h.TasksOmitted)
	}
	h = Build("7", "", nil, DefaultRule(), 0)
	if got, _ := json.Marshal(h); string(got) != `{"template_id":"7","template_name":"","runs":[],"tasks":[],"tasks_omitted":0,"min_others":3,"runs_in_all":0,"distribution":{}}` {
		t.Errorf("no runs: %s", got)
	}
}
