package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx"
	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/live"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
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

// When the server cannot be asked, jobs are collected, and that is
// logged once, not per job.
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
			w.targets = []target{{jobID: "1", key: "a", cgroupDir: "/a"}, {jobID: "2", key: "b", cgroupDir: "/b"}}
			w.alive["a"], w.alive["b"] = true, true
			w.infos["1"], w.infos["2"] = running("running"), running("running")
		})
		time.Sleep(2 * time.Second)
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
		if n := strings.Count(logs.String(), "cannot ask the server whether to collect"); n != 1 {
			t.Errorf("%d warnings about the server, want 1:\n%s", n, logs.String())
		}
	})
}

// policyServer is a real Peakline server (an on-disk store behind the
// server package's handlers) whose policy endpoints can be made to fail
// while ingest keeps working.
type policyServer struct {
	*httptest.Server
	failPolicy atomic.Bool
}

func newPolicyServer(t *testing.T) *policyServer {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := &policyServer{}
	h := srv.Handler()
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ps.failPolicy.Load() && (r.URL.Path == "/api/v1/settings" || strings.HasPrefix(r.URL.Path, "/api/v1/templates/")) {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ps.Close()
		_ = store.Close()
	})
	return ps
}

func (ps *policyServer) put(t *testing.T, path, collection string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, ps.URL+path, strings.NewReader(fmt.Sprintf(`{"collection":%q}`, collection)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: %s", path, resp.Status)
	}
}

// stored returns the samples per resource the server holds, per job.
func (ps *policyServer) stored(t *testing.T) map[string]map[string]int {
	t.Helper()
	resp, err := http.Get(ps.URL + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Jobs []struct {
			JobID   string         `json:"job_id"`
			Samples map[string]int `json:"samples"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for _, j := range page.Jobs {
		out[j.JobID] = j.Samples
	}
	return out
}

// TestPolicyWithRealServer runs jobs through the agent's real sessions,
// AWX followers (the fake AWX) and shipper against a real Peakline server
// whose policy the test sets through its API:
//
//   - off: job 301 sends nothing and a later scan (the job still runs) does
//     not pick it up again;
//   - opt-in: job 302 of template 7, opted in, is stored; job 303 of
//     template 8, not opted in, is not;
//   - the policy endpoints failing (ingest working): job 304 is stored.
func TestPolicyWithRealServer(t *testing.T) {
	f := func(name string, setup func(ps *policyServer), jobs map[int64]int64, want map[string]bool) {
		t.Run(name, func(t *testing.T) {
			ps := newPolicyServer(t)
			setup(ps)
			fake := awxtest.NewServer(awxtest.Options{Token: "t0ken"})
			defer fake.Close()
			tokenFile := filepath.Join(t.TempDir(), "awx-token")
			if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			client, err := awx.NewClient(awx.Config{URL: fake.URL, TokenFile: tokenFile})
			if err != nil {
				t.Fatal(err)
			}
			const life = 1200 * time.Millisecond
			n := &outageNode{t0: time.Now(), jobs: map[string]outageJob{}}
			for id, tmpl := range jobs {
				fake.AddJob(awxtest.Job{ID: id, Status: "running", TemplateID: tmpl}, "")
				n.jobs[fmt.Sprint(id)] = outageJob{end: life}
				stop := time.AfterFunc(life, func() {
					fake.SetJob(awxtest.Job{ID: id, Status: "successful", TemplateID: tmpl, Finished: time.Now(), EventProcessingFinished: true})
				})
				defer stop.Stop()
			}
			logs := &syncBuffer{}
			log := slog.New(slog.NewTextHandler(logs, nil))
			shipper := ship.NewShipper(ship.ShipperConfig{Server: ps.URL, Logger: log})
			shipCtx, shipStop := context.WithCancel(context.Background())
			go shipper.Run(shipCtx)
			cfg := Config{Server: ps.URL, PollInterval: 50 * time.Millisecond, CPUInterval: 50 * time.Millisecond,
				MemoryInterval: 50 * time.Millisecond, PIDsInterval: 50 * time.Millisecond, DiscoverInterval: 50 * time.Millisecond,
				AWXPollInterval: 50 * time.Millisecond, AWXSettle: 300 * time.Millisecond, MaxHeldSamples: 100_000, DrainTimeout: 2 * time.Second}
			n.node = &node{cfg: cfg, awx: client, http: http.DefaultClient, send: shipper.Enqueue, log: log}
			a := newAgent(cfg, n, log)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { a.run(ctx); close(stopped) }()
			deadline := time.Now().Add(10 * time.Second)
			for strings.Count(logs.String(), `msg="job done"`)+strings.Count(logs.String(), `msg="not collecting: `) < len(jobs) ||
				time.Since(n.t0) < life {
				if time.Now().After(deadline) {
					cancel()
					<-stopped
					t.Fatalf("the jobs are not done within 10s; agent log:\n%s", logs.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			<-stopped
			shipper.Finish(shipStop, 5*time.Second)

			got := ps.stored(t)
			for id, collect := range want {
				if n := strings.Count(logs.String(), `msg="sampling job" job=`+id+" "); n != 1 {
					t.Errorf("job %s sampled %d times, want once (the job ran through about 20 scans)", id, n)
				}
				switch {
				case collect && (got[id]["cpu"] == 0 || got[id]["memory"] == 0 || got[id]["pids"] == 0):
					t.Errorf("job %s: stored %v, want samples of every resource", id, got[id])
				case !collect && got[id] != nil:
					t.Errorf("job %s: stored %v, want nothing (the policy declined it)", id, got[id])
				case !collect && strings.Count(logs.String(), `msg="not collecting: `) == 0:
					t.Errorf("job %s: declined without a line saying so:\n%s", id, logs.String())
				}
			}
			if len(got) != strings.Count(fmt.Sprint(want), "true") {
				t.Errorf("server holds jobs %v, want only the collected of %v", got, want)
			}
		})
	}
	f("off", func(ps *policyServer) { ps.put(t, "/api/v1/settings", "off") },
		map[int64]int64{301: 7}, map[string]bool{"301": false})
	f("opt-in", func(ps *policyServer) {
		ps.put(t, "/api/v1/settings", "opt-in")
		ps.put(t, "/api/v1/templates/7", "on")
	}, map[int64]int64{302: 7, 303: 8}, map[string]bool{"302": true, "303": false})
	f("policy unreachable", func(ps *policyServer) {
		ps.put(t, "/api/v1/settings", "off")
		ps.failPolicy.Store(true)
	}, map[int64]int64{304: 7}, map[string]bool{"304": true})
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
