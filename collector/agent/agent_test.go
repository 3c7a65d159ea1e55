package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/live"
)

// fakeWorld is a node whose jobs the test starts and ends, and an AWX
// whose answers it sets. It records what the agent did to each job.
type fakeWorld struct {
	mu       sync.Mutex
	targets  []target
	alive    map[string]bool // key → has processes
	openErr  map[string]error
	panicky  map[string]bool // start panics
	held     int             // samples every session holds
	infoErr  error
	infos    map[string]ansible.JobInfo
	complete map[string]bool // job id → events complete
	sessions []*fakeSession
	// policies is the server's collection policy per template id; a
	// template not in it collects. policyErr: the server cannot be asked.
	policies  map[string]live.Policy
	policyErr error
	// types is AWX's type per job id ("job" when not set); unknown the
	// ids AWX says it does not know.
	types   map[string]string
	unknown map[string]bool
	asked   []string // template ids asked, in order
}

type fakeSession struct {
	w         *fakeWorld
	t         target
	infos     []ansible.JobInfo
	stopped   time.Time
	closed    time.Time
	measured  string
	released  bool
	discarded bool
}

func newFakeWorld() *fakeWorld {
	return &fakeWorld{alive: map[string]bool{}, openErr: map[string]error{}, panicky: map[string]bool{},
		infos: map[string]ansible.JobInfo{}, complete: map[string]bool{}, types: map[string]string{}, unknown: map[string]bool{}}
}

func (w *fakeWorld) scan() ([]target, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []target
	for _, t := range w.targets {
		if w.alive[t.key] {
			out = append(out, t)
		}
	}
	return out, nil
}

func (w *fakeWorld) open(t target) (*opened, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.openErr[t.key]; err != nil {
		return nil, err
	}
	m := ansible.MeasuredCgroup
	if t.cgroupDir == "" {
		m = ansible.MeasuredProcessTree
	}
	return &opened{measured: m, close: func() {}, alive: func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.alive[t.key], nil
	}}, nil
}

func (w *fakeWorld) start(ctx context.Context, t target, o *opened) (session, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.panicky[t.key] {
		panic("boom")
	}
	s := &fakeSession{w: w, t: t, measured: o.measured}
	w.sessions = append(w.sessions, s)
	return s, nil
}

func (s *fakeSession) info() (ansible.JobInfo, bool, bool) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	i, ok := s.w.infos[s.t.jobID]
	if s.w.infoErr != nil || !ok {
		return ansible.JobInfo{}, false, false
	}
	return i, finalStatus(i.Status), true
}

func (s *fakeSession) awxType() (string, bool) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.unknown[s.t.jobID] {
		return "", true
	}
	if _, ok := s.w.infos[s.t.jobID]; !ok || s.w.infoErr != nil {
		return "", false
	}
	if typ, ok := s.w.types[s.t.jobID]; ok {
		return typ, false
	}
	return "job", false
}

func (w *fakeWorld) set(f func()) { w.mu.Lock(); defer w.mu.Unlock(); f() }

func (s *fakeSession) setInfo(i ansible.JobInfo) { s.w.set(func() { s.infos = append(s.infos, i) }) }
func (s *fakeSession) stopSampling()             { s.w.set(func() { s.stopped = time.Now() }) }
func (s *fakeSession) close()                    { s.w.set(func() { s.closed = time.Now() }) }
func (s *fakeSession) release()                  { s.w.set(func() { s.released = true }) }
func (s *fakeSession) discard() (int, int) {
	s.w.set(func() { s.discarded, s.closed = true, time.Now() })
	return 0, 0
}

func (w *fakeWorld) policy(_ context.Context, template string) (live.Policy, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, template)
	if w.policyErr != nil {
		return live.Policy{}, w.policyErr
	}
	if p, ok := w.policies[template]; ok {
		return p, nil
	}
	return live.Policy{System: "all", Template: "default"}, nil
}
func (s *fakeSession) eventsComplete() bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.complete[s.t.jobID]
}

func testConfig() Config {
	return Config{PollInterval: 250 * time.Millisecond, DiscoverInterval: 250 * time.Millisecond,
		AWXPollInterval: time.Second, DrainTimeout: time.Minute, JobTypes: DefaultJobTypes(), PolicyFallback: DefaultPolicyFallback}
}

func running(status string) ansible.JobInfo {
	return ansible.JobInfo{TemplateID: "7", TemplateName: "deploy", Status: status}
}

func finalStatus(status string) bool {
	switch status {
	case "successful", "failed", "error", "canceled":
		return true
	}
	return false
}

