package server_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/peakline/peakline/tsdb"
)

// scrapeTemplateMetrics reads the per-template series of /metrics as
// "metric template_id" → value.
func scrapeTemplateMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "peakline_template_") {
			continue
		}
		for _, m := range f.Metric {
			key := name
			for _, l := range m.Label {
				key += " " + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			}
		}
	}
	return out
}

// /metrics counts per template the runs OOM-killed and at their cap
// among its last runs, the regressions of its newest run, its highest
// peak and its current limit.
func TestTemplateMetrics(t *testing.T) {
	hs, store := newTestServer(t)
	for i, forks := range []int{1, 2, 3, 4} {
		sizedTemplateRun(t, store, fmt.Sprint(1001+i), i, forks, 0, tsdb.JobInfo{})
	}
	sizedTemplateRun(t, store, "1005", 4, 5, 300, tsdb.JobInfo{MemoryLimit: fmt.Sprint(300 << 20), OOMKills: "1", OOMCounter: "14"})
	// At its cap: a peak of 300 MiB under a 310 MiB limit (96.8 %).
	sizedTemplateRun(t, store, "1006", 5, 4, 300, tsdb.JobInfo{MemoryLimit: fmt.Sprint(310 << 20)})
	// Template 8: four steady runs, then one holding 3 times the memory.
	for i, mem := range []float64{200, 205, 198, 202, 640} {
		templateRun(t, store, "8", fmt.Sprint(2001+i), 10+i, mem)
	}
	got := scrapeTemplateMetrics(t, hs.URL)
	want := map[string]float64{
		"peakline_template_runs 7": 6, "peakline_template_runs_oom_killed 7": 1, "peakline_template_runs_at_cap 7": 1,
		"peakline_template_regressions 7": 0, "peakline_template_memory_max_bytes 7": 300 << 20, "peakline_template_memory_limit_bytes 7": 310 << 20,
		"peakline_template_runs 8": 5, "peakline_template_runs_oom_killed 8": 0, "peakline_template_runs_at_cap 8": 0,
		"peakline_template_regressions 8": 1, "peakline_template_memory_max_bytes 8": 640 << 20,
		"peakline_template_metrics_omitted": 0, "peakline_template_metrics_errors_total": 0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["peakline_template_memory_limit_bytes 8"]; ok {
		t.Error("template 8 has a memory limit series without a limit")
	}
	if len(got) != len(want) {
		t.Errorf("%d template series, want %d: %v", len(got), len(want), got)
	}
}

// The alert rule docs/rightsizing.md shows is valid, and fires on the
// series /metrics exports, with the template in its labels.
func TestRightsizingAlertRule(t *testing.T) {
	promtool := findTool(t, "promtool")
	doc, err := os.ReadFile("../docs/rightsizing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\ngroups:")
	rule, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/rightsizing.md has no alert rule block")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte("groups:"+rule), 0o644); err != nil {
		t.Fatal(err)
	}
	const tests = `rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'peakline_template_runs_oom_killed{template_id="7"}'
        values: '0 0 1 1 1'
      - series: 'peakline_template_runs_oom_killed{template_id="8"}'
        values: '0 0 0 0 0'
    alert_rule_test:
      - eval_time: 1m
        alertname: AnsibleTemplateOOMKilled
        exp_alerts: []
      - eval_time: 4m
        alertname: AnsibleTemplateOOMKilled
        exp_alerts:
          - exp_labels: {severity: warning, template_id: "7"}
            exp_annotations:
              summary: "Job template 7: 1 of its last 20 runs were OOM-killed"
              description: "See /templates/7 (Right-size) for the memory to set."
`
	if err := os.WriteFile(filepath.Join(dir, "tests.yml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, time.Minute, promtool, "check", "rules", filepath.Join(dir, "rules.yml"))
	runTool(t, time.Minute, promtool, "test", "rules", filepath.Join(dir, "tests.yml"))
}
