package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// Five real ansible-runner runs of a second job template (9 "app-small",
// testdata/ansible/template-runs-app/README.txt): a play over two hosts
// with a role, two include_tasks files each holding a task "same name",
// a loop, a handler; run 9003 waits 3 s instead of 1 in "wait a bit";
// run 9005 renames "loop items" and adds "added step". The history keeps
// every task apart by its task_path (the two "same name" tasks are two
// tasks, the two hosts one), starts new histories for the renamed and
// the added task, and flags exactly the duration of 9003's "wait a bit".
func TestTemplateRunsAppEndToEnd(t *testing.T) {
	s := serve(t, "--data", t.TempDir())
	importTemplateRuns(t, s.URL, "../testdata/ansible/template-runs-app/900?", 5)
	var h struct {
		Runs []struct {
			JobID  string `json:"job_id"`
			Status string `json:"status"`
		} `json:"runs"`
		Tasks []struct {
			Key  string `json:"key"`
			Role string `json:"role"`
			Runs []struct {
				JobID string `json:"job_id"`
			} `json:"runs"`
			Regressions []struct {
				JobID  string  `json:"job_id"`
				Metric string  `json:"metric"`
				Value  float64 `json:"value"`
			} `json:"regressions"`
		} `json:"tasks"`
	}
	httpJSON(t, s.URL+"/api/v1/templates/9/history", &h)
	var ids, keys, flags []string
	for _, r := range h.Runs {
		ids = append(ids, r.JobID+" "+r.Status)
	}
	for _, task := range h.Tasks {
		var in []string
		for _, r := range task.Runs {
			in = append(in, r.JobID)
		}
		keys = append(keys, fmt.Sprintf("%s [%s] %s", task.Key, task.Role, strings.Join(in, ",")))
		for _, r := range task.Regressions {
			flags = append(flags, fmt.Sprintf("%s %s %s %g", task.Key, r.JobID, r.Metric, r.Value))
		}
	}
	if got, want := strings.Join(ids, ", "), "9001 successful, 9002 successful, 9003 successful, 9004 successful, 9005 successful"; got != want {
		t.Errorf("runs %s, want %s", got, want)
	}
	// The newest run's tasks in its order, then the older runs' others.
	all := "9001,9002,9003,9004,9005"
	wantKeys := []string{
		"roles/web/tasks/main.yml:1 role task [web] " + all,
		"site.yml:10 wait a bit [] " + all,
		"site.yml:13 include a [] " + all,
		"a.yml:1 same name [] " + all,
		"site.yml:15 include b [] " + all,
		"b.yml:1 same name [] " + all,
		"site.yml:17 loop items renamed [] 9005",
		"site.yml:20 notify [] " + all,
		"site.yml:24 added step [] 9005",
		"site.yml:27 extra step [] " + all,
		"site.yml:31 restart thing [] " + all,
		"site.yml:17 loop items [] 9001,9002,9003,9004",
	}
	if got, want := strings.Join(keys, "\n"), strings.Join(wantKeys, "\n"); got != want {
		t.Errorf("tasks:\n%s\nwant\n%s", got, want)
	}
	if got, want := strings.Join(flags, "; "), "site.yml:10 wait a bit 9003 duration_ms 3769"; got != want {
		t.Errorf("regressions %q, want exactly %q", got, want)
	}
}
