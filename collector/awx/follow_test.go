package awx_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/live"
)

// clock is a settable clock shared by the fake and the follower.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

// runnerTasks reads the runner tree's tasks as the importer does: the
// reference the follower's task starts must equal.
func runnerTasks(t *testing.T, tree string) []ansible.Task {
	t.Helper()
	jobs, err := ansible.Read(tree, ansible.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || len(jobs[0].Tasks) == 0 {
		t.Fatalf("%s: %d jobs", tree, len(jobs))
	}
	return jobs[0].Tasks
}

// sink records what a follower hands on.
type sink struct {
	mu        sync.Mutex
	evs       []ansible.JobEvent
	completes int
	// answers are the times Answered got, and answeredAfter the events
	// the sink held at each.
	answers       []time.Time
	answeredAfter []int
}

func (s *sink) Answered(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append(s.answers, at)
	s.answeredAfter = append(s.answeredAfter, len(s.evs))
}

func (s *sink) Add(evs []ansible.JobEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, evs...)
}

func (s *sink) Complete() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completes++
}

func (s *sink) counters() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(s.evs))
	for i, ev := range s.evs {
		out[i] = ev.Counter
	}
	return out
}

// A session's Events takes a follower's events.
var _ awx.Sink = live.NewEvents()

// sinkTasks makes the task starts a sink got comparable with the runner's
// tasks, in the order the importer sorts them.
func sinkTasks(evs []ansible.JobEvent) []ansible.Task {
	var out []ansible.Task
	for _, ev := range evs {
		if ev.TaskStart {
			out = append(out, ansible.Task{Counter: ev.Counter, UUID: ev.TaskUUID, Name: ev.Task, StartMs: ev.TimeMs, Play: ev.Play, Role: ev.Role, Path: ev.TaskPath})
		}
	}
	slices.SortStableFunc(out, func(a, b ansible.Task) int { return cmp.Compare(a.StartMs, b.StartMs) })
	return out
}

// eventTasks makes task starts comparable with the runner's tasks.
func eventTasks(starts []awx.Event) []ansible.Task {
	out := make([]ansible.Task, len(starts))
	for i, ev := range starts {
		out[i] = ansible.Task{Counter: ev.Counter, UUID: ev.TaskUUID, Name: ev.Task, StartMs: ev.Created.Round(time.Millisecond).UnixMilli(), Play: ev.Play, Role: ev.Role, Path: ev.TaskPath}
	}
	return out
}

func stripEnds(tasks []ansible.Task) []ansible.Task {
	out := slices.Clone(tasks)
	for i := range out {
		out[i].EndMs = 0
	}
	return out
}

// followSetup serves dir as job 42 on a fake whose clock is c, and
// returns a follower of it with a 1 s minimum interval on the same clock.
func followSetup(t *testing.T, c *clock, dir string, lag time.Duration, pageSize int, cfg awx.FollowerConfig) (*awxtest.Server, *awx.Follower) {
	t.Helper()
	srv := awxtest.NewServer(awxtest.Options{Token: testToken, Lag: lag, Now: c.now})
	t.Cleanup(srv.Close)
	srv.AddJob(awxtest.Job{ID: 42, Name: "loops", TemplateID: 7, TemplateName: "perf loops", Playbook: "loops.yml"}, dir)
	client, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken), PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Now = c.now
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Second
	}
	return srv, awx.NewFollower(client, 42, cfg)
}

// poll advances the clock by step, polls once and checks that the poll
// made at most one request; it returns the requests made.
func poll(t *testing.T, c *clock, srv *awxtest.Server, f *awx.Follower, step time.Duration) (int, error) {
	t.Helper()
	c.add(step)
	before := srv.RequestCount(42)
	err := f.Poll(context.Background())
	n := srv.RequestCount(42) - before
	if n > 1 {
		t.Fatalf("one poll made %d requests", n)
	}
	return n, err
}

