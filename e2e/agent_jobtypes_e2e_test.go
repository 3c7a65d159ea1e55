package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/testscale"
)

// The tests of this file run `peakline agent` against AWX's unified jobs
// (ad hoc commands, project updates, ids AWX does not know), a container
// under a cgroup parent of its own, a server whose policy is read with
// the ingest-only token, and as an unprivileged user with no
// capabilities, finding the job id from what any user may read.

// startIdle starts an idle job as startIdleJob does, with the AWX
// metadata meta (served only when known) and its process in the cgroups
// whose cgroup.procs files are procs. It returns the job's container id,
// for the fake conmon of a podman node.
func (n *e2eNode) startIdle(meta awxtest.Job, known bool, procs []string, secs int) *idleJob {
	t := n.t
	t.Helper()
	sleeper := idleSleeper(t, t.TempDir())
	if meta.Status == "" {
		meta.Status = "running"
	}
	meta.Started = time.Now()
	if known {
		n.awx.AddJob(meta, "")
	}
	cmd := idleCommand(sleeper, meta.ID, secs, procs)
	must(t, cmd.Start())
	j := &idleJob{id: meta.ID, done: make(chan struct{})}
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

// agentStoredJobs returns the server's jobs by id, read with get.
func agentStoredJobs(t *testing.T, get func(path string) (int, []byte)) map[string]storedJob {
	t.Helper()
	var list struct {
		Jobs []storedJob `json:"jobs"`
	}
	code, body := get("/api/v1/jobs")
	if code != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("jobs: %d %s", code, body)
	}
	out := map[string]storedJob{}
	for _, j := range list.Jobs {
		out[j.JobID] = j
	}
	return out
}

// graphOf returns a stored job's graph, read with get.
func graphOf(t *testing.T, get func(path string) (int, []byte), id int64) graphDoc {
	t.Helper()
	var g graphDoc
	code, body := get(fmt.Sprintf("/api/v1/jobs/%d/graph?points=1000", id))
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph of %d: %d %s", id, code, body)
	}
	return g
}

// rawPerResource counts the samples of each resource of a graph.
func rawPerResource(g graphDoc) map[string]int {
	raw := map[string]int{}
	for _, sr := range g.Series {
		raw[sr.Resource] = sr.RawSamples
	}
	return raw
}

// runnerEventCounter returns the counter of the first event of type typ
// that ansible-runner wrote in dir.
func runnerEventCounter(t *testing.T, dir, typ string) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		var ev struct {
			Counter int64  `json:"counter"`
			Event   string `json:"event"`
		}
		must(t, json.Unmarshal(b, &ev))
		if ev.Event == typ {
			return ev.Counter
		}
	}
	t.Fatalf("%s: no %s event", dir, typ)
	return 0
}

