package awxtest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
)

const loopsEvents = "../../../testdata/ansible/runner-loops/artifacts/loops/job_events"

// page is the part of an events answer the tests read.
type page struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  []struct {
		Counter int64  `json:"counter"`
		Created string `json:"created"`
		Job     int64  `json:"job"`
		Event   string `json:"event"`
		Task    string `json:"task"`
	} `json:"results"`
}

func get(t *testing.T, srv *awxtest.Server, token, path string, dst any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if dst != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(dst); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

func TestEventsFiltersAndPages(t *testing.T) {
	srv := awxtest.NewServer(awxtest.Options{Token: "tk"})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 42}, loopsEvents)
	for _, tc := range []struct {
		query          string
		status         int
		counters       []int64
		count          int
		next, previous string
	}{
		{"", 200, seq(1, 25), 32, "/api/v2/jobs/42/job_events/?page=2", "<null>"},
		{"?page=2", 200, seq(26, 32), 32, "<null>", "/api/v2/jobs/42/job_events/?page=1"},
		{"?page=3", 404, nil, 0, "", ""},
		{"?order_by=counter&counter__gt=30", 200, []int64{31, 32}, 2, "<null>", "<null>"},
		{"?counter__gte=3&counter__lte=5", 200, []int64{3, 4, 5}, 3, "<null>", "<null>"},
		{"?counter__lt=3", 200, []int64{1, 2}, 2, "<null>", "<null>"},
		{"?counter=29", 200, []int64{29}, 1, "<null>", "<null>"},
		{"?order_by=-counter&page_size=3", 200, []int64{32, 31, 30}, 32, "/api/v2/jobs/42/job_events/?order_by=-counter&page=2&page_size=3", "<null>"},
		{"?page_size=500", 200, seq(1, 32), 32, "<null>", "<null>"},
		{"?counter__gt=10&page_size=10&page=2&order_by=counter", 200, seq(21, 30), 22,
			"/api/v2/jobs/42/job_events/?counter__gt=10&order_by=counter&page=3&page_size=10",
			"/api/v2/jobs/42/job_events/?counter__gt=10&order_by=counter&page=1&page_size=10"},
		{"?counter__gt=x", 400, nil, 0, "", ""},
		{"?order_by=created", 400, nil, 0, "", ""},
	} {
		var p page
		status := get(t, srv, "tk", "/api/v2/jobs/42/job_events/"+tc.query, &p)
		if status != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.query, status, tc.status)
		}
		if status != 200 {
			continue
		}
		var got []int64
		for _, r := range p.Results {
			got = append(got, r.Counter)
			if r.Job != 42 {
				t.Fatalf("%s: event %d of job %d", tc.query, r.Counter, r.Job)
			}
		}
		if !slices.Equal(got, tc.counters) || p.Count != tc.count || str(p.Next) != tc.next || str(p.Previous) != tc.previous {
			t.Fatalf("%s: counters %v count %d next %q previous %q; want %v %d %q %q",
				tc.query, got, p.Count, str(p.Next), str(p.Previous), tc.counters, tc.count, tc.next, tc.previous)
		}
	}
	var p page
	get(t, srv, "tk", "/api/v2/jobs/42/job_events/?counter=3", &p)
	if r := p.Results[0]; r.Created != "2026-11-30T04:22:19.520442Z" || r.Event != "playbook_on_task_start" || r.Task != "burn cpu per item, then notify" {
		t.Fatalf("event 3 as served: %+v", r)
	}
	if s := get(t, srv, "tk", "/api/v2/jobs/43/job_events/", nil); s != 404 {
		t.Fatalf("unknown job: %d", s)
	}
	for _, token := range []string{"", "other"} {
		if s := get(t, srv, token, "/api/v2/jobs/42/job_events/", nil); s != 401 {
			t.Fatalf("token %q: %d, want 401", token, s)
		}
	}
	// The log holds every request, numbered, with its status.
	reqs := srv.Requests()
	if len(reqs) != 16 || reqs[2].N != 3 || reqs[2].Status != 404 || reqs[15].Status != 401 || reqs[14].JobID != 42 || reqs[13].JobID != 43 {
		t.Fatalf("log %+v", reqs)
	}
	if n := srv.RequestCount(42); n != 15 {
		t.Fatalf("RequestCount(42) = %d", n)
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for c := from; c <= to; c++ {
		out = append(out, c)
	}
	return out
}

func TestLagHidesEventsUntilSaved(t *testing.T) {
	// Event 3 was created 04:22:19.520442, event 4 at .522468.
	now := time.Date(2026, 11, 30, 4, 22, 19, 520442000, time.UTC).Add(1500 * time.Millisecond)
	srv := awxtest.NewServer(awxtest.Options{Lag: 1500 * time.Millisecond, Now: func() time.Time { return now }})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 7}, loopsEvents)
	var p page
	get(t, srv, "", "/api/v2/jobs/7/job_events/", &p)
	if p.Count != 3 {
		t.Fatalf("%d events visible, want 3", p.Count)
	}
	// Without lag, the events created up to now: 1 to 5 (event 5 at
	// 04:22:20.858416, event 6 at 04:22:22.064490).
	srv.SetLag(0)
	get(t, srv, "", "/api/v2/jobs/7/job_events/?page_size=200", &p)
	if p.Count != 5 {
		t.Fatalf("%d events visible without lag, want 5", p.Count)
	}
}