// A job is sampled from the first scan after its start until its cgroup
// is empty, its events followed until complete, then closed once; the
// same run is never started twice.
func TestJobLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		var logs bytes.Buffer
		a := newAgent(testConfig(), w, slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()

		time.Sleep(time.Second)
		start := time.Now()
		w.set(func() {
			w.targets = []target{{jobID: "42", key: "libpod-a", cgroupDir: "/x/libpod-a.scope"}}
			w.alive["libpod-a"] = true
			w.infos["42"] = running("running")
		})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		w.set(func() {
			if len(w.sessions) != 1 {
				t.Fatalf("%d sessions, want 1", len(w.sessions))
			}
			s := w.sessions[0]
			if !s.stopped.IsZero() || !s.closed.IsZero() {
				t.Fatalf("a running job's session was stopped")
			}
			if len(s.infos) != 1 || s.infos[0] != (ansible.JobInfo{TemplateID: "7", TemplateName: "deploy", Status: "running", Measured: ansible.MeasuredCgroup}) {
				t.Fatalf("infos %+v, want one running info measured by cgroup", s.infos)
			}
			w.alive["libpod-a"] = false
		})
		ended := time.Now()
		time.Sleep(3 * time.Second)
		w.set(func() {
			w.infos["42"] = running("successful")
			// The cgroup lingers, with a process again: same run, no new session.
			w.alive["libpod-a"] = true
		})
		time.Sleep(3 * time.Second)
		w.set(func() { w.complete["42"] = true })
		time.Sleep(3 * time.Second)
		synctest.Wait()
		w.set(func() {
			if len(w.sessions) != 1 {
				t.Fatalf("%d sessions, want 1: a finished run was started again", len(w.sessions))
			}
			s := w.sessions[0]
			if d := s.stopped.Sub(ended); d < 0 || d > 250*time.Millisecond {
				t.Errorf("sampling stopped %v after the cgroup emptied, want within one poll", d)
			}
			if s.closed.IsZero() || s.closed.Before(ended.Add(6*time.Second)) {
				t.Errorf("closed at +%v, want after the events were complete (+6s)", s.closed.Sub(ended))
			}
			if last := s.infos[len(s.infos)-1]; last.Status != "successful" || last.Measured != ansible.MeasuredCgroup {
				t.Errorf("last info %+v, want the final status", last)
			}
			_ = start
			w.alive["libpod-a"] = false
		})
		cancel()
		<-done
		if strings.Contains(logs.String(), "before the agent started") {
			t.Errorf("a job started after the agent was said to be running before it:\n%s", logs.String())
		}
	})
}

// One job failing to open, or panicking, does not stop another.
func TestJobFailureIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		var logs bytes.Buffer
		a := newAgent(testConfig(), w, slog.New(slog.NewTextHandler(&logs, nil)))
		w.set(func() {
			w.targets = []target{{jobID: "1", key: "a"}, {jobID: "2", key: "b"}, {jobID: "3", key: "c", cgroupDir: "/c"}}
			for _, k := range []string{"a", "b", "c"} {
				w.alive[k] = true
			}
			w.openErr["a"] = errors.New("cgroup vanished")
			w.panicky["b"] = true
			w.infos["3"] = running("running")
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		w.set(func() {
			if len(w.sessions) != 1 || w.sessions[0].t.jobID != "3" {
				t.Fatalf("sessions %+v, want job 3's alone", w.sessions)
			}
		})
		cancel()
		<-done
		out := logs.String()
		for _, want := range []string{"cannot open the job", "job handling failed", "before the agent started"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

// While AWX does not answer, the job is sampled; its info follows once
// AWX answers; a job whose events never complete is closed after
// DrainTimeout.
func TestAWXOutageAndDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		var logs bytes.Buffer
		cfg := testConfig()
		cfg.MaxHeldSamples = 1000
		a := newAgent(cfg, w, slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()
		time.Sleep(time.Second)
		w.set(func() {
			w.targets = []target{{jobID: "9", key: "p", pids: []int{100}}}
			w.alive["p"] = true
			w.infoErr = errors.New("503")
			w.held = 1000
		})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		w.set(func() {
			if len(w.sessions) != 1 || len(w.sessions[0].infos) != 0 {
				t.Fatalf("sessions %+v, want one without info", w.sessions)
			}
			w.infoErr = nil
			w.infos["9"] = running("running")
		})
		time.Sleep(30 * time.Second)
		w.set(func() {
			s := w.sessions[0]
			if len(s.infos) != 1 || s.infos[0].Measured != ansible.MeasuredProcessTree {
				t.Fatalf("infos %+v, want one measured by process tree", s.infos)
			}
			w.alive["p"] = false
			w.infos["9"] = running("successful")
		})
		ended := time.Now()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		w.set(func() {
			s := w.sessions[0]
			if got := s.closed.Sub(ended); got < time.Minute || got > time.Minute+2*time.Second {
				t.Errorf("closed %v after the end, want DrainTimeout (1m)", got)
			}
		})
		cancel()
		<-done
		if n := strings.Count(logs.String(), "holds the most samples"); n != 1 {
			t.Errorf("the cap on held samples was logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

func (s *fakeSession) held() int {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.held
}

// When the agent stops with jobs running, each job's samples go out at
// once with the tasks known, and the log says the job was left running,
// not that it is done, and warns of nothing: a restart is routine.
func TestStopWithRunningJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		var logs bytes.Buffer
		cfg := testConfig()
		cfg.MaxHeldSamples = 1000
		a := newAgent(cfg, w, slog.New(slog.NewTextHandler(&logs, nil)))
		w.set(func() {
			w.targets = []target{{jobID: "5", key: "a", cgroupDir: "/a"}, {jobID: "6", key: "b", cgroupDir: "/b"}}
			w.alive["a"], w.alive["b"] = true, true
			w.infos["5"], w.infos["6"] = running("running"), running("running")
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		stopped := time.Now()
		cancel()
		<-done
		if d := time.Since(stopped); d > stopFlushTimeout+time.Second {
			t.Errorf("the agent took %v to stop, want at most %v", d, stopFlushTimeout+time.Second)
		}
		w.set(func() {
			for _, s := range w.sessions {
				if s.closed.IsZero() {
					t.Errorf("job %s: session not closed", s.t.jobID)
				}
			}
		})
		out := logs.String()
		if strings.Contains(out, "level=WARN") || strings.Contains(out, `msg="job done"`) {
			t.Errorf("stopping logged a warning or a job as done:\n%s", out)
		}
		if n := strings.Count(out, `msg="agent stopping; the job's samples are sent with the tasks known, a restart picks it up again"`); n != 2 {
			t.Errorf("%d jobs logged as left running, want 2:\n%s", n, out)
		}
	})
}
