package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/ship"
)

// outageNode is a node (its sessions fed by AWX followers, as in
// production) whose jobs the test lays out on a timeline, measured by
// constant meters instead of cgroups.
type outageNode struct {
	*node
	t0   time.Time
	jobs map[string]outageJob
}

type outageJob struct {
	end time.Duration // the job's processes are gone from t0+end
}

func (n *outageNode) scan() ([]target, error) {
	var out []target
	for id, j := range n.jobs {
		if time.Since(n.t0) < j.end {
			out = append(out, target{jobID: id, key: "libpod/" + id, cgroupDir: "/machine.slice/libpod-" + id + ".scope"})
		}
	}
	return out, nil
}

func (n *outageNode) open(t target) (*opened, error) {
	j := n.jobs[t.jobID]
	return &opened{meter: constMeter{start: time.Now()}, measured: ansible.MeasuredCgroup, close: func() {},
		alive: func() (bool, error) { return time.Since(n.t0) < j.end, nil }}, nil
}

// constMeter is a job using one CPU, 1000 bytes and 2 tasks.
type constMeter struct{ start time.Time }

func (m constMeter) CPU() (time.Duration, error)     { return time.Since(m.start), nil }
func (m constMeter) Memory() (uint64, uint64, error) { return 1000, 0, nil }
func (m constMeter) PIDs() (uint64, uint64, error)   { return 2, 0, nil }