func TestJobMetadataAndFaults(t *testing.T) {
	srv := awxtest.NewServer(awxtest.Options{})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 5, Name: "deploy", TemplateID: 9, TemplateName: "Deploy app", Playbook: "site.yml", ExecutionNode: "exec-1"}, "")
	srv.FailRequests(awxtest.Fault{Status: 429, RetryAfter: "3"}, 2)
	var j struct {
		ID            int64   `json:"id"`
		Status        string  `json:"status"`
		JobTemplate   int64   `json:"job_template"`
		Playbook      string  `json:"playbook"`
		ExecutionNode string  `json:"execution_node"`
		Finished      *string `json:"finished"`
		Summary       struct {
			JobTemplate struct {
				ID   int64  `json:"id"`
				Name string `json:"name"`
			} `json:"job_template"`
		} `json:"summary_fields"`
	}
	if s := get(t, srv, "", "/api/v2/jobs/5/", &j); s != 200 {
		t.Fatal(s)
	}
	if j.ID != 5 || j.Status != "running" || j.JobTemplate != 9 || j.Summary.JobTemplate.Name != "Deploy app" || j.Playbook != "site.yml" || j.ExecutionNode != "exec-1" || j.Finished != nil {
		t.Fatalf("job %+v", j)
	}
	resp, err := http.Get(srv.URL + "/api/v2/jobs/5/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("fault: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var p page
	if s := get(t, srv, "", "/api/v2/jobs/5/job_events/", &p); s != 200 || p.Count != 0 || len(p.Results) != 0 {
		t.Fatalf("a job without events: %d %+v", s, p)
	}
}

const adHocEvents = "../../../testdata/ansible/runner-adhoc/artifacts/adhoc/job_events"

// TestUnifiedJobsShapes checks the unified jobs list and each type's
// detail and events in the fields AWX's serializers give them: an ad hoc
// command's events name the command and have no task, play, playbook or
// parent_uuid field; a project update's have no job and no parent_uuid;
// a type's list answers 404 for another type's id.
func TestUnifiedJobsShapes(t *testing.T) {
	srv := awxtest.NewServer(awxtest.Options{})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 42}, loopsEvents)
	srv.AddJob(awxtest.Job{ID: 43, Type: "ad_hoc_command", ModuleName: "shell"}, adHocEvents)
	srv.AddJob(awxtest.Job{ID: 44, Type: "project_update"}, loopsEvents)

	var list struct {
		Count   int              `json:"count"`
		Results []map[string]any `json:"results"`
	}
	f := func(id int64, typ, url string) {
		t.Helper()
		if code := get(t, srv, "", "/api/v2/unified_jobs/?id="+strconv.FormatInt(id, 10), &list); code != 200 || list.Count != 1 || len(list.Results) != 1 {
			t.Fatalf("unified job %d: %d, %+v", id, code, list)
		}
		r := list.Results[0]
		if r["type"] != typ || r["url"] != url || r["id"] != float64(id) {
			t.Errorf("unified job %d: type %v url %v id %v; want %s %s", id, r["type"], r["url"], r["id"], typ, url)
		}
		if _, ok := r["event_processing_finished"]; ok {
			t.Errorf("unified job %d: the list has event_processing_finished", id)
		}
		var detail map[string]any
		if code := get(t, srv, "", url, &detail); code != 200 || detail["type"] != typ {
			t.Errorf("detail of %d at %s: %d %v", id, url, code, detail["type"])
		}
		if _, ok := detail["event_processing_finished"]; !ok {
			t.Errorf("detail of %d: no event_processing_finished", id)
		}
	}
	f(42, "job", "/api/v2/jobs/42/")
	f(43, "ad_hoc_command", "/api/v2/ad_hoc_commands/43/")
	f(44, "project_update", "/api/v2/project_updates/44/")
	if code := get(t, srv, "", "/api/v2/unified_jobs/?id=45", &list); code != 200 || list.Count != 0 || len(list.Results) != 0 {
		t.Errorf("unknown id: %d %+v, want an empty list", code, list)
	}
	for _, p := range []string{"/api/v2/jobs/43/", "/api/v2/jobs/43/job_events/", "/api/v2/ad_hoc_commands/42/", "/api/v2/ad_hoc_commands/44/events/"} {
		if code := get(t, srv, "", p, nil); code != 404 {
			t.Errorf("%s: %d, want 404 (another type's id)", p, code)
		}
	}

	var events struct {
		Count   int              `json:"count"`
		Results []map[string]any `json:"results"`
	}
	if code := get(t, srv, "", awxtest.TypeEventsPath("ad_hoc_command", 43)+"?page_size=200", &events); code != 200 || events.Count != 4 {
		t.Fatalf("ad hoc events: %d, %d events, want the run's 4", code, events.Count)
	}
	for _, ev := range events.Results {
		if ev["type"] != "ad_hoc_command_event" || ev["ad_hoc_command"] != float64(43) || ev["host_name"] == nil {
			t.Errorf("ad hoc event %v: type %v, ad_hoc_command %v", ev["counter"], ev["type"], ev["ad_hoc_command"])
		}
		for _, k := range []string{"task", "play", "playbook", "role", "parent_uuid", "job"} {
			if _, ok := ev[k]; ok {
				t.Errorf("ad hoc event %v has %q, which AdHocCommandEventSerializer does not", ev["counter"], k)
			}
		}
	}
	events.Results = nil // decoding into the same maps would merge them
	if code := get(t, srv, "", awxtest.TypeEventsPath("project_update", 44)+"?page_size=1", &events); code != 200 || len(events.Results) != 1 {
		t.Fatalf("project update events: %d %+v", code, events)
	}
	ev := events.Results[0]
	if ev["type"] != "project_update_event" || ev["project_update"] != float64(44) || ev["task"] == nil {
		t.Errorf("project update event: %v", ev)
	}
	for _, k := range []string{"job", "parent_uuid", "host"} {
		if _, ok := ev[k]; ok {
			t.Errorf("project update event has %q", k)
		}
	}
}
