package server_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

func TestJobOutputURL(t *testing.T) {
	f := func(base, id, want string) {
		t.Helper()
		if got := server.JobOutputURL(base, id); got != want {
			t.Errorf("JobOutputURL(%q, %q) = %q, want %q", base, id, got, want)
		}
	}
	f("https://awx.example", "42", "https://awx.example/#/jobs/playbook/42/output")
	f("https://awx.example/", "42", "https://awx.example/#/jobs/playbook/42/output")
	f("https://ops.example/awx/", "9001", "https://ops.example/awx/#/jobs/playbook/9001/output")
	f("", "42", "")
	// Not AWX job ids: ansible-runner idents.
	f("https://awx.example", "demo2", "")
	f("https://awx.example", "02fc0000-0001-1de2", "")
	f("https://awx.example", "", "")
	f("https://awx.example", "12345678901234567890", "")
}

func TestCheckAWXUIURL(t *testing.T) {
	for _, ok := range []string{"", "https://awx.example", "http://10.0.0.5:8052/", "https://ops.example/awx"} {
		if err := server.CheckAWXUIURL(ok); err != nil {
			t.Errorf("CheckAWXUIURL(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"awx.example", "ftp://awx.example", "https://", "https://awx.example/#/jobs", "https://awx.example/?x=1", "/awx"} {
		err := server.CheckAWXUIURL(bad)
		if err == nil || !strings.Contains(err.Error(), "https://awx.example") {
			t.Errorf("CheckAWXUIURL(%q) = %v, want an error with an example", bad, err)
		}
	}
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := server.New(server.Config{AWXUIURL: "awx.example"}, store, nil, nil); err == nil || !strings.Contains(err.Error(), "AWX UI URL") {
		t.Errorf("server.New with a bad AWX UI URL: %v, want an error naming it", err)
	}
}

// With an AWX UI URL, the graph and tasks payloads of an AWX job link
// to its output page, beside the events search; a job whose id is no
// AWX job id gets no such link.
func TestPayloadJobURL(t *testing.T) {
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{EventsURL: testEventsURL, AWXUIURL: "https://awx.example/"}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); _ = store.Close() }()
	const start = 1_796_040_000_000
	statusJob(t, store, "4242", start, "successful")
	statusJob(t, store, "runner-ident", start, "successful")
	type doc struct {
		JobURL    *string `json:"job_url"`
		EventsURL string  `json:"events_url"`
	}
	for _, path := range []string{"graph?points=10", "tasks"} {
		var d doc
		if code := getJSON(t, hs.URL+"/api/v1/jobs/4242/"+path, &d); code != 200 || d.JobURL == nil || *d.JobURL != "https://awx.example/#/jobs/playbook/4242/output" || !strings.Contains(d.EventsURL, "/jobs/4242/") {
			t.Errorf("%s of job 4242: %d, job_url %v, events_url %q; want the AWX output page and the events search", path, code, d.JobURL, d.EventsURL)
		}
		d = doc{}
		if code := getJSON(t, hs.URL+"/api/v1/jobs/runner-ident/"+path, &d); code != 200 || d.JobURL != nil {
			t.Errorf("%s of job runner-ident: %d, job_url %v; want none", path, code, d.JobURL)
		}
	}
	// Without it, none.
	hs2, store2 := newTestServer(t)
	statusJob(t, store2, "4242", start, "successful")
	var d doc
	if code := getJSON(t, hs2.URL+"/api/v1/jobs/4242/graph?points=10", &d); code != 200 || d.JobURL != nil {
		t.Errorf("graph without an AWX UI URL: %d, job_url %v; want none", code, d.JobURL)
	}
}