// writeEvent writes a runner job event file created at created.
func writeEvent(t *testing.T, dir string, counter int, created time.Time, event, task string) {
	t.Helper()
	ev := map[string]any{
		"counter": counter, "uuid": fmt.Sprintf("ev-%d", counter), "event": event,
		"created":    created.UTC().Format("2006-01-02T15:04:05.000000"),
		"event_data": map[string]any{"task": task, "task_uuid": "task-" + task, "play": "p", "playbook": "site.yml"},
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d-ev-%d.json", counter, counter)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// awxGate is a proxy before the fake AWX that answers 503 for a job while
// its outage lasts, and records when each events request was answered.
type awxGate struct {
	t0    time.Time
	down  map[string]func(since time.Duration) bool // job id → down at t0+since
	proxy http.Handler

	mu  sync.Mutex
	oks map[string][]time.Duration // job id → events requests passed, at t0+
	nos map[string][]time.Duration // job id → requests refused, at t0+
}

func (g *awxGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	since := time.Since(g.t0)
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v2/jobs/")
	id, _, _ := strings.Cut(rest, "/")
	if r.URL.Path == "/api/v2/unified_jobs/" {
		id = r.URL.Query().Get("id") // what the id is: asked first
	}
	if down := g.down[id]; down != nil && down(since) {
		g.mu.Lock()
		g.nos[id] = append(g.nos[id], since)
		g.mu.Unlock()
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/job_events/") {
		g.mu.Lock()
		g.oks[id] = append(g.oks[id], since)
		g.mu.Unlock()
	}
	g.proxy.ServeHTTP(w, r)
}

func (g *awxGate) answers(id string) (ok, refused []time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Duration(nil), g.oks[id]...), append([]time.Duration(nil), g.nos[id]...)
}

// point is a sample as sent: its time (Unix ms) and its counter.
type point struct {
	ms      int64
	counter int64
}

// TestAWXOutageLongerThanSettle runs two jobs through the agent's real
// sessions and AWX followers against the fake AWX behind a gate, on the
// wall clock (the followers talk HTTP on loopback, which synctest cannot
// wait for), with AWXSettle 300ms:
//
//   - job 101: AWX answers, then is down from 500ms to 2500ms while task B
//     (800ms) and C (1600ms) start, far longer than AWXSettle; it answers
//     again before the job ends. Every sample lands on the task running
//     when it was taken: none of B's or C's goes out as A's while AWX is
//     down.
//   - job 102: AWX is down from 600ms until after the job ended and its
//     drain (DrainTimeout 1s) gave up; task B2 started at 900ms, unseen.
//     The samples taken up to AWX's last answer are attributed, the later
//     ones go out with no task (counter 0), none on a task it never showed.
func TestAWXOutageLongerThanSettle(t *testing.T) {
	const settle = 300 * time.Millisecond
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	dir1, dir2 := t.TempDir(), t.TempDir()
	// Job 101's events: A at 200ms, B at 800ms, C at 1600ms, the end at
	// 3800ms. The fake shows each from its created time on.
	writeEvent(t, dir1, 1, ms(0), "playbook_on_start", "")
	writeEvent(t, dir1, 2, ms(200), "playbook_on_task_start", "A")
	writeEvent(t, dir1, 3, ms(800), "playbook_on_task_start", "B")
	writeEvent(t, dir1, 4, ms(1600), "playbook_on_task_start", "C")
	writeEvent(t, dir1, 5, ms(3800), awx.EventStats, "")
	// Job 102's: A2 at 200ms, B2 at 900ms.
	writeEvent(t, dir2, 1, ms(0), "playbook_on_start", "")
	writeEvent(t, dir2, 2, ms(200), "playbook_on_task_start", "A2")
	writeEvent(t, dir2, 3, ms(900), "playbook_on_task_start", "B2")

	fake := awxtest.NewServer(awxtest.Options{Token: "t0ken"})
	defer fake.Close()
	fake.AddJob(awxtest.Job{ID: 101, Status: "running", TemplateID: 7}, dir1)
	fake.AddJob(awxtest.Job{ID: 102, Status: "running", TemplateID: 7}, dir2)
	done1 := time.AfterFunc(3800*time.Millisecond, func() {
		fake.SetJob(awxtest.Job{ID: 101, Status: "successful", TemplateID: 7, Finished: time.Now(), EventProcessingFinished: true})
	})
	defer done1.Stop()
	upstream, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	gate := &awxGate{t0: t0, proxy: httputil.NewSingleHostReverseProxy(upstream),
		oks: map[string][]time.Duration{}, nos: map[string][]time.Duration{},
		down: map[string]func(time.Duration) bool{
			"101": func(d time.Duration) bool { return d >= 500*time.Millisecond && d < 2500*time.Millisecond },
			"102": func(d time.Duration) bool { return d >= 600*time.Millisecond },
		}}
	gw := httptest.NewServer(gate)
	defer gw.Close()
	tokenFile := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := awx.NewClient(awx.Config{URL: gw.URL, TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	sent := map[string][]point{}
	send := func(body []byte, _ int) {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		var b ship.Batch
		if err := json.NewDecoder(zr).Decode(&b); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, sr := range b.Series {
			for _, ts := range sr.Ts {
				sent[b.JobID] = append(sent[b.JobID], point{ts, sr.Counter})
			}
		}
	}
	cfg := Config{PollInterval: 50 * time.Millisecond, CPUInterval: 50 * time.Millisecond,
		MemoryInterval: 50 * time.Millisecond, PIDsInterval: 50 * time.Millisecond, DiscoverInterval: 50 * time.Millisecond,
		AWXPollInterval: 50 * time.Millisecond, AWXSettle: settle, MaxHeldSamples: 100_000, DrainTimeout: time.Second,
		JobTypes: DefaultJobTypes(), PolicyFallback: DefaultPolicyFallback}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	// No Peakline server to ask the collection policy: every job is
	// collected, as when the server cannot be asked.
	n := &outageNode{node: &node{cfg: cfg, awx: client, http: http.DefaultClient, send: send, log: log}, t0: t0,
		jobs: map[string]outageJob{"101": {end: 3800 * time.Millisecond}, "102": {end: 1500 * time.Millisecond}}}
	a := newAgent(cfg, n, log)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { a.run(ctx); close(stopped) }()
	deadline := time.Now().Add(15 * time.Second)
	for strings.Count(logs.String(), `msg="job done"`) < 2 {
		if time.Now().After(deadline) {
			cancel()
			<-stopped
			t.Fatalf("the jobs are not done within 15s; agent log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-stopped

	mu.Lock()
	defer mu.Unlock()
	// startMs is a task start at t0+n ms as the events give it: created,
	// rounded to the millisecond.
	startMs := func(n int) int64 { return ms(n).Round(time.Millisecond).UnixMilli() }
	at := func(p point) time.Duration { return time.UnixMilli(p.ms).Sub(t0) }
	// Job 101: the task with the greatest start at or before each sample.
	oks, nos := gate.answers("101")
	var back time.Duration
	for _, at := range oks {
		if at >= 2500*time.Millisecond {
			back = at
			break
		}
	}
	if len(nos) == 0 || back == 0 || back-800*time.Millisecond < 3*settle {
		t.Fatalf("job 101: AWX refused %v and answered again at %v; want an outage from before B's start (800ms) to more than 3 settles after it", nos, back)
	}
	perTask := map[int64]int{}
	for _, p := range sent["101"] {
		want := int64(0)
		switch {
		case p.ms >= startMs(1600):
			want = 4
		case p.ms >= startMs(800):
			want = 3
		case p.ms >= startMs(200):
			want = 2
		}
		if p.counter != want {
			t.Errorf("job 101: the sample at %v went to counter %d, want %d", at(p), p.counter, want)
		}
		perTask[p.counter]++
	}
	if perTask[3] < 3*10 || perTask[4] < 3*30 {
		t.Errorf("job 101: samples per counter %v, want B's (800..1600ms) and C's (1600..3800ms) at 20 Hz", perTask)
	}
	// Job 102: AWX's last answer about its events was before 600ms.
	oks, _ = gate.answers("102")
	if len(oks) == 0 {
		t.Fatal("job 102: AWX never answered its events")
	}
	// The follower's answer is stamped when it sent the request, a hair
	// before the gate saw it: samples within 200ms before are not judged.
	last := oks[len(oks)-1]
	perTask = map[int64]int{}
	for _, p := range sent["102"] {
		switch {
		case at(p) > last && p.counter != 0:
			t.Errorf("job 102: the sample at %v, after AWX's last answer at %v, went to counter %d, want 0", at(p), last, p.counter)
		case at(p) <= last-200*time.Millisecond && p.ms >= startMs(200) && p.counter != 2:
			t.Errorf("job 102: the sample at %v, before AWX's last answer at %v, went to counter %d, want A2's (2)", at(p), last, p.counter)
		case p.ms < startMs(200) && p.counter != 0:
			t.Errorf("job 102: the sample at %v, before A2, went to counter %d", at(p), p.counter)
		}
		perTask[p.counter]++
	}
	if perTask[2] == 0 || perTask[0] < 3*15 || perTask[3] != 0 {
		t.Errorf("job 102: samples per counter %v, want some on A2 (2), those after %v (until 1500ms) on 0, none on B2 (3)", perTask, last)
	}
	if !strings.Contains(logs.String(), "after the event source last answered") {
		t.Errorf("job 102's samples sent with no task were not logged:\n%s", logs.String())
	}
}
