package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/live"
)

// The server's policy is asked once AWX names a job's template, once per
// template per policyTTL: a declined job's session is discarded, never
// released, and a later scan does not start it again while it is seen;
// once gone and back it is asked about again. A collected job's session
// is released.
func TestPolicyDeclinesAndRemembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		w.policies = map[string]live.Policy{"7": {System: "opt-in", Template: "on"}, "8": {System: "opt-in", Template: "default"}}
		logs := &syncBuffer{}
		cfg := testConfig()
		cfg.MaxHeldSamples = 100 // fakeSession holds none
		a := newAgent(cfg, w, slog.New(slog.NewTextHandler(logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()

		info := func(tmpl string) ansible.JobInfo {
			return ansible.JobInfo{TemplateID: tmpl, Status: "running"}
		}
		w.set(func() {
			w.targets = []target{{jobID: "1", key: "a", cgroupDir: "/a"}, {jobID: "2", key: "b", cgroupDir: "/b"}, {jobID: "3", key: "c", cgroupDir: "/c"}}
			for _, k := range []string{"a", "b", "c"} {
				w.alive[k] = true
			}
			w.infos["1"], w.infos["2"], w.infos["3"] = info("7"), info("7"), info("8")
		})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		sessions := func() map[string][]*fakeSession {
			out := map[string][]*fakeSession{}
			for _, s := range w.sessions {
				out[s.t.jobID] = append(out[s.t.jobID], s)
			}
			return out
		}
		w.set(func() {
			by := sessions()
			if len(w.sessions) != 3 || len(by["3"]) != 1 {
				t.Fatalf("%d sessions (%d of job 3), want 3: a declined job was started again", len(w.sessions), len(by["3"]))
			}
			for _, id := range []string{"1", "2"} {
				if s := by[id][0]; !s.released || s.discarded {
					t.Errorf("job %s: released %v, discarded %v; want released (template 7 opted in)", id, s.released, s.discarded)
				}
			}
			if s := by["3"][0]; s.released || !s.discarded {
				t.Errorf("job 3: released %v, discarded %v; want discarded, never released", s.released, s.discarded)
			}
			if got := strings.Join(w.asked, ","); got != "7,8" && got != "8,7" {
				t.Errorf("templates asked %q, want 7 and 8 once each", got)
			}
			// Job 3 is gone; job 4 of template 7 starts within policyTTL.
			w.alive["c"] = false
			w.targets = append(w.targets, target{jobID: "4", key: "d", cgroupDir: "/d"})
			w.alive["d"], w.infos["4"] = true, info("7")
		})
		want := `level=INFO msg="not collecting: collection is opt-in and this template did not opt in" job=3 template=8 dropped_samples=0`
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%d lines %q, want 1; log:\n%s", n, want, logs.String())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		w.set(func() {
			if got := strings.Join(w.asked, ","); len(w.asked) != 2 {
				t.Errorf("templates asked %q, want job 4's answer from the cache", got)
			}
		})
		// Job 3 runs again past policyTTL (a scan no longer saw it in
		// between): started and asked about again.
		time.Sleep(policyTTL)
		w.set(func() { w.alive["c"] = true })
		time.Sleep(time.Second)
		synctest.Wait()
		w.set(func() {
			if by := sessions(); len(by["3"]) != 2 || !by["3"][1].discarded {
				t.Errorf("job 3 back: %d sessions, want a second one, discarded", len(by["3"]))
			}
			if got := strings.Join(w.asked, ","); len(w.asked) != 3 || w.asked[2] != "8" {
				t.Errorf("templates asked %q, want 8 asked again after policyTTL", got)
			}
			for k := range w.alive {
				w.alive[k] = false
			}
		})
		cancel()
		<-done
	})
}

// Jobs that ask about one template at once share one request to the
// server, and each gets its answer.
func TestPolicyAskedOnceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		var asks atomic.Int32
		c := newPolicyCache(func(ctx context.Context, template string) (live.Policy, error) {
			asks.Add(1)
			<-answer
			return live.Policy{System: "opt-in", Template: "on"}, nil
		}, DefaultPolicyFallback, slog.New(slog.DiscardHandler))
		const jobs = 5
		var collected atomic.Int32
		var wg sync.WaitGroup
		for range jobs {
			wg.Go(func() {
				if ok, _ := c.decide(context.Background(), "7", slog.New(slog.DiscardHandler)); ok {
					collected.Add(1)
				}
			})
		}
		synctest.Wait()
		close(answer)
		wg.Wait()
		if n := asks.Load(); n != 1 {
			t.Errorf("the server was asked %d times for template 7 by %d jobs at once, want once", n, jobs)
		}
		if n := collected.Load(); n != jobs {
			t.Errorf("%d of %d jobs collected, want all: template 7 opted in", n, jobs)
		}
	})
}

// When the server cannot be asked, jobs are collected, and that is
// logged once, not per job; a job that comes after a failure asks again.
func TestPolicyServerUnreachableCollects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld()
		w.policyErr = errors.New("connection refused")
		logs := &syncBuffer{}
		cfg := testConfig()
		cfg.MaxHeldSamples = 100
		a := newAgent(cfg, w, slog.New(slog.NewTextHandler(logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()
		w.set(func() {
			w.targets = []target{{jobID: "1", key: "a", cgroupDir: "/a"}}
			w.alive["a"], w.infos["1"] = true, running("running")
		})
		time.Sleep(time.Second)
		synctest.Wait()
		w.set(func() {
			w.targets = append(w.targets, target{jobID: "2", key: "b", cgroupDir: "/b"})
			w.alive["b"], w.infos["2"] = true, running("running")
		})
		time.Sleep(time.Second)
		synctest.Wait()
		w.set(func() {
			if len(w.sessions) != 2 || len(w.asked) != 2 {
				t.Fatalf("%d sessions, asked %v; want 2 and 2 (failures are not cached)", len(w.sessions), w.asked)
			}
			for _, s := range w.sessions {
				if !s.released || s.discarded {
					t.Errorf("job %s: released %v, discarded %v; want collected", s.t.jobID, s.released, s.discarded)
				}
			}
			w.alive["a"], w.alive["b"] = false, false
		})
		cancel()
		<-done
		if n := strings.Count(logs.String(), "level=ERROR msg=\"cannot read the server's collection policy"); n != 1 {
			t.Errorf("%d warnings about the server, want 1:\n%s", n, logs.String())
		}
	})
}

// The followers the agent builds back off with jitter: over many draws
// the delays after a failure spread over (4/5·d, d], d being the delay
// without jitter, rather than all agents waiting d.
func TestFollowerBackoffHasJitter(t *testing.T) {
	n := &node{cfg: Config{AWXPollInterval: time.Second}}
	cfg := n.followerConfig(live.NewEvents())
	if cfg.Backoff.Jitter == nil {
		t.Fatal("the follower's backoff has no jitter")
	}
	plain := awx.Backoff{Base: cfg.Backoff.Base, Max: cfg.Backoff.Max}.Delay(3, 0)
	if plain != 4*time.Second {
		t.Fatalf("delay after 3 failures without jitter %v, want 4s (base 1s doubled twice)", plain)
	}
	seen := map[time.Duration]bool{}
	for range 100 {
		d := cfg.Backoff.Delay(3, 0)
		if d <= plain*4/5 || d > plain {
			t.Fatalf("delay %v, want in (%v, %v]", d, plain*4/5, plain)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("%d distinct delays in 100 draws, want them spread", len(seen))
	}
}
