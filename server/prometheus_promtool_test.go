package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/server"
)

// promtool, Prometheus' own CLI, pushes samples by remote write and reads
// them back with instant, range, series and label queries.
func TestPromtoolPushAndQuery(t *testing.T) {
	promtool := findTool(t, "promtool")
	env := newPromEnv(t, server.Config{})
	url := env.hs.URL + "/prometheus"
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	dir := t.TempDir()

	// Three pushes, one a minute, each a text exposition with timestamps.
	for k := 0; k < 3; k++ {
		ts := t0.Add(time.Duration(k) * time.Minute).UnixMilli()
		text := fmt.Sprintf(`# HELP peakline_promtool_tasks_total Tasks run.
# TYPE peakline_promtool_tasks_total counter
peakline_promtool_tasks_total{host="web1"} %d %d
peakline_promtool_tasks_total{host="web2"} %d %d
# TYPE peakline_promtool_load gauge
peakline_promtool_load{host="web1"} %g %d
`, 60*(k+1), ts, 120*(k+1), ts, 0.5*float64(k+1), ts)
		file := filepath.Join(dir, fmt.Sprintf("push%d.prom", k))
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out := runTool(t, time.Minute, promtool, "push", "metrics", "--label=job_id=pt", url, file)
		if !strings.Contains(out, "SUCCESS") {
			t.Fatalf("push %d: %s", k, out)
		}
	}
	// Also to the path without the /prometheus prefix.
	file := filepath.Join(dir, "extra.prom")
	text := fmt.Sprintf("peakline_promtool_load{host=\"web2\"} 7 %d\n", t0.Add(2*time.Minute).UnixMilli())
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, time.Minute, promtool, "push", "metrics", "--label=job_id=pt", env.hs.URL, file)

	end := t0.Add(2 * time.Minute)
	out := runTool(t, time.Minute, promtool, "query", "-o", "json", "instant", "--time", fmt.Sprint(end.Unix()), url,
		`sum by (job_id) (rate(peakline_promtool_tasks_total[3m]))`)
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &vec); err != nil {
		t.Fatalf("instant query output: %v: %s", err, out)
	}
	// web1 grows 60/min and web2 120/min: 3/s together.
	if len(vec) != 1 || vec[0].Metric["job_id"] != "pt" || vec[0].Value[1] != "3" {
		t.Fatalf("instant query: %s", out)
	}

	out = runTool(t, time.Minute, promtool, "query", "-o", "json", "range",
		"--start", fmt.Sprint(t0.Unix()), "--end", fmt.Sprint(end.Unix()), "--step", "1m", url,
		`peakline_promtool_load{job_id="pt"}`)
	var mat []struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	if err := json.Unmarshal([]byte(out), &mat); err != nil {
		t.Fatalf("range query output: %v: %s", err, out)
	}
	got := map[string]string{}
	for _, s := range mat {
		var vals []string
		for _, v := range s.Values {
			vals = append(vals, v[1].(string))
		}
		got[s.Metric["host"]] = strings.Join(vals, " ")
	}
	if len(got) != 2 || got["web1"] != "0.5 1 1.5" || got["web2"] != "7" {
		t.Fatalf("range query: %v from %s", got, out)
	}

	out = runTool(t, time.Minute, promtool, "query", "series", "--match", `peakline_promtool_tasks_total{job_id="pt"}`, url)
	if strings.Count(out, "peakline_promtool_tasks_total") != 2 || !strings.Contains(out, `host="web2"`) {
		t.Fatalf("series query: %s", out)
	}
	out = runTool(t, time.Minute, promtool, "query", "labels", url, "host")
	if strings.TrimSpace(out) != "web1\nweb2" {
		t.Fatalf("label values: %q", out)
	}
}