// TestAgentAdHocCommand runs a real ad hoc command (ansible-runner -m
// shell, forking 25 processes) in a podman container's cgroup; AWX knows the id
// as an ad_hoc_command and serves its events at
// /api/v2/ad_hoc_commands/{id}/events/. The agent measures it with its
// own events: stored with its status, no template, its one task (the
// module, from runner_on_start) holding the PID peak; it never asks
// AWX's playbook jobs about it.
func TestAgentAdHocCommand(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	a := n.startAgent(s.URL)
	id := jobIDBase()
	pdd := privateDataDir(t, "", localInventory, "")
	events := filepath.Join(pdd, "artifacts", "job", "job_events")
	meta := awxtest.Job{ID: id, Type: "ad_hoc_command", Name: "shell", ModuleName: "shell", Status: "running", ExecutionNode: "node1", Started: time.Now()}
	n.awx.AddJob(meta, events)
	script := `for f in "$@"; do echo $$ > "$f" || exit 97; done; exec ansible-runner run "$PDD" --hosts localhost -m shell -a "for i in \$(seq 1 25); do sleep 2 & done; wait" --ident job`
	cmd := exec.Command("sh", append([]string{"-c", script, "job"}, n.podmanCgroup()...)...)
	cmd.Env = append(os.Environ(), "PDD="+pdd, fmt.Sprintf("JOB_ID=%d", id))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ansible-runner: %v\n%s", err, out.String())
		}
	case <-time.After(testscale.Scaled(t, 90*time.Second)):
		t.Fatalf("ad hoc command still running\n%s", out.String())
	}
	meta.Status, meta.Finished, meta.EventProcessingFinished = "successful", time.Now(), true
	n.awx.SetJob(meta)
	a.waitLog(t, jobDoneRE(id), 45*time.Second)
	a.stop(t) // the shipper's last batch is in once the agent exits

	get := func(p string) (int, []byte) { return s.get(t, p) }
	// No template; the playbook is the one ansible names an ad hoc
	// command's in its events' event_data, as AWX serves them.
	want := storedJob{JobID: strconv.FormatInt(id, 10), Status: "successful", Playbook: "__adhoc_playbook__", Measured: "cgroup"}
	if got, ok := agentStoredJobs(t, get)[want.JobID]; !ok || got != want {
		t.Errorf("stored %+v (found %v), want %+v", got, ok, want)
	}
	start := runnerEventCounter(t, events, "runner_on_start")
	g := graphOf(t, get, id)
	named := map[int64]string{}
	for _, tk := range g.Tasks {
		named[tk.Counter] = tk.Name
	}
	delete(named, 0) // the samples before the module started
	if len(named) != 1 || named[start] != "shell" {
		t.Errorf("tasks %v, want the module's one task %q at counter %d (its runner_on_start)", named, "shell", start)
	}
	// The module forks 25 processes: the PID peak is on its task, far
	// above ansible's own start before it (counter 0). PIDs, unlike CPU,
	// do not bend under a loaded host.
	for _, sr := range g.Series {
		if sr.Resource == "pids" && (sr.Peak == nil || sr.Peak.Counter != start || sr.Peak.V < 25) {
			t.Errorf("pids peak %+v, want at least 25 in the module's task (counter %d)", sr.Peak, start)
		}
	}
	for _, tk := range g.Tasks {
		if tk.Counter == 0 && tk.Max["pids"] >= 25 {
			t.Errorf("the samples before the module started reach %v pids: the module's are on counter 0", tk.Max["pids"])
		}
	}
	if t.Failed() {
		for _, tk := range g.Tasks {
			t.Logf("task %d %q: max %v mean %v", tk.Counter, tk.Name, tk.Max, tk.Mean)
		}
	}
	for _, r := range n.awx.Requests() {
		if r.JobID == id && !strings.HasPrefix(r.Path, "/api/v2/ad_hoc_commands/") && r.Path != "/api/v2/unified_jobs/" {
			t.Errorf("the agent asked %s about an ad hoc command", r.Path)
		}
	}
}

// TestAgentJobTypes runs three idle jobs in podman containers: one AWX
// knows as a project update (skipped by default), one AWX does not know
// at all, one a playbook job. Only the playbook job is stored; each of
// the others is said once, and none is picked up again while it runs.
func TestAgentJobTypes(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	a := n.startAgent(s.URL)
	base := jobIDBase()
	update := n.startIdle(awxtest.Job{ID: base + 1, Type: "project_update", Name: "demo project"}, true, n.podmanCgroup(), 3)
	unknown := n.startIdle(awxtest.Job{ID: base + 2}, false, n.podmanCgroup(), 3)
	job := n.startIdle(awxtest.Job{ID: base + 3, Name: "idle", TemplateID: 7, TemplateName: "idle", Playbook: "site.yml"}, true, n.podmanCgroup(), 3)
	for _, j := range []*idleJob{update, unknown, job} {
		j.wait(t)
	}
	a.waitLog(t, jobDoneRE(job.id), 20*time.Second)
	a.stop(t)
	log := a.log.String()
	stored := agentStoredJobs(t, func(p string) (int, []byte) { return s.get(t, p) })
	if len(stored) != 1 || stored[strconv.FormatInt(job.id, 10)].TemplateID != "7" {
		t.Errorf("stored %v, want only job %d of template 7", stored, job.id)
	}
	for re, want := range map[string]int{
		fmt.Sprintf(`msg="not measuring: AWX says this is a project_update, a type --job-types leaves out"[^\n]* job=%d type=project_update`, update.id): 1,
		fmt.Sprintf(`msg="not a job: AWX lists no unified job of this id[^"]*"[^\n]* job=%d\b`, unknown.id):                                              1,
		fmt.Sprintf(`msg="sampling job".* job=%d\b`, update.id):                                                                                          1,
		fmt.Sprintf(`msg="sampling job".* job=%d\b`, unknown.id):                                                                                         1,
	} {
		if got := len(regexp.MustCompile(re).FindAllString(log, -1)); got != want {
			t.Errorf("%d lines matching %q, want %d", got, re, want)
		}
	}
}