func TestFollowerTaskStartsEqualRunnerArtifacts(t *testing.T) {
	for _, tc := range []struct{ tree, ident string }{
		{"../../testdata/ansible/runner-loops", "loops"},
		{"../../testdata/ansible/runner-basic", "demo2"},
	} {
		t.Run(tc.ident, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
			var got sink
			srv, f := followSetup(t, c, filepath.Join(tc.tree, "artifacts", tc.ident, "job_events"), 0, 10, awx.FollowerConfig{Sink: &got})
			var polls int
			for !f.Done() {
				if polls++; polls > 20 {
					t.Fatal("not done after 20 polls")
				}
				if n, err := poll(t, c, srv, f, time.Second); err != nil || n != 1 {
					t.Fatalf("poll %d: %d requests, err %v", polls, n, err)
				}
				// A second poll in the same instant asks nothing.
				if n, _ := poll(t, c, srv, f, 0); n != 0 {
					t.Fatalf("poll %d again at once made %d requests", polls, n)
				}
			}
			want := stripEnds(runnerTasks(t, tc.tree))
			if got := eventTasks(f.Starts()); !slices.Equal(got, want) {
				t.Fatalf("task starts\n%+v\nwant\n%+v", got, want)
			}
			// The sink got every event once, in counter order, then
			// Complete once; its task starts are the runner's.
			n := int64(len(got.evs))
			if !slices.Equal(got.counters(), seq(1, n)) || n < 12 || got.completes != 1 {
				t.Fatalf("sink got counters %v, %d completes", got.counters(), got.completes)
			}
			if tasks := sinkTasks(got.evs); !slices.Equal(tasks, want) {
				t.Fatalf("sink's task starts\n%+v\nwant\n%+v", tasks, want)
			}
			if last := got.evs[n-1]; last.TimeMs != f.Newest().Round(time.Millisecond).UnixMilli() {
				t.Fatalf("newest %v, last event at %d", f.Newest(), last.TimeMs)
			}
			// Events done, job still running: the metadata only, once
			// per interval, until it is final; then nothing.
			if n, _ := poll(t, c, srv, f, time.Second); n != 1 || srv.Requests()[len(srv.Requests())-1].Path != "/api/v2/jobs/42/" {
				t.Fatalf("after the events: %d requests, want the metadata", n)
			}
			srv.SetJob(awxtest.Job{ID: 42, Status: "successful", TemplateID: 7, TemplateName: "perf loops", EventProcessingFinished: true})
			if n, _ := poll(t, c, srv, f, time.Second); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
			for range 3 {
				if n, _ := poll(t, c, srv, f, time.Minute); n != 0 {
					t.Fatal("a request after the job was final and its events in")
				}
			}
			if j, ok := f.Job(); !ok || j.Status != "successful" || j.TemplateID != 7 || j.TemplateName != "perf loops" {
				t.Fatalf("job %+v", j)
			}
		})
	}
}

// created returns the created time of the loops event with counter n.
func created(t *testing.T, n int) time.Time {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(loopsEvents, itoa(n)+"-*.json"))
	if len(m) != 1 {
		t.Fatalf("event %d: %v", n, m)
	}
	data, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), `"created": "`)
	text, _, _ := strings.Cut(rest, `"`)
	ts, err := time.Parse("2006-01-02T15:04:05.999999", text)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func itoa(n int) string { return awx.JobID(int64(n)) }

