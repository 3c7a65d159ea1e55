package awx_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
)

// adHocEvents is a real `ansible-runner run -m shell -a "sleep 1"` run's
// events: playbook_on_start, runner_on_start, runner_on_ok,
// playbook_on_stats, and no playbook_on_task_start.
const adHocEvents = "../../testdata/ansible/runner-adhoc/artifacts/adhoc/job_events"

func TestEventsPath(t *testing.T) {
	f := func(typ, want string, wantOK bool) {
		t.Helper()
		got, ok := awx.EventsPath(typ, 12)
		if got != want || ok != wantOK {
			t.Errorf("EventsPath(%q) = %q, %v; want %q, %v", typ, got, ok, want, wantOK)
		}
	}
	f(awx.TypeJob, "/api/v2/jobs/12/job_events/", true)
	f(awx.TypeAdHocCommand, "/api/v2/ad_hoc_commands/12/events/", true)
	f(awx.TypeProjectUpdate, "/api/v2/project_updates/12/events/", true)
	f(awx.TypeInventoryUpdate, "/api/v2/inventory_updates/12/events/", true)
	f(awx.TypeSystemJob, "/api/v2/system_jobs/12/events/", true)
	f(awx.TypeWorkflowJob, "", false)
	f("", "", false)
}

// TestClientUnifiedJob asks the fake AWX what ids of every type are: the
// list gives each one's type and URL, the URL its detail, and an id AWX
// does not know is ErrJobNotFound (AWX answers an empty list).
func TestClientUnifiedJob(t *testing.T) {
	srv, c := newPair(t, awxtest.Options{}, awx.Config{})
	started := time.Date(2026, 11, 30, 4, 22, 19, 0, time.UTC)
	srv.AddJob(awxtest.Job{ID: 43, Type: "ad_hoc_command", Name: "shell", ModuleName: "shell", Status: "successful",
		ExecutionNode: "node-1", Started: started, Finished: started.Add(2 * time.Second), EventProcessingFinished: true}, adHocEvents)
	srv.AddJob(awxtest.Job{ID: 44, Type: "project_update", Name: "demo project", ExecutionNode: "node-2"}, "")
	ctx := context.Background()
	f := func(id int64, want awx.Job) {
		t.Helper()
		got, err := c.UnifiedJob(ctx, id)
		if err != nil {
			t.Fatalf("unified job %d: %v", id, err)
		}
		// The list leaves event_processing_finished out; the detail has it.
		listed := want
		listed.EventProcessingFinished = false
		if got != listed {
			t.Errorf("unified job %d: %+v, want %+v", id, got, listed)
		}
		detail, err := c.JobAt(ctx, id, got.URL)
		if err != nil || detail != want {
			t.Errorf("job %d at %s: %+v, %v; want %+v", id, got.URL, detail, err, want)
		}
	}
	f(42, awx.Job{ID: 42, Type: awx.TypeJob, URL: "/api/v2/jobs/42/", Name: "loops", Status: "running", TemplateID: 7, TemplateName: "perf loops",
		Playbook: "loops.yml", ExecutionNode: "node-1"})
	f(43, awx.Job{ID: 43, Type: awx.TypeAdHocCommand, URL: "/api/v2/ad_hoc_commands/43/", Name: "shell", Status: "successful",
		ExecutionNode: "node-1", Started: started, Finished: started.Add(2 * time.Second), EventProcessingFinished: true})
	f(44, awx.Job{ID: 44, Type: awx.TypeProjectUpdate, URL: "/api/v2/project_updates/44/", Name: "demo project", Status: "running", ExecutionNode: "node-2"})

	if _, err := c.UnifiedJob(ctx, 45); !errors.Is(err, awx.ErrJobNotFound) {
		t.Errorf("unknown id: %v, want ErrJobNotFound", err)
	}
	// An ad hoc command is not at the jobs' list, as in AWX.
	if _, err := c.Job(ctx, 43); !errors.Is(err, awx.ErrJobNotFound) {
		t.Errorf("ad hoc command 43 as a playbook job: %v, want ErrJobNotFound", err)
	}
}