// TestAgentCustomParent runs a job in a podman container under a
// top-level cgroup of its own (podman's cgroup_parent): an agent that
// does not walk it says so once, naming the cgroup, and stores nothing;
// one given --cgroup-parent measures the next job there.
func TestAgentCustomParent(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	custom := n.parent + "-custom.slice"
	t.Cleanup(func() { removeCgroupTree(n.hier, custom) })
	container := func() (string, []string) {
		rel := "libpod-" + randomHex(32) + ".scope"
		return "/" + custom + "/" + rel, makeJobCgroup(t, n.hier, custom, rel+"/container")
	}
	base := jobIDBase()
	meta := func(id int64) awxtest.Job {
		return awxtest.Job{ID: id, Name: "idle", TemplateID: 7, TemplateName: "idle", Playbook: "site.yml"}
	}

	a := n.startAgent(s.URL)
	cg, procs := container()
	first := n.startIdle(meta(base+1), true, procs, 3)
	first.wait(t)
	a.stop(t)
	re := regexp.MustCompile(`level=WARN msg="an ansible process runs in a container cgroup under a parent the agent does not walk[^"]*"[^\n]* cgroup=` + regexp.QuoteMeta(cg) + `\n`)
	if got := len(re.FindAllString(a.log.String(), -1)); got != 1 {
		t.Errorf("%d warnings naming %s, want 1:\n%s", got, cg, a.log.String())
	}
	if stored := agentStoredJobs(t, func(p string) (int, []byte) { return s.get(t, p) }); len(stored) != 0 {
		t.Errorf("stored %v, want nothing from an unwalked parent", stored)
	}

	a2 := n.startAgent(s.URL, "--cgroup-parent", "podman:"+custom)
	cg2, procs := container()
	second := n.startIdle(meta(base+2), true, procs, 3)
	second.wait(t)
	a2.waitLog(t, jobDoneRE(second.id), 20*time.Second)
	a2.waitLog(t, regexp.MustCompile(fmt.Sprintf(`msg="sampling job".* job=%d .*cgroup=%s `, second.id, regexp.QuoteMeta(cg2))), time.Second)
	a2.stop(t)
	got := agentStoredJobs(t, func(p string) (int, []byte) { return s.get(t, p) })[strconv.FormatInt(second.id, 10)]
	if got.Measured != "cgroup" || got.Status != "successful" {
		t.Errorf("stored %+v, want job %d measured by its cgroup", got, second.id)
	}
	if regexp.MustCompile(`does not walk[^\n]* cgroup=/` + regexp.QuoteMeta(custom) + `/`).MatchString(a2.log.String()) {
		t.Errorf("the agent walking %s still warns:\n%s", custom, a2.log.String())
	}
}

