package server_test

import (
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// statusJob stores a two-task job starting at startMs whose senders
// reported the statuses given, in order, one batch each (none: one batch
// without a status). Task 3 ("compile") holds the CPU peak, task 6
// ("link") the memory peak; the last sample is at startMs + 2500 and the
// last event at startMs + 3000.
func statusJob(t *testing.T, store *tsdb.Store, id string, startMs int64, statuses ...string) {
	t.Helper()
	tasks := []tsdb.Task{{Counter: 3, UUID: "c-" + id, Name: "compile", StartMs: startMs}, {Counter: 6, UUID: "l-" + id, Name: "link", StartMs: startMs + 1000}}
	series := []tsdb.SeriesData{
		{Resource: "cpu", Counter: 3, UUID: "c-" + id, Task: "compile", Ts: []int64{startMs + 100, startMs + 500}, Vs: []float64{180, 90}},
		{Resource: "memory", Counter: 3, UUID: "c-" + id, Task: "compile", Ts: []int64{startMs + 100, startMs + 500}, Vs: []float64{1e6, 2e6}},
		{Resource: "cpu", Counter: 6, UUID: "l-" + id, Task: "link", Ts: []int64{startMs + 1500, startMs + 2500}, Vs: []float64{40, 170}},
		{Resource: "memory", Counter: 6, UUID: "l-" + id, Task: "link", Ts: []int64{startMs + 1500, startMs + 2500}, Vs: []float64{9e6, 3e6}},
	}
	if len(statuses) == 0 {
		statuses = []string{""}
	}
	for i, st := range statuses {
		// Each batch ends at the last event: an info sample takes the
		// newest time of its batch.
		b := &tsdb.Batch{JobID: id, Info: tsdb.JobInfo{Status: st, TemplateID: "41"}, LastEvent: &tsdb.Event{Counter: 9, TimeMs: startMs + 3000}}
		if i == 0 {
			b.Tasks, b.Series = tasks, series
		}
		if _, err := store.Append(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// statusEntry is the part of a job of GET /api/v1/jobs this test reads.
type statusEntry struct {
	JobID          string `json:"job_id"`
	Status         string `json:"status"`
	ReportedStatus string `json:"reported_status"`
	Peaks          map[string]struct {
		T       int64   `json:"t"`
		V       float64 `json:"v"`
		Counter int64   `json:"counter"`
		Task    string  `json:"task"`
	} `json:"peaks"`
}

// statusListDoc is the part of GET /api/v1/jobs this test reads.
type statusListDoc struct {
	Jobs  []statusEntry `json:"jobs"`
	Next  string        `json:"next"`
	Total int           `json:"total"`
	Error string        `json:"error"`
}

// The jobs list shows each job's state (what its newest reported status
// maps to) beside the status reported, and the task behind each peak;
// ?status= keeps the jobs in the states named, across pages, with
// the total counting them alone.
func TestListJobsStatus(t *testing.T) {
	hs, store := newTestServer(t)
	const start = 1_796_020_000_000
	// id → reported statuses in order, and the state the list must show.
	jobs := []struct {
		id       string
		reported []string
		state    string
	}{
		{"run-1", []string{"running"}, "running"},
		{"run-2", []string{"pending"}, "running"},
		{"ok-1", []string{"running", "successful"}, "successful"},
		{"ok-2", []string{"successful"}, "successful"},
		{"bad-1", []string{"running", "failed"}, "failed"},
		{"bad-2", []string{"error"}, "failed"},
		{"bad-3", []string{"timeout"}, "failed"},
		{"stop-1", []string{"running", "canceled"}, "canceled"},
		{"what-1", nil, "unknown"},
		{"what-2", []string{"rebooting"}, "unknown"},
	}
	rng := rand.New(rand.NewSource(3))
	for i, j := range jobs {
		statusJob(t, store, j.id, start+int64(rng.Intn(50)+i*60)*1000, j.reported...)
	}

	var all statusListDoc
	if code := getJSON(t, hs.URL+"/api/v1/jobs", &all); code != 200 || all.Total != len(jobs) {
		t.Fatalf("GET /api/v1/jobs: %d, total %d, want 200 and %d", code, all.Total, len(jobs))
	}
	for _, j := range jobs {
		i := slices.IndexFunc(all.Jobs, func(e statusEntry) bool { return e.JobID == j.id })
		if i < 0 {
			t.Fatalf("job %s not listed", j.id)
		}
		e := all.Jobs[i]
		wantReported := ""
		if len(j.reported) > 0 {
			wantReported = j.reported[len(j.reported)-1]
		}
		if e.Status != j.state || e.ReportedStatus != wantReported {
			t.Errorf("job %s: status %q reported %q, want %q and %q", j.id, e.Status, e.ReportedStatus, j.state, wantReported)
		}
		cpu, mem := e.Peaks["cpu"], e.Peaks["memory"]
		if cpu.V != 180 || cpu.Counter != 3 || cpu.Task != "compile" || mem.V != 9e6 || mem.Counter != 6 || mem.Task != "link" {
			t.Errorf("job %s: peaks %+v, want cpu 180 in task 3 compile, memory 9e6 in task 6 link", j.id, e.Peaks)
		}
	}

	// Each filter, walked a page of 2 at a time.
	filter := func(status string, want ...string) {
		t.Helper()
		var got []string
		total := -1
		q := url.Values{"status": {status}, "limit": {"2"}}
		for page := 0; page < 20; page++ {
			var doc statusListDoc
			if code := getJSON(t, hs.URL+"/api/v1/jobs?"+q.Encode(), &doc); code != 200 {
				t.Fatalf("status=%s: %d %s", status, code, doc.Error)
			}
			if total < 0 {
				total = doc.Total
			}
			for _, e := range doc.Jobs {
				got = append(got, e.JobID)
			}
			if doc.Next == "" {
				break
			}
			q.Set("cursor", doc.Next)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || total != len(want) {
			t.Errorf("status=%s lists %q (total %d), want %q (%d)", status, got, total, want, len(want))
		}
	}
	byState := map[string][]string{}
	for _, j := range jobs {
		byState[j.state] = append(byState[j.state], j.id)
	}
	for state, ids := range byState {
		filter(state, ids...)
	}
	filter("failed,canceled", append(slices.Clone(byState["failed"]), byState["canceled"]...)...)
	filter(" running , unknown", append(slices.Clone(byState["running"]), byState["unknown"]...)...)
	// With the id filter and the template filter too.
	var doc statusListDoc
	if code := getJSON(t, hs.URL+"/api/v1/jobs?status=failed&q=BAD-&template=41", &doc); code != 200 || doc.Total != 3 {
		t.Errorf("status=failed&q=BAD-&template=41: %d, total %d, want 200 and 3", code, doc.Total)
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs?status=failed&template=42", &doc); code != 200 || doc.Total != 0 {
		t.Errorf("status=failed&template=42: %d, total %d, want 200 and 0", code, doc.Total)
	}

	bad := func(query string) {
		t.Helper()
		var e statusListDoc
		if code := getJSON(t, hs.URL+"/api/v1/jobs?"+query, &e); code != 400 || !strings.HasPrefix(e.Error, "status: ") || !strings.Contains(e.Error, "running, successful, failed, canceled, unknown") {
			t.Errorf("GET /api/v1/jobs?%s: %d %q, want 400 naming status and its values", query, code, e.Error)
		}
	}
	bad("status=done")
	bad("status=")
	bad("status=failed,")
	bad("status=Failed")
	bad("status=failed&status=running")
}

// The graph payload carries the job's state and, once its status says
// it ended, its end: the last time the job shows (here its last event,
// after the last sample), in a zoomed window too. A running job, and
// one whose status is unknown, has no end.
func TestGraphStatusEnd(t *testing.T) {
	hs, store := newTestServer(t)
	const start = 1_796_030_000_000
	statusJob(t, store, "done", start, "running", "failed")
	statusJob(t, store, "going", start, "running")
	statusJob(t, store, "unsaid", start)
	statusJob(t, store, "halted", start, "canceled")
	type doc struct {
		Status         string `json:"status"`
		ReportedStatus string `json:"reported_status"`
		End            *int64 `json:"end"`
	}
	check := func(id, query, status, reported string, end int64) {
		t.Helper()
		var d doc
		if code := getJSON(t, hs.URL+"/api/v1/jobs/"+id+"/graph?"+query, &d); code != 200 {
			t.Fatalf("graph of %s: %d", id, code)
		}
		gotEnd := int64(0)
		if d.End != nil {
			gotEnd = *d.End
		}
		if d.Status != status || d.ReportedStatus != reported || gotEnd != end || (end == 0) != (d.End == nil) {
			t.Errorf("graph of %s?%s: status %q reported %q end %d (set %t), want %q %q %d", id, query, d.Status, d.ReportedStatus, gotEnd, d.End != nil, status, reported, end)
		}
	}
	check("done", "points=100", "failed", "failed", start+3000)
	check("done", fmt.Sprintf("points=100&from=%d&to=%d", start, start+600), "failed", "failed", start+3000)
	check("halted", "points=100", "canceled", "canceled", start+3000)
	check("going", "points=100", "running", "running", 0)
	check("unsaid", "points=100", "unknown", "", 0)
}
