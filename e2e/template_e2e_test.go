package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// httpJSON GETs url and decodes its JSON answer into dst.
func httpJSON(t *testing.T, url string, dst any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// Six real ansible-runner runs of AWX job template 7, one (1005) with a
// cache 2.8 times the usual (testdata/ansible/template-runs/README.txt):
// imported as AWX left them, they are jobs 1001 to 1006 of template 7,
// and the history flags exactly the memory of 1005's "allocate cache"
// and nothing else, in any run; the CI gate fails 1005 and passes 1006.
func TestTemplateRunsEndToEnd(t *testing.T) {
	s := serve(t, "--data", t.TempDir())
	runs := importTemplateRuns(t, s.URL, "../testdata/ansible/template-runs/100?", 6)
	// The template, name, status and playbook come from the tree.
	var jobs struct {
		Jobs []struct {
			JobID        string `json:"job_id"`
			TemplateID   string `json:"template_id"`
			TemplateName string `json:"template_name"`
			Status       string `json:"status"`
			Playbook     string `json:"playbook"`
		} `json:"jobs"`
	}
	httpJSON(t, s.URL+"/api/v1/jobs?template=7", &jobs)
	var got []string
	for _, j := range jobs.Jobs {
		got = append(got, strings.Join([]string{j.JobID, j.TemplateID, j.TemplateName, j.Status, j.Playbook}, " "))
	}
	want := []string{"1006", "1005", "1004", "1003", "1002", "1001"}
	for i, id := range want {
		want[i] = id + " 7 deploy-web successful site.yml"
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("jobs of template 7:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var h struct {
		TemplateName string `json:"template_name"`
		Runs         []struct {
			JobID string `json:"job_id"`
		} `json:"runs"`
		Tasks []struct {
			Key  string `json:"key"`
			Runs []struct {
				JobID string `json:"job_id"`
			} `json:"runs"`
			Regressions []struct {
				JobID    string  `json:"job_id"`
				Metric   string  `json:"metric"`
				Value    float64 `json:"value"`
				Baseline float64 `json:"baseline"`
				Factor   float64 `json:"factor"`
			} `json:"regressions"`
		} `json:"tasks"`
	}
	httpJSON(t, s.URL+"/api/v1/templates/7/history", &h)
	var keys, flags []string
	for _, task := range h.Tasks {
		keys = append(keys, fmt.Sprintf("%s (%d runs)", task.Key, len(task.Runs)))
		for _, r := range task.Regressions {
			flags = append(flags, fmt.Sprintf("%s %s %s", task.Key, r.JobID, r.Metric))
			// The README: about 407 MiB against 146.5 MiB.
			if r.Factor < 2.6 || r.Factor > 3 || r.Value < 380<<20 || r.Baseline > 160<<20 || r.Baseline < 130<<20 {
				t.Errorf("regression %+v: want about 2.8 times, ~407 MiB against ~147 MiB", r)
			}
		}
	}
	wantKeys := "site.yml:8 check service (6 runs), site.yml:10 render config (6 runs), site.yml:15 allocate cache (6 runs), site.yml:22 compress assets (6 runs), " +
		"site.yml:24 start workers (6 runs), site.yml:26 check service (6 runs), site.yml:28 reload web (6 runs), site.yml:30 report (6 runs)"
	if len(h.Runs) != 6 || h.Runs[0].JobID != "1001" || h.Runs[5].JobID != "1006" || h.TemplateName != "deploy-web" || strings.Join(keys, ", ") != wantKeys {
		t.Errorf("history: %d runs, name %q, tasks\n%s\nwant 1001..1006, deploy-web,\n%s", len(h.Runs), h.TemplateName, strings.Join(keys, ", "), wantKeys)
	}
	if strings.Join(flags, "; ") != "site.yml:15 allocate cache 1005 memory_max" {
		t.Errorf("regressions: %q, want exactly site.yml:15 allocate cache 1005 memory_max", flags)
	}

	// The CI gate: 1005 fails, the newest run (1006) passes.
	if out, _, code := runCode(t, "regressions", "--server", s.URL, "--template", "7", "--job", "1005"); code != 1 || !strings.Contains(out, "site.yml:15 allocate cache  memory_max") {
		t.Errorf("regressions --job 1005: exit %d\n%s\nwant 1 and the cache's memory", code, out)
	}
	if out, _, code := runCode(t, "regressions", "--server", s.URL, "--template", "7"); code != 0 || !strings.Contains(out, "job 1006: no regressions against the other 5 runs") {
		t.Errorf("regressions (newest): exit %d\n%s\nwant 0", code, out)
	}

	// --job, --template and --template-name override the tree.
	if out, err := run(t, "import", "--server", s.URL, "--job", "x1", "--template", "8", "--template-name", "other", runs[0]); err != nil {
		t.Fatalf("import with overrides: %v\n%s", err, out)
	}
	httpJSON(t, s.URL+"/api/v1/jobs?template=8", &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != "x1" || jobs.Jobs[0].TemplateName != "other" || jobs.Jobs[0].Status != "successful" {
		t.Errorf("jobs of template 8: %+v, want x1 named other", jobs.Jobs)
	}
}

// templateRuns returns the run directories glob names, which must be want.
func templateRuns(t *testing.T, glob string, want int) []string {
	t.Helper()
	runs, err := filepath.Glob(glob)
	if err != nil || len(runs) != want {
		t.Fatalf("template runs: %q %v, want %d", runs, err, want)
	}
	return runs
}

// importTemplateRuns imports the want run directories glob names through
// the server at url, and returns them.
func importTemplateRuns(t *testing.T, url, glob string, want int) []string {
	t.Helper()
	runs := templateRuns(t, glob, want)
	if out, err := run(t, append([]string{"import", "--server", url}, runs...)...); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	return runs
}