func TestFollowerSeesEventsOnlyAfterTheLag(t *testing.T) {
	const lag = 2 * time.Second
	c := &clock{t: created(t, 10).Add(lag - 2*time.Millisecond)}
	srv, f := followSetup(t, c, loopsEvents, lag, 0, awx.FollowerConfig{MinInterval: time.Millisecond})
	if _, err := poll(t, c, srv, f, 0); err != nil { // metadata
		t.Fatal(err)
	}
	if _, err := poll(t, c, srv, f, time.Millisecond); err != nil { // events
		t.Fatal(err)
	}
	// At created(10)+lag-1ms, event 10 is not saved yet.
	if p := f.Position(); p != 9 {
		t.Fatalf("position %d, want 9", p)
	}
	if got := counters(f.Starts()); !slices.Equal(got, []int64{3}) {
		t.Fatalf("starts %v, want [3]", got)
	}
	if !f.Newest().Equal(created(t, 9)) {
		t.Fatalf("newest %v, want event 9's created time", f.Newest())
	}
	// One millisecond later it is.
	if _, err := poll(t, c, srv, f, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if p := f.Position(); p != 10 {
		t.Fatalf("position %d, want 10", p)
	}
	if got := counters(f.Starts()); !slices.Equal(got, []int64{3, 10}) {
		t.Fatalf("starts %v, want [3 10]", got)
	}
	if !f.Newest().Equal(created(t, 10)) {
		t.Fatalf("newest %v, want event 10's created time", f.Newest())
	}
	if f.Done() {
		t.Fatal("done before the stats event")
	}
	// The request asked after the position, not from the start.
	reqs := srv.Requests()
	if q := reqs[len(reqs)-1].Query; q != "counter__gt=9&order_by=counter&page_size=200" {
		t.Fatalf("query %q", q)
	}
}

func TestFollowerKeepsPositionThroughOutage(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	srv, f := followSetup(t, c, loopsEvents, 0, 10, awx.FollowerConfig{Backoff: awx.Backoff{Base: 4 * time.Second, Max: time.Minute}})
	// Requests: 1 metadata, 2 events 1..10, 3 and 4 fail, 5 events 11..20.
	srv.FailRequests(awxtest.Fault{Status: 503}, 3)
	srv.FailRequests(awxtest.Fault{Status: 429, RetryAfter: "20"}, 4)
	for range 2 {
		if _, err := poll(t, c, srv, f, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if p := f.Position(); p != 10 {
		t.Fatalf("position %d", p)
	}
	_, err := poll(t, c, srv, f, time.Second)
	var re *awx.RetryableError
	if !errors.As(err, &re) || !errors.As(f.Err(), &re) || re.StatusCode != 503 {
		t.Fatalf("err %v, Err %v; want the 503", err, f.Err())
	}
	// Backoff 4 s: nothing for 3 s, then one request, a 429 asking 20 s.
	for range 3 {
		if n, _ := poll(t, c, srv, f, time.Second); n != 0 {
			t.Fatal("a request during the backoff")
		}
	}
	if n, err := poll(t, c, srv, f, time.Second); n != 1 || !errors.As(err, &re) || re.StatusCode != 429 {
		t.Fatalf("%d requests, err %v", n, err)
	}
	if n, _ := poll(t, c, srv, f, 19*time.Second); n != 0 {
		t.Fatal("Retry-After not honoured")
	}
	if n, err := poll(t, c, srv, f, time.Second); n != 1 || err != nil || f.Err() != nil {
		t.Fatalf("%d requests, err %v", n, err)
	}
	if p := f.Position(); p != 20 {
		t.Fatalf("position %d after the outage, want 20", p)
	}
	if q := srv.Requests()[4].Query; q != "counter__gt=10&order_by=counter&page_size=10" {
		t.Fatalf("the request after the outage asked %q", q)
	}
}

func TestFollowerAuthErrorDoesNotStorm(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	srv := awxtest.NewServer(awxtest.Options{Token: testToken, Now: c.now})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 42}, loopsEvents)
	file := tokenFile(t, "wrong")
	client, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	f := awx.NewFollower(client, 42, awx.FollowerConfig{Now: c.now, MinInterval: time.Second, Backoff: awx.Backoff{Base: time.Second, Max: 5 * time.Minute}})
	var ae *awx.AuthError
	if err := f.Poll(context.Background()); !errors.As(err, &ae) || ae.TokenFile != file {
		t.Fatalf("err %v", err)
	}
	for range 299 {
		c.add(time.Second)
		f.Poll(context.Background())
	}
	if n := srv.RequestCount(42); n != 1 {
		t.Fatalf("%d requests in 5 minutes of a refused token, want 1", n)
	}
	c.add(time.Second)
	f.Poll(context.Background())
	if n := srv.RequestCount(42); n != 2 {
		t.Fatalf("%d requests after the backoff, want 2", n)
	}
}

// copyEvents copies the loops events whose counter keep accepts into a
// new dir.
func copyEvents(t *testing.T, keep func(counter int) bool) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(loopsEvents)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var n int
		for _, r := range e.Name() {
			if r < '0' || r > '9' {
				break
			}
			n = n*10 + int(r-'0')
		}
		if !keep(n) {
			continue
		}
		copyFile(t, filepath.Join(loopsEvents, e.Name()), filepath.Join(dir, e.Name()))
	}
	return dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFollowerWaitsForAHoleInTheCounters(t *testing.T) {
	for _, fill := range []bool{true, false} {
		name := "filled"
		if !fill {
			name = "passed after GapWait"
		}
		t.Run(name, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
			dir := copyEvents(t, func(n int) bool { return n != 13 })
			var got sink
			srv, f := followSetup(t, c, dir, 0, 0, awx.FollowerConfig{GapWait: 10 * time.Second, Sink: &got})
			for range 2 {
				if _, err := poll(t, c, srv, f, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if p := f.Position(); p != 12 {
				t.Fatalf("position %d, want 12", p)
			}
			if got := counters(f.Starts()); !slices.Equal(got, []int64{3, 10}) {
				t.Fatalf("starts %v", got)
			}
			if !f.Newest().Equal(created(t, 12)) || f.Done() || !slices.Equal(got.counters(), seq(1, 12)) {
				t.Fatalf("past the hole: newest %v, done %v, sink %v", f.Newest(), f.Done(), got.counters())
			}
			if fill {
				m, _ := filepath.Glob(filepath.Join(loopsEvents, "13-*.json"))
				copyFile(t, m[0], filepath.Join(dir, filepath.Base(m[0])))
			}
			if _, err := poll(t, c, srv, f, time.Second); err != nil {
				t.Fatal(err)
			}
			if !fill {
				if p := f.Position(); p != 12 {
					t.Fatalf("position %d before GapWait, want 12", p)
				}
				if _, err := poll(t, c, srv, f, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if p := f.Position(); p != 32 || !f.Done() {
				t.Fatalf("position %d, done %v", p, f.Done())
			}
			want := []int64{3, 10, 13, 16, 23, 26, 29}
			if !fill {
				want = []int64{3, 10, 16, 23, 26, 29}
			}
			if got := counters(f.Starts()); !slices.Equal(got, want) {
				t.Fatalf("starts %v, want %v", got, want)
			}
			wantSink := seq(1, 32)
			if !fill {
				wantSink = slices.Delete(wantSink, 12, 13)
			}
			if !slices.Equal(got.counters(), wantSink) || got.completes != 1 {
				t.Fatalf("sink got %v, %d completes", got.counters(), got.completes)
			}
		})
	}
}

func TestFollowerDoneWithoutStatsOnceFinal(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	dir := copyEvents(t, func(n int) bool { return n != 32 }) // a job killed before its stats
	var got sink
	srv, f := followSetup(t, c, dir, 0, 0, awx.FollowerConfig{Sink: &got})
	for range 3 { // metadata, events 1..31, an empty page
		if _, err := poll(t, c, srv, f, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if f.Done() || f.Position() != 31 || got.completes != 0 {
		t.Fatalf("done %v at %d while the job runs", f.Done(), f.Position())
	}
	srv.SetJob(awxtest.Job{ID: 42, Status: "canceled", EventProcessingFinished: true})
	// The empty page made the metadata due: it says canceled; then one
	// more empty page settles it.
	for range 2 {
		if n, err := poll(t, c, srv, f, time.Second); n != 1 || err != nil {
			t.Fatalf("%d requests, err %v", n, err)
		}
	}
	if !f.Done() {
		t.Fatal("not done after a final status and an empty page")
	}
	if n, _ := poll(t, c, srv, f, time.Minute); n != 0 {
		t.Fatal("a request after done and final")
	}
	if !slices.Equal(got.counters(), seq(1, 31)) || got.completes != 1 {
		t.Fatalf("sink got %v, %d completes", got.counters(), got.completes)
	}
}

// A hole in a running job's counters is passed GapWait after it was first
// seen, even while later events keep coming.
func TestFollowerPassesAHoleWhileEventsFlow(t *testing.T) {
	c := &clock{t: created(t, 16).Add(-time.Second)}
	dir := copyEvents(t, func(n int) bool { return n != 13 })
	var got sink
	srv, f := followSetup(t, c, dir, 0, 0, awx.FollowerConfig{GapWait: 2 * time.Second, Sink: &got})
	if _, err := poll(t, c, srv, f, 0); err != nil { // metadata
		t.Fatal(err)
	}
	// Events up to 16 (created 04:22:23.536732): a hole at 13.
	if _, err := poll(t, c, srv, f, time.Second); err != nil {
		t.Fatal(err)
	}
	if f.Position() != 12 {
		t.Fatalf("position %d, want 12", f.Position())
	}
	// One second later events up to 26 are there: still waiting.
	if _, err := poll(t, c, srv, f, time.Second); err != nil {
		t.Fatal(err)
	}
	if f.Position() != 12 || !slices.Equal(got.counters(), seq(1, 12)) {
		t.Fatalf("position %d, sink %v; want 12 while waiting", f.Position(), got.counters())
	}
	// The events past the hole are not the sink's yet: AWX's answers,
	// though each the last page, do not show it every event.
	if len(got.answers) != 0 {
		t.Fatalf("answered at %v while a hole held events back", got.answers)
	}
	// Two seconds after the hole was seen it is passed.
	if _, err := poll(t, c, srv, f, time.Second); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(seq(1, 12), seq(14, f.Position()))
	if f.Position() < 26 || !slices.Equal(got.counters(), want) {
		t.Fatalf("position %d, sink %v", f.Position(), got.counters())
	}
	if !slices.Equal(got.answers, []time.Time{c.now()}) || !slices.Equal(got.answeredAfter, []int{len(want)}) {
		t.Fatalf("answers %v after %v events, want one at %v after all %d", got.answers, got.answeredAfter, c.now(), len(want))
	}
}

// The sink is told AWX answered only after a page that held every event
// left (not a metadata read, a page with a next link or a failure), at
// the time the request was made, after the page's events and before
// Complete.
func TestFollowerTellsTheSinkWhenAWXAnswered(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: t0}
	var got sink
	srv, f := followSetup(t, c, loopsEvents, 0, 10, awx.FollowerConfig{Backoff: awx.Backoff{Base: 4 * time.Second, Max: time.Minute}, Sink: &got})
	// Requests: 1 metadata, 2 events 1..10, 3 and 4 fail, 5..6 events
	// 11..30, 7 events 31..32 (the last page).
	srv.FailRequests(awxtest.Fault{Status: 503}, 3, 4)
	steps := []struct {
		step    time.Duration
		failed  bool
		answers int
	}{
		{time.Second, false, 0},     // 1s: metadata
		{time.Second, false, 0},     // 2s: events 1..10, next link
		{time.Second, true, 0},      // 3s: 503
		{4 * time.Second, true, 0},  // 7s: 503
		{8 * time.Second, false, 0}, // 15s: events 11..20
		{time.Second, false, 0},     // 16s: events 21..30
		{time.Second, false, 1},     // 17s: events 31, 32: the last page
	}
	for i, st := range steps {
		n, err := poll(t, c, srv, f, st.step)
		if n != 1 || (err != nil) != st.failed {
			t.Fatalf("step %d: %d requests, err %v", i, n, err)
		}
		if len(got.answers) != st.answers {
			t.Fatalf("step %d: answers %v, want %d", i, got.answers, st.answers)
		}
	}
	if want := t0.Add(17 * time.Second); !got.answers[0].Equal(want) || got.answeredAfter[0] != 32 {
		t.Fatalf("answered at %v after %d events, want at %v after all 32", got.answers[0], got.answeredAfter[0], want)
	}
	if !f.Done() || got.completes != 1 {
		t.Fatalf("done %v, %d completes; want done after the stats event", f.Done(), got.completes)
	}
}

// A page of events larger than the client reads (a task that printed
// megabytes) is not asked for again as it was: the follower halves its
// page size until the pages fit, at the usual pace, and gets every event.
func TestFollowerShrinksPagesTooLarge(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	srv := awxtest.NewServer(awxtest.Options{Token: testToken, Now: c.now})
	defer srv.Close()
	srv.AddJob(awxtest.Job{ID: 42, Status: "successful", EventProcessingFinished: true}, loopsEvents)
	// The size of a page of 8 events, as AWX answers it.
	req, err := http.NewRequest(http.MethodGet, srv.URL+awxtest.EventsPath(42)+"?order_by=counter&counter__gt=0&page_size=8", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d, %v", resp.StatusCode, err)
	}
	client, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken), PageSize: 8, MaxPageBytes: int64(len(body)) - 1})
	if err != nil {
		t.Fatal(err)
	}
	var got sink
	f := awx.NewFollower(client, 42, awx.FollowerConfig{Now: c.now, MinInterval: time.Second, Sink: &got,
		Backoff: awx.Backoff{Base: time.Second, Max: 5 * time.Minute}})
	tooLarge := 0
	for polls := 0; !f.Done(); polls++ {
		if polls > 60 {
			t.Fatalf("not done after 60 polls: position %d, err %v", f.Position(), f.Err())
		}
		n, err := poll(t, c, srv, f, time.Second)
		if n != 1 {
			t.Fatalf("poll %d made %d requests (err %v): a too-large page must not back off", polls, n, f.Err())
		}
		if errors.Is(err, awx.ErrTooLarge) {
			tooLarge++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if tooLarge != 1 {
		t.Errorf("%d too-large answers, want 1 (a page of 4 fits)", tooLarge)
	}
	followed := srv.Requests()[1:] // after the measuring request
	reader, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken)})
	if err != nil {
		t.Fatal(err)
	}
	all, err := reader.AllEvents(context.Background(), 42, awx.Backoff{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(all)); !slices.Equal(got.counters(), seq(1, n)) || got.completes != 1 {
		t.Fatalf("sink got counters %v and %d completes, want 1..%d and 1", got.counters(), got.completes, n)
	}
	var sizes []string
	for _, r := range followed {
		if r.Path == awxtest.EventsPath(42) {
			sizes = append(sizes, r.Query[strings.LastIndex(r.Query, "page_size="):])
		}
	}
	if len(sizes) < 3 || sizes[0] != "page_size=8" || slices.ContainsFunc(sizes[1:], func(s string) bool { return s != "page_size=4" }) {
		t.Fatalf("the follower asked for pages of %v, want 8 once then 4", sizes)
	}
}

// A request cut short by the caller's context (the agent stopping) is no
// failure of AWX: nothing is logged and no backoff follows.
func TestFollowerCanceledIsNoFailure(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	var logs bytes.Buffer
	srv, f := followSetup(t, c, loopsEvents, 0, 10, awx.FollowerConfig{Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Backoff: awx.Backoff{Base: time.Minute, Max: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if logs.Len() != 0 || f.Err() != nil {
		t.Errorf("a canceled request was taken for a failure: Err %v, log %q", f.Err(), logs.String())
	}
	if n, err := poll(t, c, srv, f, time.Second); n != 1 || err != nil {
		t.Fatalf("the next poll made %d requests (err %v), want 1 without backoff", n, err)
	}
}

// An outage of AWX itself is logged once for every job the client
// follows, and its end once; a failure of one job's own (AWX has no such
// job) is that job's warning.
func TestFollowersLogAnOutageOnce(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	srv := awxtest.NewServer(awxtest.Options{Token: testToken, Now: c.now})
	defer srv.Close()
	for _, id := range []int64{41, 42, 43} {
		srv.AddJob(awxtest.Job{ID: id}, loopsEvents)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	client, err := awx.NewClient(awx.Config{URL: srv.URL, TokenFile: tokenFile(t, testToken), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var fs []*awx.Follower
	for _, id := range []int64{41, 42, 43, 44} { // AWX has no job 44
		fs = append(fs, awx.NewFollower(client, id, awx.FollowerConfig{Now: c.now, Log: log,
			Backoff: awx.Backoff{Base: time.Second, Max: 4 * time.Second}}))
	}
	pollAll := func() {
		for _, f := range fs {
			_ = f.Poll(context.Background())
		}
	}
	pollAll() // each job's metadata: 44 is unknown
	srv.FailRequests(awxtest.Fault{Status: http.StatusServiceUnavailable}, seqInts(5, 40)...)
	for range 10 {
		c.add(time.Second)
		pollAll()
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2 (job 44, then the outage):\n%s", n, logs.String())
	}
	for range 30 {
		c.add(5 * time.Second)
		pollAll()
	}
	out := logs.String()
	if n := strings.Count(out, `msg="awx: requests work again"`); n != 1 || fs[0].Err() != nil || fs[2].Err() != nil {
		t.Fatalf("recovery logged %d times, want once; errs %v %v:\n%s", n, fs[0].Err(), fs[2].Err(), out)
	}
	if !strings.Contains(out, "job=44") || strings.Count(out, "level=WARN") != 2 {
		t.Fatalf("want exactly job 44's warning and the outage's:\n%s", out)
	}
}

func seqInts(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
