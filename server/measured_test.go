package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// How a job was measured travels from the batch to the jobs list and
// the graph payload; a later batch without it keeps it; a value other
// than cgroup or process-tree is a 400 naming measured and stores
// nothing.
func TestIngestMeasured(t *testing.T) {
	hs, _ := newTestServer(t)
	batch := func(id, info string) string {
		return `{"job_id":"` + id + `"` + info + `,
			"tasks":[{"counter":3,"uuid":"u1","name":"allocate cache","start":1796010000000}],
			"series":[{"resource":"memory","counter":3,"uuid":"u1","task":"allocate cache","t":[1796010000100,1796010005000],"v":[1000,2000]}]}`
	}
	for _, b := range []string{
		batch("4101", `,"template_id":"7","status":"running","measured":"process-tree"`),
		batch("4102", `,"template_id":"7","measured":"cgroup"`),
		batch("4103", `,"template_id":"7"`),
		`{"job_id":"4101","status":"successful","last_event":{"counter":9,"time":1796010006000}}`,
	} {
		if code, body := post(t, hs.URL+"/api/v1/ingest", []byte(b), nil); code != 200 {
			t.Fatalf("ingest %s: %d %s", b, code, body)
		}
	}

	var list struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs?template=7", &list); code != 200 {
		t.Fatalf("GET /api/v1/jobs?template=7: %d", code)
	}
	var got []string
	for _, j := range list.Jobs {
		m, ok := j["measured"].(string)
		if !ok {
			t.Errorf("job %v: measured = %#v, want a string (always present)", j["job_id"], j["measured"])
		}
		got = append(got, j["job_id"].(string)+":"+j["status"].(string)+":"+m)
	}
	if want := "4101:successful:process-tree 4102:unknown:cgroup 4103:unknown:"; strings.Join(got, " ") != want {
		t.Errorf("jobs of template 7 = %q, want %q", got, want)
	}

	graph := func(id, want string) {
		t.Helper()
		var doc map[string]json.RawMessage
		if code := getJSON(t, hs.URL+"/api/v1/jobs/"+id+"/graph?points=10", &doc); code != 200 {
			t.Fatalf("GET graph of %s: %d", id, code)
		}
		raw, has := doc["measured"]
		if want == "" {
			if has {
				t.Errorf("graph of %s: measured = %s, want it left out", id, raw)
			}
			return
		}
		if string(raw) != `"`+want+`"` {
			t.Errorf("graph of %s: measured = %s, want %q", id, raw, want)
		}
	}
	graph("4101", "process-tree")
	graph("4102", "cgroup")
	graph("4103", "")

	for _, bad := range []string{`"process_tree"`, `"CGROUP"`, `"cgroup "`, `"unknown"`} {
		code, msg := post(t, hs.URL+"/api/v1/ingest", []byte(batch("4199", `,"measured":`+bad)), nil)
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(msg), &e)
		if want := `invalid batch: measured: must be cgroup or process-tree or empty, got ` + bad; code != 400 || e.Error != want {
			t.Errorf("ingest of measured %s: %d %s, want 400 with error %q", bad, code, msg, want)
		}
	}
	if code, msg := post(t, hs.URL+"/api/v1/ingest", []byte(batch("4199", `,"measured":1`)), nil); code != 400 || !strings.Contains(msg, "measured: must be string") {
		t.Errorf("ingest of measured 1: %d %s, want 400 naming measured", code, msg)
	}
	var one struct{ Error string }
	if code := getJSON(t, hs.URL+"/api/v1/jobs/4199/graph", &one); code != 404 {
		t.Errorf("graph of a refused job: %d %q, want 404 (nothing stored)", code, one.Error)
	}
}