// TestFollowerAdHocCommand follows a real ad hoc command's events as a
// unified id: it asks unified_jobs first, then only the ad hoc command's
// own detail and events (never /api/v2/jobs/), and its one task starts at
// the module's runner_on_start, named after the module.
func TestFollowerAdHocCommand(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
	var got sink
	srv := awxtest.NewServer(awxtest.Options{Token: testToken, Now: c.now})
	t.Cleanup(srv.Close)
	srv.AddJob(awxtest.Job{ID: 42, Type: "ad_hoc_command", Name: "shell", ModuleName: "shell", Status: "successful", EventProcessingFinished: true}, adHocEvents)
	client, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken)})
	if err != nil {
		t.Fatal(err)
	}
	f := awx.NewFollower(client, 42, awx.FollowerConfig{Now: c.now, MinInterval: time.Second, Sink: &got, Unified: true})
	for polls := 0; !f.Done() || got.completes == 0; polls++ {
		if polls > 10 {
			t.Fatal("not done after 10 polls")
		}
		if n, err := poll(t, c, srv, f, time.Second); err != nil || n != 1 {
			t.Fatalf("poll %d: %d requests, err %v", polls, n, err)
		}
	}
	reqs := srv.Requests()
	if reqs[0].Path != "/api/v2/unified_jobs/" || reqs[0].Query != "id=42" {
		t.Errorf("first request %s?%s, want /api/v2/unified_jobs/?id=42", reqs[0].Path, reqs[0].Query)
	}
	for _, r := range reqs[1:] {
		if r.Path != "/api/v2/ad_hoc_commands/42/" && r.Path != awxtest.TypeEventsPath("ad_hoc_command", 42) {
			t.Errorf("request %s: not the ad hoc command's own", r.Path)
		}
	}
	if m, ok := f.Job(); !ok || m.Type != awx.TypeAdHocCommand || m.Info() != (ansible.JobInfo{TemplateName: "", Status: "successful", Forks: ansible.DefaultForks}) {
		t.Errorf("job %+v (%v), want a successful ad hoc command with no template", m, ok)
	}
	var starts []ansible.JobEvent
	for _, ev := range got.evs {
		if ev.TaskStart {
			starts = append(starts, ev)
		}
	}
	want := runnerEvent(t, adHocEvents, "runner_on_start")
	if len(starts) != 1 || starts[0].Counter != want.counter || starts[0].Task != "shell" || starts[0].TaskUUID != want.taskUUID {
		t.Errorf("task starts %+v, want one at counter %d named shell with task uuid %s", starts, want.counter, want.taskUUID)
	}
	if c := got.counters(); len(c) != 4 {
		t.Errorf("events %v, want the run's 4", c)
	}
}

type runnerEv struct {
	counter  int64
	taskUUID string
}

// runnerEvent returns the first event of type typ in a job_events dir.
func runnerEvent(t *testing.T, dir, typ string) runnerEv {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Counter   int64  `json:"counter"`
			Event     string `json:"event"`
			EventData struct {
				TaskUUID string `json:"task_uuid"`
			} `json:"event_data"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == typ {
			return runnerEv{ev.Counter, ev.EventData.TaskUUID}
		}
	}
	t.Fatalf("%s: no %s event", dir, typ)
	return runnerEv{}
}

// TestFollowerUnknownUnifiedID follows an id AWX does not know: one
// request, then Unknown and no request more.
func TestFollowerUnknownUnifiedID(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
	srv, f := followSetup(t, c, adHocEvents, 0, 10, awx.FollowerConfig{Unified: true})
	other := awx.NewFollower(clientOf(t, srv), 77, awx.FollowerConfig{Now: c.now, MinInterval: time.Second, Unified: true})
	for i := range 5 {
		c.add(time.Minute)
		err := other.Poll(context.Background())
		if i == 0 && !errors.Is(err, awx.ErrJobNotFound) {
			t.Errorf("first poll: %v, want ErrJobNotFound", err)
		}
	}
	if !other.Unknown() {
		t.Error("Unknown is false after AWX listed no unified job 77")
	}
	if n := srv.RequestCount(77); n != 1 {
		t.Errorf("%d requests about 77, want 1", n)
	}
	if _, ok := other.Job(); ok {
		t.Error("an unknown id has metadata")
	}
	if f.Unknown() {
		t.Error("job 42, which AWX knows, is unknown before any request")
	}
	if r := srv.Requests(); len(r) != 1 || !strings.HasPrefix(r[0].Path, "/api/v2/unified_jobs/") {
		t.Errorf("requests %+v, want the one unified_jobs request", r)
	}
}

func clientOf(t *testing.T, srv *awxtest.Server) *awx.Client {
	t.Helper()
	c, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
