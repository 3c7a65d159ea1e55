package server_test

import (
	"strings"
	"testing"
)

// The JSON batch carries the job's template, status and playbook and
// each task's play, role and task_path; the jobs list shows the first
// and filters by template; a bad field is a 400 naming it.
func TestIngestJobInfo(t *testing.T) {
	hs, store := newTestServer(t)
	const start = 1_796_010_000_000
	batch := func(id, tmpl, extra string) string {
		return `{"job_id":"` + id + `","template_id":"` + tmpl + `"` + extra + `,
			"tasks":[{"counter":3,"uuid":"u1","name":"allocate cache","start":1796010000000,"play":"web","role":"cache","task_path":"site.yml:14"}],
			"series":[{"resource":"memory","counter":3,"uuid":"u1","task":"allocate cache","t":[1796010000100,1796010000200],"v":[1000,2000]}]}`
	}
	for _, b := range []string{
		batch("1001", "7", `,"template_name":"deploy-web","status":"successful","playbook":"site.yml"`),
		batch("1002", "7", `,"status":"failed"`),
		batch("2001", "8", ``),
	} {
		if code, body := post(t, hs.URL+"/api/v1/ingest", []byte(b), nil); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	job, err := store.ReadJob(t.Context(), "1001", -1<<63, 1<<63-1)
	if err != nil {
		t.Fatal(err)
	}
	if tk := job.Tasks[0]; tk.Play != "web" || tk.Role != "cache" || tk.Path != "site.yml:14" {
		t.Errorf("task = %+v, want play web, role cache, task_path site.yml:14", tk)
	}
	var doc struct {
		Jobs []struct {
			JobID        string `json:"job_id"`
			TemplateID   string `json:"template_id"`
			TemplateName string `json:"template_name"`
			Status       string `json:"status"`
			Playbook     string `json:"playbook"`
		} `json:"jobs"`
		Total int `json:"total"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs?template=7", &doc); code != 200 {
		t.Fatalf("GET /api/v1/jobs?template=7: %d", code)
	}
	var got []string
	for _, j := range doc.Jobs {
		got = append(got, j.JobID+":"+j.TemplateID+":"+j.TemplateName+":"+j.Status+":"+j.Playbook)
	}
	if want := "1001:7:deploy-web:successful:site.yml 1002:7::failed:"; strings.Join(got, " ") != want || doc.Total != 2 {
		t.Errorf("jobs of template 7 = %q (total %d), want %q (total 2)", got, doc.Total, want)
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs?template=9", &doc); code != 200 || len(doc.Jobs) != 0 || doc.Total != 0 {
		t.Errorf("jobs of template 9: %d, %d jobs, total %d; want 200 and none", code, len(doc.Jobs), doc.Total)
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs", &doc); code != 200 || doc.Total != 3 {
		t.Errorf("all jobs: %d, total %d; want 200 and 3", code, doc.Total)
	}

	bad := func(body, wantMsg string) {
		t.Helper()
		code, msg := post(t, hs.URL+"/api/v1/ingest", []byte(body), nil)
		if code != 400 || !strings.Contains(msg, wantMsg) {
			t.Errorf("ingest %s: %d %s, want 400 naming %q", body, code, msg, wantMsg)
		}
	}
	bad(`{"job_id":"x","template_name":"`+strings.Repeat("n", 513)+`"}`, "template_name: is 513 bytes long, at most 512 allowed")
	bad(`{"job_id":"x","status":"`+strings.Repeat("s", 33)+`"}`, "status: is 33 bytes long")
	bad(`{"job_id":"x","template_id":7}`, "template_id: must be string")
	bad(`{"job_id":"x","template_name":"deploy\u0001web"}`, "template_name: has a control character (U+0001) at byte 6")
	bad(`{"job_id":"x","tasks":[{"counter":1,"uuid":"u","name":"n","start":1796010000000,"task_path":"`+strings.Repeat("p", 1025)+`"}]}`, "tasks[0].task_path: is 1025 bytes long")
	var e struct{ Error string }
	if code := getJSON(t, hs.URL+"/api/v1/jobs?template=", &e); code != 400 || !strings.Contains(e.Error, "template: must be a job template id") {
		t.Errorf("GET /api/v1/jobs?template=: %d %q, want 400 naming template", code, e.Error)
	}
}