// TestAgentIngestOnlyToken runs the agent with the ingest-only token the
// docs prescribe against a server with token auth, template 7 set to off
// by an admin: the agent reads the policy with that token, drops the job
// of template 7 and stores the job of template 8, and says nothing of
// an unreadable policy.
func TestAgentIngestOnlyToken(t *testing.T) {
	n := newE2ENode(t)
	dir := t.TempDir()
	const adminToken, ingestToken = "admin-token-0123456789abcdef", "ingest-token-0123456789abcdef"
	authFile := filepath.Join(dir, "auth.yml")
	must(t, os.WriteFile(authFile, []byte(fmt.Sprintf("tokens:\n  - {name: admin, token: %q, scopes: [admin]}\n  - {name: agent, token: %q, scopes: [ingest]}\n", adminToken, ingestToken)), 0o600))
	tokenFile := filepath.Join(dir, "ingest.tok")
	must(t, os.WriteFile(tokenFile, []byte(ingestToken+"\n"), 0o600))
	s := serve(t, "--data", t.TempDir(), "--auth-file", authFile)
	do := func(method, path, body string) (int, []byte) {
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Requested-With", "peakline")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := do("PUT", "/api/v1/templates/7", `{"collection":"off"}`); code != 200 {
		t.Fatalf("PUT template 7 off: %d %s", code, body)
	}

	a := n.startAgent(s.URL, "--token-file", tokenFile)
	base := jobIDBase()
	off := n.startIdle(awxtest.Job{ID: base + 1, Name: "idle", TemplateID: 7, TemplateName: "off", Playbook: "site.yml"}, true, n.podmanCgroup(), 3)
	on := n.startIdle(awxtest.Job{ID: base + 2, Name: "idle", TemplateID: 8, TemplateName: "on", Playbook: "site.yml"}, true, n.podmanCgroup(), 3)
	off.wait(t)
	on.wait(t)
	a.waitLog(t, jobDoneRE(on.id), 20*time.Second)
	a.stop(t)
	log := a.log.String()
	if !regexp.MustCompile(fmt.Sprintf(`msg="not collecting: collection is off for this template"[^\n]* job=%d template=7\b`, off.id)).MatchString(log) {
		t.Errorf("job %d of template 7 was not declined:\n%s", off.id, log)
	}
	if strings.Contains(log, "cannot read the server's collection policy") || strings.Contains(log, "collection policy unknown") {
		t.Errorf("the ingest token could not read the policy:\n%s", log)
	}
	stored := agentStoredJobs(t, func(p string) (int, []byte) { return do("GET", p, "") })
	if _, ok := stored[strconv.FormatInt(off.id, 10)]; ok || len(stored) != 1 || stored[strconv.FormatInt(on.id, 10)].TemplateID != "8" {
		t.Errorf("stored %v, want only job %d of template 8", stored, on.id)
	}
}

