package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// The sizing fields of a job's info sent by remote write reach the jobs
// list, the graph payload (with the OOM task and the at-cap mark) and the
// Prometheus API as peakline_job_info labels; a field that must be a
// number and is not is a 400 naming it.
func TestRemoteWriteSizing(t *testing.T) {
	env := newPromEnv(t, server.Config{EventsURL: testEventsURL})
	j := testJob("rw9", 4, 600, 3)
	req := jobWriteRequest(j)
	firstMs := req.Timeseries[0].Samples[0].Timestamp
	var peak float64
	for _, ts := range req.Timeseries {
		if hasLabel(ts.Labels, "__name__", "peakline_memory_bytes") {
			for _, s := range ts.Samples {
				peak = max(peak, s.Value)
			}
		}
	}
	if peak == 0 {
		t.Fatal("the test job has no memory samples")
	}
	info := func(extra ...prompb.Label) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: append([]prompb.Label{
			{Name: "__name__", Value: "peakline_job_info"}, {Name: "job_id", Value: "rw9"}, {Name: "template_id", Value: "7"},
		}, extra...), Samples: []prompb.Sample{{Timestamp: firstMs, Value: 1}}}
	}
	// The limit sits 2 % above the peak: at its cap, not killed.
	limit := fmt.Sprint(int64(peak * 1.02))
	req.Timeseries = append(req.Timeseries, info(
		prompb.Label{Name: "ee_image", Value: "quay.io/ansible/awx-ee:24.6.1"}, prompb.Label{Name: "forks", Value: "10"},
		prompb.Label{Name: "hosts", Value: "3"}, prompb.Label{Name: "memory_limit_bytes", Value: limit},
		prompb.Label{Name: "project_revision", Value: "3f2c9e1a"}))
	mustWrite(t, env.hs.URL+"/api/v1/write", req)

	job := getDoc(t, env.hs.URL+"/api/v1/jobs?template=7").(map[string]any)["jobs"].([]any)[0].(map[string]any)
	sz, _ := job["sizing"].(map[string]any)
	if got := fmt.Sprint(sz["forks"], " ", sz["hosts"], " ", fmt.Sprintf("%.0f", sz["memory_limit_bytes"]), " ", sz["at_cap"], " ", sz["ee_image"], " ", sz["project_revision"], " ", sz["oom_kills"]); got != fmt.Sprintf("10 3 %s true quay.io/ansible/awx-ee:24.6.1 3f2c9e1a <nil>", limit) {
		t.Errorf("jobs list sizing = %q", got)
	}

	// Killed in the job's second task: no longer at its cap, but killed.
	counter := fmt.Sprint(j.Tasks[1].Counter)
	mustWrite(t, env.hs.URL+"/api/v1/write", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{info(
		prompb.Label{Name: "oom_counter", Value: counter}, prompb.Label{Name: "oom_kills", Value: "1"}, prompb.Label{Name: "status", Value: "failed"})}})
	g := getDoc(t, env.hs.URL+"/api/v1/jobs/rw9/graph?points=10").(map[string]any)
	sz, _ = g["sizing"].(map[string]any)
	if got := fmt.Sprint(sz["oom_kills"], " ", sz["oom_counter"], " ", sz["at_cap"], " ", sz["forks"]); got != "1 "+counter+" <nil> 10" {
		t.Errorf("graph sizing = %q, want 1 %s <nil> 10", got, counter)
	}
	res, _, _, err := env.api.Series(t.Context(), []string{`peakline_job_info{job_id="rw9"}`}, time.UnixMilli(firstMs-60_000), time.UnixMilli(firstMs+60_000))
	if err != nil {
		t.Fatal(err)
	}
	var kills, forks []string
	for _, ls := range res {
		if v, ok := ls["oom_kills"]; ok {
			kills = append(kills, string(v))
		}
		if v, ok := ls["forks"]; ok {
			forks = append(forks, string(v))
		}
	}
	if strings.Join(kills, ",") != "1" || strings.Join(forks, ",") != "10" {
		t.Errorf("peakline_job_info series: oom_kills %q forks %q, want 1 and 10", kills, forks)
	}
	rs := getDoc(t, env.hs.URL+"/api/v1/templates/7/rightsize").(map[string]any)
	if oom := rs["oom"].([]any); len(oom) != 1 || oom[0].(map[string]any)["job_id"] != "rw9" || oom[0].(map[string]any)["task"] != j.Tasks[1].Name {
		t.Errorf("rightsize oom = %v, want rw9 in %q", rs["oom"], j.Tasks[1].Name)
	}

	bad := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{info(prompb.Label{Name: "forks", Value: "ten"})}}
	if code, resp := postWrite(t, env.hs.URL+"/api/v1/write", encodeWrite(t, bad), nil); code != 400 || !strings.Contains(resp, `forks must be a decimal number`) || !strings.Contains(resp, `got \"ten\"`) {
		t.Errorf("forks=ten: %d %s, want 400 naming forks", code, resp)
	}
}

