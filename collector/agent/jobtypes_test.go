package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/live"
)

// runFake runs the agent over w with cfg until every target is gone and
// the sessions are done, and returns its log.
func runFake(t *testing.T, w *fakeWorld, cfg Config, targets []target, infos map[string]ansible.JobInfo, runFor time.Duration) string {
	t.Helper()
	logs := &syncBuffer{}
	a := newAgent(cfg, w, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.run(ctx); close(done) }()
	w.set(func() {
		w.targets = targets
		for _, tg := range targets {
			w.alive[tg.key] = true
		}
		for id, i := range infos {
			w.infos[id] = i
		}
	})
	time.Sleep(runFor)
	synctest.Wait()
	w.set(func() {
		for k := range w.alive {
			w.alive[k] = false
		}
		for id := range w.infos {
			w.complete[id] = true
		}
	})
	time.Sleep(cfg.DrainTimeout + 5*time.Second)
	synctest.Wait()
	cancel()
	<-done
	return logs.String()
}

func sessionsByJob(w *fakeWorld) map[string]*fakeSession {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]*fakeSession{}
	for _, s := range w.sessions {
		out[s.t.jobID] = s
	}
	return out
}

// Every unified job type is told apart: a playbook job and an ad hoc
// command are measured, a project update, an inventory update and a
// system job are dropped (default JobTypes), and an id AWX lists no
// unified job of is dropped, never stored: each said once, with no
// policy asked for what is not collected anyway.
func TestJobTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		w.types = map[string]string{"1": "job", "2": "ad_hoc_command", "3": "project_update", "4": "inventory_update", "5": "system_job"}
		w.unknown = map[string]bool{"6": true}
		var targets []target
		infos := map[string]ansible.JobInfo{}
		for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
			targets = append(targets, target{jobID: id, key: "k" + id, cgroupDir: "/" + id})
			if id != "6" {
				infos[id] = ansible.JobInfo{Status: "running"}
			}
		}
		infos["1"] = running("running")
		cfg := testConfig()
		cfg.MaxHeldSamples = 100 // fakeSession holds none
		log := runFake(t, w, cfg, targets, infos, 3*time.Second)
		by := sessionsByJob(w)
		for _, id := range []string{"1", "2"} {
			if s := by[id]; s == nil || !s.released || s.discarded || s.closed.IsZero() {
				t.Errorf("job %s: session %+v, want released and closed, not discarded", id, s)
			}
		}
		for _, id := range []string{"3", "4", "5", "6"} {
			if s := by[id]; s == nil || s.released || !s.discarded {
				t.Errorf("job %s: session %+v, want discarded, never released", id, s)
			}
		}
		for typ, id := range map[string]string{"project_update": "3", "inventory_update": "4", "system_job": "5"} {
			want := `msg="not measuring: AWX says this is a ` + typ + `, a type --job-types leaves out" job=` + id + ` type=` + typ + ` dropped_samples=0`
			if n := strings.Count(log, want); n != 1 {
				t.Errorf("%d lines %q, want 1", n, want)
			}
		}
		want := `msg="not a job: AWX lists no unified job of this id (or the token's user may not see it); nothing of it is stored" job=6`
		if n := strings.Count(log, want); n != 1 {
			t.Errorf("%d lines %q, want 1", n, want)
		}
		w.set(func() {
			// Asked for job 1 (template 7) and job 2 (no template).
			if got := strings.Join(w.asked, ","); got != "7," && got != ",7" {
				t.Errorf("policy asked for %q, want template 7 and the system setting once each", got)
			}
		})
		if t.Failed() {
			t.Log(log)
		}
	})
}

// JobTypes set to project updates only measures those.
func TestJobTypesConfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		w.types = map[string]string{"1": "job", "3": "project_update"}
		cfg := testConfig()
		cfg.JobTypes = []string{"project_update"}
		runFake(t, w, cfg, []target{{jobID: "1", key: "a", cgroupDir: "/a"}, {jobID: "3", key: "c", cgroupDir: "/c"}},
			map[string]ansible.JobInfo{"1": running("running"), "3": {Status: "running"}}, 2*time.Second)
		by := sessionsByJob(w)
		if s := by["1"]; s == nil || !s.discarded {
			t.Errorf("playbook job: %+v, want discarded", s)
		}
		if s := by["3"]; s == nil || s.discarded || !s.released {
			t.Errorf("project update: %+v, want collected", s)
		}
	})
}

// With PolicyFallback drop, a job whose policy cannot be read is dropped,
// said as an error once and per job as a warning.
func TestPolicyFallbackDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		w.policyErr = errors.New(`cannot get "http://peakline/api/v1/settings": server answered 403 Forbidden`)
		cfg := testConfig()
		cfg.PolicyFallback = PolicyDrop
		log := runFake(t, w, cfg, []target{{jobID: "1", key: "a", cgroupDir: "/a"}, {jobID: "2", key: "b", cgroupDir: "/b"}},
			map[string]ansible.JobInfo{"1": running("running"), "2": running("running")}, 2*time.Second)
		for id, s := range sessionsByJob(w) {
			if s.released || !s.discarded {
				t.Errorf("job %s: released %v, discarded %v; want dropped", id, s.released, s.discarded)
			}
		}
		if n := strings.Count(log, `level=ERROR msg="cannot read the server's collection policy: dropping every job`); n != 1 {
			t.Errorf("%d errors about the policy, want 1:\n%s", n, log)
		}
		if !strings.Contains(log, "give the agent a token with the ingest scope") {
			t.Errorf("a 403 does not hint at the token's scope:\n%s", log)
		}
		if n := strings.Count(log, `level=WARN msg="collection policy unknown; dropping the job as --policy-fallback says"`); n != 2 {
			t.Errorf("%d per-job warnings, want 2:\n%s", n, log)
		}
	})
}

// A job AWX never describes (AWX down for all of it) is not stored when
// the server's collection is off: the system setting decides at the end
// of the drain. With collection on it is sent.
func TestUndescribedJobFollowsSystemSetting(t *testing.T) {
	for _, system := range []string{"off", "all"} {
		t.Run(system, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newFakeWorld()
				w.infoErr = errors.New("AWX down")
				w.policies = map[string]live.Policy{"": {System: system, Template: "default"}}
				cfg := testConfig()
				cfg.DrainTimeout = 10 * time.Second
				cfg.MaxHeldSamples = 100 // fakeSession holds none
				runFake(t, w, cfg, []target{{jobID: "1", key: "a", cgroupDir: "/a"}}, nil, 2*time.Second)
				s := sessionsByJob(w)["1"]
				if s == nil {
					t.Fatal("no session")
				}
				if off := system == "off"; s.discarded != off || s.released || s.closed.IsZero() {
					t.Errorf("collection %s: discarded %v, released %v, closed %v; want discarded %v, else closed", system, s.discarded, s.released, s.closed, off)
				}
				w.set(func() {
					if len(w.asked) != 1 || w.asked[0] != "" {
						t.Errorf("policy asked for %q, want the system setting once", w.asked)
					}
				})
			})
		})
	}
}
