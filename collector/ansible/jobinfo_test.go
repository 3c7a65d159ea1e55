package ansible

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyPDD copies a test tree to a temporary dir the test may change.
func copyPDD(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "pdd")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A runner tree's env/extravars, as AWX writes them in YAML or JSON,
// give the job its AWX id and template; the status file its status; the
// job events its playbook and each task's play, role and task_path;
// ReadOptions override the tree.
func TestReadJobInfo(t *testing.T) {
	f := func(extravars string, opts ReadOptions, wantID string, want JobInfo) {
		t.Helper()
		pdd := copyPDD(t, realTree("runner-loops"))
		if extravars != "" {
			if err := os.WriteFile(filepath.Join(pdd, "env", "extravars"), []byte(extravars), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := Read(pdd, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].ID != wantID || jobs[0].Info != want {
			t.Fatalf("read %d jobs, first %q %+v; want one, %q %+v", len(jobs), jobs[0].ID, jobs[0].Info, wantID, want)
		}
		task := jobs[0].Tasks[1]
		if task.Name != "fail but ignore" || task.Play != "loops, handlers and ignored failures" || task.Role != "" || task.Path != "/tmp/gen/pdd/project/loops.yml:11" {
			t.Fatalf("task 1 = %+v, want play, task_path of its start event", task)
		}
	}
	base := JobInfo{Status: "successful", Playbook: "loops.yml", Forks: DefaultForks, Hosts: 1}
	f("", ReadOptions{}, "loops", base)
	f("awx_job_id: 1005\nawx_job_template_id: 7\nawx_job_template_name: deploy-web\nawx_user_name: admin\n", ReadOptions{}, "1005",
		JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "successful", Playbook: "loops.yml", Forks: DefaultForks, Hosts: 1})
	f(`{"tower_job_id": 42, "tower_job_template_id": 3, "tower_job_template_name": "nightly", "awx_job_template_name": "nightly-awx"}`, ReadOptions{}, "42",
		JobInfo{TemplateID: "3", TemplateName: "nightly-awx", Status: "successful", Playbook: "loops.yml", Forks: DefaultForks, Hosts: 1})
	f("awx_job_id: 1005\nawx_job_template_id: 7\n", ReadOptions{JobID: "x", TemplateID: "8", TemplateName: "other"}, "x",
		JobInfo{TemplateID: "8", TemplateName: "other", Status: "successful", Playbook: "loops.yml", Forks: DefaultForks, Hosts: 1})
	f("---\n{}\n", ReadOptions{TemplateID: "9"}, "loops", JobInfo{TemplateID: "9", Status: "successful", Playbook: "loops.yml", Forks: DefaultForks, Hosts: 1})

	bad := func(extravars, wantMsg string) {
		t.Helper()
		pdd := copyPDD(t, realTree("runner-loops"))
		if err := os.WriteFile(filepath.Join(pdd, "env", "extravars"), []byte(extravars), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(pdd, ReadOptions{}); err == nil || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("Read with extravars %q: %v, want an error naming %q", extravars, err, wantMsg)
		}
	}
	bad("- a\n- b\n", "want a YAML or JSON mapping")
	bad("awx_job_template_id: [7]\n", "awx_job_template_id: must be a string or a number")
	bad("awx_job_id: {a: 1}\n", "awx_job_id: must be a string or a number")
	bad("awx_job_id: \"10\\n01\"\n", "env/extravars\": awx_job_id: has a control character at byte 2")
	bad("tower_job_template_name: \"deploy\\tweb\"\n", "env/extravars\": tower_job_template_name: has a control character at byte 6")
}

// The status file must hold one word.
func TestReadStatusFile(t *testing.T) {
	pdd := copyPDD(t, realTree("runner-loops"))
	status := filepath.Join(pdd, "artifacts", "loops", "status")
	if err := os.WriteFile(status, []byte("failed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if jobs, err := Read(pdd, ReadOptions{}); err != nil || jobs[0].Info.Status != "failed" {
		t.Fatalf("status: %v, %v; want failed", jobs, err)
	}
	if err := os.WriteFile(status, []byte("no such\nthing"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(pdd, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "want one word") {
		t.Fatalf("bad status: %v, want an error", err)
	}
	if err := os.Remove(status); err != nil {
		t.Fatal(err)
	}
	if jobs, err := Read(pdd, ReadOptions{}); err != nil || jobs[0].Info.Status != "" {
		t.Fatalf("no status file: %v; want no status", err)
	}
}

// AWX's own extravars (every key and string tagged !unsafe) give the job
// id even when the runner ident says otherwise.
func TestReadAWXExtravars(t *testing.T) {
	pdd := copyPDD(t, realTree("template-runs/1005"))
	if err := os.Rename(filepath.Join(pdd, "artifacts", "1005"), filepath.Join(pdd, "artifacts", "ident-x")); err != nil {
		t.Fatal(err)
	}
	jobs, err := Read(pdd, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := JobInfo{TemplateID: "7", TemplateName: "deploy-web", Status: "successful", Playbook: "site.yml",
		Forks: DefaultForks, Hosts: 1, ProjectRevision: "3f2c9e1a7b6d4c0e8f5a2b1c9d7e6f4a3b2c1d0e"}
	if len(jobs) != 1 || jobs[0].ID != "1005" || jobs[0].Info != want {
		t.Fatalf("read %d jobs, first %q %+v; want 1005 %+v", len(jobs), jobs[0].ID, jobs[0].Info, want)
	}
	if tk := jobs[0].Tasks[2]; tk.Name != "allocate cache" || !strings.HasSuffix(tk.Path, "/project/site.yml:15") || tk.Play == "" {
		t.Fatalf("task 2 = %+v, want allocate cache at project/site.yml:15 with its play", tk)
	}
}