func hasLabel(ls []prompb.Label, name, value string) bool {
	for _, l := range ls {
		if l.Name == name && l.Value == value {
			return true
		}
	}
	return false
}

// The shipped dashboard's panel of run peaks against limits runs on
// Peakline: per run of $template its memory peak, and its cgroup's
// limit where it had one.
func TestGrafanaMemoryLimitPanel(t *testing.T) {
	b, err := os.ReadFile("../web/grafana/dashboards/peakline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	env := newPromEnv(t, server.Config{})
	ctx := t.Context()
	var from, to time.Time
	peaks := map[string]float64{}
	for i, id := range []string{"m1", "m2", "m3"} {
		j := testJob(id, 3, 40, int64(40+i))
		batch := jobBatch(j)
		batch.Info = tsdb.JobInfo{TemplateID: "7"}
		if id != "m2" {
			batch.Info.MemoryLimit = fmt.Sprint((i + 1) << 30)
		}
		for _, s := range batch.Series {
			if s.Resource == "memory" {
				for _, v := range s.Vs {
					peaks[id] = max(peaks[id], v)
				}
			}
		}
		if _, err := env.store.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			from = time.UnixMilli(j.Tasks[0].StartMs).Truncate(time.Minute)
		}
		to = time.UnixMilli(j.LastEventMs).Truncate(time.Second).Add(time.Second)
	}
	fill := strings.NewReplacer(`$template`, "7", `$__range`, fmt.Sprintf("%ds", int(to.Sub(from).Seconds())+60))
	found := false
	for _, p := range d.Panels {
		if !strings.HasPrefix(p.Title, "Memory peak per run against its limit") {
			continue
		}
		found = true
		if len(p.Targets) != 2 {
			t.Fatalf("%d targets, want peak and limit", len(p.Targets))
		}
		got := map[string]map[string]float64{}
		for _, tg := range p.Targets {
			vec := res(env.api.Query(ctx, fill.Replace(tg.Expr), to)).must(t).(model.Vector)
			got[tg.RefID] = map[string]float64{}
			for _, s := range vec {
				got[tg.RefID][string(s.Metric["job_id"])] = float64(s.Value)
			}
		}
		if fmt.Sprint(got["A"]) != fmt.Sprint(peaks) {
			t.Errorf("peaks %v, want %v", got["A"], peaks)
		}
		if want := map[string]float64{"m1": 1 << 30, "m3": 3 << 30}; fmt.Sprint(got["B"]) != fmt.Sprint(want) {
			t.Errorf("limits %v, want %v", got["B"], want)
		}
	}
	if !found {
		t.Fatal("no memory-against-limit panel in the dashboard")
	}
}

// The sizing fields of a JSON batch reach the jobs list; a negative one
// is a 400 naming it, and nothing of the batch is stored.
func TestIngestSizing(t *testing.T) {
	hs, _ := newTestServer(t)
	const doc = `{"job_id":"js1","template_id":"7","forks":%s,"hosts":4,"memory_limit_bytes":268435456,"oom_kills":2,"oom_counter":9,` +
		`"project_revision":"abc","ee_image":"ee:1","tasks":[{"counter":9,"uuid":"u9","name":"hold memory","start":1796010000000}],` +
		`"series":[{"resource":"memory","counter":9,"uuid":"u9","task":"hold memory","t":[1796010000500],"v":[268000000]}]}`
	if code, body := post(t, hs.URL+"/api/v1/ingest", []byte(fmt.Sprintf(doc, "-1")), nil); code != 400 || !strings.Contains(body, "forks") {
		t.Errorf("forks -1: %d %s, want 400 naming forks", code, body)
	}
	if jobs := getDoc(t, hs.URL+"/api/v1/jobs").(map[string]any)["jobs"].([]any); len(jobs) != 0 {
		t.Fatalf("a refused batch stored %v", jobs)
	}
	if code, body := post(t, hs.URL+"/api/v1/ingest", []byte(fmt.Sprintf(doc, "3")), nil); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	sz := getDoc(t, hs.URL+"/api/v1/jobs").(map[string]any)["jobs"].([]any)[0].(map[string]any)["sizing"].(map[string]any)
	if got := fmt.Sprint(sz["forks"], sz["hosts"], sz["memory_limit_bytes"], sz["oom_kills"], sz["oom_counter"], sz["project_revision"], sz["ee_image"]); got != "3 4 2.68435456e+08 2 9abcee:1" {
		t.Errorf("sizing %s", got)
	}
}