// TestAgentNoCapabilities runs the agent as nobody with no capability at
// all (setpriv) on a podman node whose jobs run as root: the jobs'
// environments are unreadable, and the agent tells their ids from
// conmon's world-readable command line, measuring one job's cgroup and
// another's process tree (a container with no cgroup, its processes
// conmon's children). Asked for --process-tree, it says at its start
// which capabilities the mode's environment fallback lacks.
func TestAgentNoCapabilities(t *testing.T) {
	n := newE2ENode(t)
	setpriv := needTool(t, "setpriv", "util-linux")
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the agent as another user")
	}
	s := serve(t, "--data", t.TempDir())
	// Everything the unprivileged agent needs in a directory it may
	// read: the binary, its tokens, its spool.
	home, err := os.MkdirTemp("", "peakline-nobody-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	must(t, os.Chmod(home, 0o755))
	bin := filepath.Join(home, "peakline")
	data, err := os.ReadFile(peaklineBin(t))
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	tokenFile := filepath.Join(home, "awx-token")
	must(t, os.WriteFile(tokenFile, []byte(awxToken+"\n"), 0o600))
	spool := filepath.Join(home, "spool")
	must(t, os.Mkdir(spool, 0o700))
	for _, p := range []string{tokenFile, spool} {
		must(t, os.Chown(p, 65534, 65534))
	}

	// The job's container, as podman lays it out, and its conmon: a
	// script so named (the kernel names a script's process after it) with
	// conmon's arguments.
	cid := randomHex(32)
	procs := n.cgroup("machine.slice/libpod-" + cid + ".scope/container")
	id := jobIDBase()

	args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--",
		bin, "agent", "--server", s.URL, "--awx-url", n.awx.URL, "--awx-token-file", tokenFile,
		"--spool-dir", spool, "--poll-interval", testscale.Scaled(t, 100*time.Millisecond).String(), "--awx-poll-interval", "250ms",
		"--drain-timeout", "40s", "--log-level", "debug", "--process-tree",
		"--scope", "podman:" + n.parent + `:^libpod-([0-9a-f]{64})\.scope$`}
	a := &agentProc{cmd: exec.Command(setpriv, args...), log: &lockedBuffer{}, done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	must(t, a.cmd.Start())
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		<-a.done
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log.String())
		}
	})
	a.waitLog(t, regexp.MustCompile(`msg="agent started"`), 10*time.Second)
	a.waitLog(t, regexp.MustCompile(`level=WARN msg="--process-tree reads /proc/<pid>/environ of job processes, and the agent lacks CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH[^"]*"[^\n]* uid=65534`), time.Second)

	// AWX knows the job before podman starts its container and conmon.
	j := n.startIdle(awxtest.Job{ID: id, Name: "idle", TemplateID: 7, TemplateName: "idle", Playbook: "site.yml"}, true, procs, 3)
	conmon := filepath.Join(t.TempDir(), "conmon")
	must(t, os.WriteFile(conmon, []byte("#!/bin/sh\nsleep 60\n"), 0o755))
	cm := exec.Command(conmon, "--api-version", "1", "-c", cid, "-u", cid, "-n", fmt.Sprintf("ansible_runner_%d", id), "--exit-dir", "/run/libpod/exits")
	must(t, cm.Start())
	t.Cleanup(func() { _ = cm.Process.Kill(); _ = cm.Wait() })
	j.wait(t)
	a.waitLog(t, jobDoneRE(id), 20*time.Second)
	a.waitLog(t, regexp.MustCompile(fmt.Sprintf(`msg="sampling job".* job=%d measured=cgroup .*via=conmon`, id)), time.Second)

	// A container with no cgroup of its own (rootless podman, cgroupfs
	// manager): its processes are the children of its conmon, 20 sleeps
	// as root, measured as a process tree with no capability either.
	treeID := id + 1
	meta := awxtest.Job{ID: treeID, Name: "tree", TemplateID: 7, TemplateName: "idle", Playbook: "site.yml", Status: "running", Started: time.Now()}
	n.awx.AddJob(meta, "")
	treeConmon := filepath.Join(t.TempDir(), "conmon")
	must(t, os.WriteFile(treeConmon, []byte("#!/bin/sh\nfor i in $(seq 1 20); do sleep 3 & done; wait\n"), 0o755))
	tc := exec.Command(treeConmon, "--api-version", "1", "-c", randomHex(32), "-n", fmt.Sprintf("ansible_runner_%d", treeID))
	must(t, tc.Start())
	t.Cleanup(func() { _ = tc.Process.Kill() })
	must(t, tc.Wait())
	meta.Status, meta.Finished, meta.EventProcessingFinished = "successful", time.Now(), true
	n.awx.SetJob(meta)
	a.waitLog(t, jobDoneRE(treeID), 20*time.Second)
	a.waitLog(t, regexp.MustCompile(fmt.Sprintf(`msg="sampling job".* job=%d measured=process-tree .*via=conmon`, treeID)), time.Second)

	a.stop(t)
	get := func(p string) (int, []byte) { return s.get(t, p) }
	stored := agentStoredJobs(t, get)
	got := stored[strconv.FormatInt(id, 10)]
	if got.Measured != "cgroup" || got.TemplateID != "7" || got.Status != "successful" {
		t.Errorf("stored %+v, want job %d of template 7 measured by its cgroup", got, id)
	}
	if raw := rawPerResource(graphOf(t, get, id)); raw["cpu"] == 0 || raw["memory"] == 0 || raw["pids"] == 0 {
		t.Errorf("samples per resource %v, want some of cpu, memory and pids", raw)
	}
	if got := stored[strconv.FormatInt(treeID, 10)]; got.Measured != "process-tree" || got.Status != "successful" {
		t.Errorf("stored %+v, want job %d measured by its process tree", got, treeID)
	}
	for _, sr := range graphOf(t, get, treeID).Series {
		if sr.Resource == "pids" && (sr.Peak == nil || sr.Peak.V < 20) {
			t.Errorf("process tree's pids peak %+v, want the 20 sleeps", sr.Peak)
		}
	}
}
