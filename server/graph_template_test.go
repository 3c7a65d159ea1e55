package server_test

import (
	"encoding/json"
	"testing"
)

// The graph payload names the job's template (for the job page's link
// and "vs usual" column), also for a zoomed window that holds no info
// sample, and leaves the fields out for a job without one.
func TestGraphTemplate(t *testing.T) {
	hs, _ := newTestServer(t)
	batch := func(id, info string) string {
		return `{"job_id":"` + id + `"` + info + `,
			"tasks":[{"counter":3,"uuid":"u1","name":"allocate cache","start":1796010000000}],
			"series":[{"resource":"memory","counter":3,"uuid":"u1","task":"allocate cache","t":[1796010000100,1796010005000],"v":[1000,2000]}]}`
	}
	for _, b := range []string{batch("1001", `,"template_id":"7","template_name":"deploy-web"`), batch("plain", "")} {
		if code, body := post(t, hs.URL+"/api/v1/ingest", []byte(b), nil); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	f := func(path, wantID, wantName string, wantKeys bool) {
		t.Helper()
		var doc map[string]json.RawMessage
		if code := getJSON(t, hs.URL+path, &doc); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		_, hasID := doc["template_id"]
		_, hasName := doc["template_name"]
		if hasID != wantKeys || hasName != wantKeys {
			t.Errorf("GET %s: template_id present %v, template_name present %v; want %v", path, hasID, hasName, wantKeys)
		}
		var got struct {
			JobID        string `json:"job_id"`
			TemplateID   string `json:"template_id"`
			TemplateName string `json:"template_name"`
			Series       []any  `json:"series"`
		}
		raw, _ := json.Marshal(doc)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.TemplateID != wantID || got.TemplateName != wantName || len(got.Series) != 1 {
			t.Errorf("GET %s: template %q %q, %d series; want %q %q and 1 series", path, got.TemplateID, got.TemplateName, len(got.Series), wantID, wantName)
		}
	}
	f("/api/v1/jobs/1001/graph?points=10", "7", "deploy-web", true)
	f("/api/v1/jobs/1001/graph?points=10&from=1796010004000&to=1796010006000", "7", "deploy-web", true)
	f("/api/v1/jobs/plain/graph?points=10", "", "", false)
}
