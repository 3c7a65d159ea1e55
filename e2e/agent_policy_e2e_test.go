package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
)

// idleJob is an AWX job that does nothing: a process named
// ansible-playbook with JOB_ID in its environment, asleep in a cgroup
// laid out as podman's. The fake AWX serves it as running, of its
// template, until the process exits, then as successful with its events
// processed (it has none).
type idleJob struct {
	id   int64
	done chan struct{}
}

// startIdleJob starts job id of template tmpl sleeping for secs seconds.
func (n *e2eNode) startIdleJob(id, tmpl int64, secs int) *idleJob {
	t := n.t
	t.Helper()
	sleeper := idleSleeper(t, t.TempDir())
	meta := awxtest.Job{ID: id, Name: "idle", Status: "running", TemplateID: tmpl, TemplateName: "idle",
		Playbook: "site.yml", ExecutionNode: "node1", Started: time.Now()}
	n.awx.AddJob(meta, "")
	cmd := idleCommand(sleeper, id, secs, n.podmanCgroup())
	must(t, cmd.Start())
	j := &idleJob{id: id, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		meta.Status, meta.Finished, meta.EventProcessingFinished = "successful", time.Now(), true
		n.awx.SetJob(meta)
		close(j.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-j.done
	})
	return j
}

// idleSleeper copies sleep into dir as ansible-playbook, whose comm is
// what discovery trusts to read JOB_ID from, and returns its path.
func idleSleeper(tb testing.TB, dir string) string {
	tb.Helper()
	sleeper := filepath.Join(dir, "ansible-playbook")
	src, err := exec.LookPath("sleep")
	must2(tb, err)
	bin, err := os.ReadFile(src)
	must2(tb, err)
	must2(tb, os.WriteFile(sleeper, bin, 0o755))
	return sleeper
}

// idleCommand is job id's process: it joins the cgroups whose cgroup.procs
// files are procs, then sleeps secs seconds as sleeper, with JOB_ID set.
func idleCommand(sleeper string, id int64, secs int, procs []string) *exec.Cmd {
	cmd := exec.Command("sh", append([]string{"-c", `for f in "$@"; do echo $$ > "$f" || exit 97; done; exec "$SLEEPER" ` + strconv.Itoa(secs), "job"}, procs...)...)
	cmd.Env = append(os.Environ(), "SLEEPER="+sleeper, fmt.Sprintf("JOB_ID=%d", id))
	return cmd
}

// wait waits for the job's process to exit.
func (j *idleJob) wait(t *testing.T) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("job %d still running after 30s", j.id)
	}
}

// TestAgentObeysPolicy runs idle AWX jobs under `peakline agent` shipping
// to a real `peakline serve` whose collection policy is set through its
// API, one server and agent per case:
//
//   - off: the job is sampled once, declined with one line saying so, not
//     picked up again by the scans while it runs on, and nothing of it is
//     stored;
//   - opt-in with template 7 on: the job of template 7 is stored with
//     samples of every resource, the job of template 8 is not.
//
// The policy endpoints failing is tested in collector/agent.
func TestAgentObeysPolicy(t *testing.T) {
	f := func(name string, policy map[string]string, jobs map[int64]int64, collect map[int64]bool) {
		t.Run(name, func(t *testing.T) {
			n := newE2ENode(t)
			s := serve(t, "--data", t.TempDir())
			for _, path := range []string{"/api/v1/settings", "/api/v1/templates/7", "/api/v1/templates/8"} {
				if c, ok := policy[path]; ok {
					put(t, s.URL+path, fmt.Sprintf(`{"collection":%q}`, c))
				}
			}
			a := n.startAgent(s.URL, "--process-tree=false")
			base := jobIDBase()
			var started []*idleJob
			for id, tmpl := range jobs {
				started = append(started, n.startIdleJob(base+id, tmpl, 2))
			}
			for _, j := range started {
				j.wait(t)
				if collect[j.id-base] {
					a.waitLog(t, jobDoneRE(j.id), 20*time.Second)
				}
			}
			a.stop(t)

			var list struct {
				Jobs []storedJob `json:"jobs"`
			}
			code, body := s.get(t, "/api/v1/jobs")
			if code != 200 || json.Unmarshal(body, &list) != nil {
				t.Fatalf("jobs: %d %s", code, body)
			}
			stored := map[string]storedJob{}
			for _, sj := range list.Jobs {
				stored[sj.JobID] = sj
			}
			log := a.log.String()
			want := 0
			for _, j := range started {
				id := strconv.FormatInt(j.id, 10)
				tmpl := strconv.FormatInt(jobs[j.id-base], 10)
				sampled := regexp.MustCompile(fmt.Sprintf(`msg="sampling job".* job=%d\b`, j.id))
				if got := len(sampled.FindAllString(log, -1)); got != 1 {
					t.Errorf("job %s sampled %d times, want once (it ran through about 20 scans)", id, got)
				}
				declined := regexp.MustCompile(fmt.Sprintf(`msg="not collecting: [^"]*".* job=%d template=%s\b`, j.id, tmpl))
				lines := len(declined.FindAllString(log, -1))
				sj, ok := stored[id]
				if !collect[j.id-base] {
					if ok {
						t.Errorf("job %s stored %+v, want nothing (the policy declined it)", id, sj)
					}
					if lines != 1 {
						t.Errorf("job %s: %d lines saying it is not collected, want 1", id, lines)
					}
					continue
				}
				want++
				if !ok || sj.TemplateID != tmpl || sj.Status != "successful" || sj.Measured != "cgroup" {
					t.Errorf("job %s stored %+v (found %v), want template %s, successful, measured by cgroup", id, sj, ok, tmpl)
				}
				if lines != 0 {
					t.Errorf("job %s: %d lines saying it is not collected, want 0", id, lines)
				}
				var g graphDoc
				code, body := s.get(t, "/api/v1/jobs/"+id+"/graph?points=1000")
				if code != 200 || json.Unmarshal(body, &g) != nil {
					t.Fatalf("graph of %s: %d %s", id, code, body)
				}
				raw := map[string]int{}
				for _, sr := range g.Series {
					raw[sr.Resource] = sr.RawSamples
				}
				if raw["cpu"] == 0 || raw["memory"] == 0 || raw["pids"] == 0 {
					t.Errorf("job %s: samples per resource %v, want some of cpu, memory and pids", id, raw)
				}
			}
			if len(stored) != want {
				t.Errorf("the server holds jobs %v, want only the %d collected", stored, want)
			}
		})
	}
	f("off", map[string]string{"/api/v1/settings": "off"},
		map[int64]int64{1: 7}, map[int64]bool{1: false})
	f("opt-in", map[string]string{"/api/v1/settings": "opt-in", "/api/v1/templates/7": "on"},
		map[int64]int64{2: 7, 3: 8}, map[int64]bool{2: true, 3: false})
}
