package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/testscale"
)

// The agent's end-to-end tests run real ansible-runner jobs in cgroups laid
// out as a podman execution node and a Kubernetes node lay them out, on
// this host's real cgroup hierarchies (v1's controllers, or the one v2
// tree: make test-v2 runs them on a cgroup v2 kernel), with the environment AWX gives a job;
// a fake AWX (collector/awx/awxtest) serves the jobs' real events in the
// API's shape, and `peakline agent` ships to a real `peakline serve`.

// agentPlaybook burns two CPUs for burnSeconds, allocates 300 MB and
// holds it until the task ends, then forks 25 processes. lead, when set,
// is a first task that only waits that long.
func agentPlaybook(t testing.TB, lead string) string {
	burn := burnSeconds(t)
	s := `- name: agent end-to-end
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
`
	if lead != "" {
		s += `    - name: wait a moment
      ansible.builtin.command: sleep ` + lead + "\n"
	}
	return s + `    - name: burn some cpu
      ansible.builtin.shell: "timeout ` + burn + ` sh -c 'while :; do :; done' & timeout ` + burn + ` sh -c 'while :; do :; done'; wait; true"
    - name: allocate memory
      ansible.builtin.command: python3 -c "import time; b = bytearray(300*1024*1024); time.sleep(2)"
    - name: fork a burst of processes
      ansible.builtin.shell: "for i in $(seq 1 25); do sleep 2 & done; wait"
`
}

var agentSeq atomic.Int64

// e2eNode is one test's node: a test-unique top-level cgroup under which
// job cgroups are made, a fake AWX and the agent's files.
type e2eNode struct {
	t         *testing.T
	parent    string // top-level cgroup name, unique to the test
	awx       *awxtest.Server
	tokenFile string
	spool     string
	hier      []string // e2eHierarchies
}

const awxToken = "awx-read-only-token"

func newE2ENode(t *testing.T) *e2eNode {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real ansible-runner jobs for about 20s")
	}
	needCgroups(t)
	needTool(t, "ansible-runner", "python3-ansible-runner ansible")
	n := &e2eNode{t: t, parent: fmt.Sprintf("peakline-agent-e2e-%d-%d", os.Getpid(), agentSeq.Add(1)),
		spool: t.TempDir(), hier: e2eHierarchies()}
	n.awx = awxtest.NewServer(awxtest.Options{Token: awxToken, Lag: 2 * time.Second})
	t.Cleanup(n.awx.Close)
	n.tokenFile = filepath.Join(t.TempDir(), "awx-token")
	must(t, os.WriteFile(n.tokenFile, []byte(awxToken+"\n"), 0o600))
	t.Cleanup(func() { removeCgroupTree(n.hier, n.parent) })
	return n
}

// e2eHierarchies are the cgroup hierarchies a job's cgroup is made in: on
// cgroup v2 the one tree at /sys/fs/cgroup, on v1 the controllers the agent
// reads.
func e2eHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	return []string{"/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}
}

// cgroup makes rel (below the test's parent) in every hierarchy and
// returns its cgroup.procs files.
func (n *e2eNode) cgroup(rel string) []string {
	return makeJobCgroup(n.t, n.hier, n.parent, rel)
}

// makeJobCgroup makes parent/rel in each of hier and returns its
// cgroup.procs files. On v2 each level above the leaf enables cpu, memory
// and pids for its children, as systemd does for a scope and the kubelet
// for a pod, top down, so that the leaf has their files; the leaf enables none,
// since a v2 cgroup that delegates controllers cannot hold processes.
func makeJobCgroup(tb testing.TB, hier []string, parent, rel string) []string {
	tb.Helper()
	var procs []string
	for _, h := range hier {
		dir := filepath.Join(h, parent, rel)
		must2(tb, os.MkdirAll(dir, 0o755))
		if len(hier) == 1 {
			up := h
			for _, part := range strings.Split(filepath.Join(parent, filepath.Dir(rel)), "/") {
				must2(tb, os.WriteFile(filepath.Join(up, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0o644))
				up = filepath.Join(up, part)
			}
			must2(tb, os.WriteFile(filepath.Join(up, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0o644))
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	return procs
}

// podmanCgroup lays a job's container out as podman with the systemd
// cgroup manager and crun do: machine.slice/libpod-<id>.scope/container.
func (n *e2eNode) podmanCgroup() []string {
	return n.cgroup("machine.slice/libpod-" + randomHex(32) + ".scope/container")
}

// kubernetesCgroup lays a job's container out as the kubelet's systemd
// driver with containerd does for a burstable pod.
func (n *e2eNode) kubernetesCgroup() []string {
	uid := strings.ReplaceAll(fmt.Sprintf("%s-%s-%s-%s-%s", randomHex(4), randomHex(2), randomHex(2), randomHex(2), randomHex(6)), "-", "_")
	return n.cgroup("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice/cri-containerd-" + randomHex(32) + ".scope")
}

// removeCgroupTree kills what is left in a test's cgroups and removes them.
func removeCgroupTree(hier []string, parent string) {
	for _, h := range hier {
		top := filepath.Join(h, parent)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs) // children first
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			for i := 0; i < 50; i++ {
				if err := os.Remove(d); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func randomHex(bytes int) string {
	b := make([]byte, bytes)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runnerJob is a real ansible-runner run with AWX's job environment.
type runnerJob struct {
	id    int64
	pdd   string
	cmd   *exec.Cmd
	out   *lockedBuffer
	done  chan struct{}
	err   error
	ended time.Time
}

func (j *runnerJob) eventsDir() string { return filepath.Join(j.pdd, "artifacts", "job", "job_events") }

// startJob starts `ansible-runner run` on playbook as AWX would for job id:
// JOB_ID, INVENTORY_ID, PROJECT_REVISION and AWX_HOST in its environment,
// inside the cgroups whose cgroup.procs files are given (none: it stays in
// the test's own cgroup). The job's metadata is served by the fake AWX,
// running until the runner exits, then successful.
func (n *e2eNode) startJob(id int64, playbook string, procs []string) *runnerJob {
	t := n.t
	t.Helper()
	pdd := privateDataDir(t, playbook, localInventory, "")
	meta := awxtest.Job{ID: id, Name: "agent e2e", Status: "running", TemplateID: 7, TemplateName: "agent e2e",
		Playbook: "site.yml", ExecutionNode: "node1", Started: time.Now()}
	return n.runJob(pdd, meta, procs, "")
}

// runJob starts `ansible-runner run` of the private data dir pdd (its
// project's site.yml, with runnerArgs added) as AWX job meta.ID: JOB_ID,
// INVENTORY_ID, PROJECT_REVISION, AWX_HOST and env in its environment,
// inside the cgroups whose cgroup.procs files are procs. The AWX
// stand-in serves meta, running until the runner exits, then successful
// or failed.
func (n *e2eNode) runJob(pdd string, meta awxtest.Job, procs []string, runnerArgs string, env ...string) *runnerJob {
	t := n.t
	t.Helper()
	j := &runnerJob{id: meta.ID, pdd: pdd, out: &lockedBuffer{}, done: make(chan struct{})}
	n.awx.AddJob(meta, j.eventsDir())

	// The shell joins the cgroups, then becomes ansible-runner: every
	// process of the job starts inside, as in a container.
	script := `for f in "$@"; do echo $$ > "$f" || exit 97; done; exec ansible-runner run "$PDD" -p site.yml --ident job` + runnerArgs
	j.cmd = exec.Command("sh", append([]string{"-c", script, "job"}, procs...)...)
	j.cmd.Env = append(append(os.Environ(), "PDD="+pdd, fmt.Sprintf("JOB_ID=%d", meta.ID), "INVENTORY_ID=3",
		"PROJECT_REVISION=0123456789abcdef", "AWX_HOST=https://awx.example.com"), env...)
	j.cmd.Stdout, j.cmd.Stderr = j.out, j.out
	must(t, j.cmd.Start())
	go func() {
		j.err = j.cmd.Wait()
		j.ended = time.Now()
		meta.Status, meta.Finished, meta.EventProcessingFinished = "successful", time.Now(), true
		if j.err != nil {
			meta.Status = "failed"
		}
		n.awx.SetJob(meta)
		close(j.done)
	}()
	t.Cleanup(func() {
		_ = j.cmd.Process.Kill()
		<-j.done
	})
	return j
}

// wait waits for the runner to exit successfully.
func (j *runnerJob) wait(t *testing.T) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(testscale.Scaled(t, 90*time.Second)):
		t.Fatalf("job %d: ansible-runner still running after %v\n%s", j.id, testscale.Scaled(t, 90*time.Second), j.out.String())
	}
	if j.err != nil {
		t.Fatalf("job %d: ansible-runner: %v\n%s", j.id, j.err, j.out.String())
	}
}

// agentProc is a running `peakline agent`.
type agentProc struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
}

// startAgent runs the agent binary against server and the node's AWX,
// discovering only below the test's parent cgroup.
func (n *e2eNode) startAgent(server string, extra ...string) *agentProc {
	t := n.t
	t.Helper()
	args := []string{"agent", "--server", server, "--awx-url", n.awx.URL, "--awx-token-file", n.tokenFile,
		"--cgroup-root", "/sys/fs/cgroup", "--proc-root", "/proc", "--spool-dir", n.spool,
		"--poll-interval", testscale.Scaled(t, 100*time.Millisecond).String(), "--awx-poll-interval", "250ms", "--awx-page-size", "5",
		"--drain-timeout", "40s", "--log-level", "debug",
		"--scope", "podman:" + n.parent + `:^libpod-([0-9a-f]{64})\.scope$`,
		"--scope", "kubernetes:" + n.parent + `:^cri-containerd-([0-9a-f]{64})\.scope$`}
	a := &agentProc{cmd: exec.Command(peaklineBin(t), append(args, extra...)...), log: &lockedBuffer{}, done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	must(t, a.cmd.Start())
	a.waitLog(t, regexp.MustCompile(`msg="agent started"`), 10*time.Second)
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		<-a.done
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log.String())
		}
	})
	return a
}

// waitLog waits until the agent's log matches re.
func (a *agentProc) waitLog(t *testing.T, re *regexp.Regexp, within time.Duration) {
	t.Helper()
	within = testscale.Scaled(t, within)
	deadline := time.Now().Add(within)
	for !re.MatchString(a.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's log did not show %q within %v:\n%s", re, within, a.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jobDoneRE(id int64) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`msg="job done".* job=%d\b`, id))
}

// stop sends SIGTERM and waits for the agent to exit.
func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(testscale.Scaled(t, 30*time.Second)):
		t.Fatalf("agent did not stop within %v of SIGTERM:\n%s", testscale.Scaled(t, 30*time.Second), a.log.String())
	}
}

// taskNames reads the runner's own task starts: counter → task name.
func taskNames(t *testing.T, dir string) map[int64]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	out := map[int64]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		var ev struct {
			Counter   int64  `json:"counter"`
			Event     string `json:"event"`
			EventData struct {
				Task string `json:"task"`
			} `json:"event_data"`
		}
		must(t, json.Unmarshal(b, &ev))
		if ev.Event == "playbook_on_task_start" {
			out[ev.Counter] = ev.EventData.Task
		}
	}
	return out
}

type storedJob struct {
	JobID        string `json:"job_id"`
	TemplateID   string `json:"template_id"`
	TemplateName string `json:"template_name"`
	Status       string `json:"status"`
	Playbook     string `json:"playbook"`
	Measured     string `json:"measured"`
}

// checkJob checks what the server stored of job j: its AWX identity, its
// tasks equal to the runner's, and each resource's peak on the task that
// caused it.
func checkJob(t *testing.T, s *served, j *runnerJob, measured string) {
	t.Helper()
	id := strconv.FormatInt(j.id, 10)
	var jobs struct {
		Jobs []storedJob `json:"jobs"`
	}
	code, body := s.get(t, "/api/v1/jobs")
	if code != 200 || json.Unmarshal(body, &jobs) != nil {
		t.Fatalf("jobs: %d %s", code, body)
	}
	var got *storedJob
	for i := range jobs.Jobs {
		if jobs.Jobs[i].JobID == id {
			got = &jobs.Jobs[i]
		}
	}
	want := storedJob{JobID: id, TemplateID: "7", TemplateName: "agent e2e", Status: "successful", Playbook: "site.yml", Measured: measured}
	if got == nil || *got != want {
		t.Errorf("stored job %+v, want %+v", got, want)
	}

	var tasks struct {
		Tasks []struct {
			Counter int64              `json:"counter"`
			Name    string             `json:"name"`
			Waited  map[string]float64 `json:"waited"`
		} `json:"tasks"`
	}
	code, body = s.get(t, "/api/v1/jobs/"+id+"/tasks")
	if code != 200 || json.Unmarshal(body, &tasks) != nil {
		t.Fatalf("tasks of %s: %d %s", id, code, body)
	}
	served := map[int64]string{}
	for _, tk := range tasks.Tasks {
		served[tk.Counter] = tk.Name
		// A job's own cgroup tells how long it waited for a CPU; a
		// process tree has no stall figures.
		if _, ok := tk.Waited["cpu"]; ok != (measured == "cgroup") && tk.Counter != 0 {
			t.Errorf("job %s task %q: waited %v, want a CPU share exactly when measured from a cgroup (%s)", id, tk.Name, tk.Waited, measured)
		}
	}
	runner := taskNames(t, j.eventsDir())
	// Counter 0 holds the samples from before the first task start.
	if name, ok := served[0]; ok && name != "" {
		t.Errorf("job %s: task 0 is named %q", id, name)
	}
	delete(served, 0)
	if len(runner) == 0 || !mapsEqual(served, runner) {
		t.Errorf("job %s: served tasks %v, want the runner's %v", id, served, runner)
	}

	var g graphDoc
	code, body = s.get(t, "/api/v1/jobs/"+id+"/graph?points=1000")
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph of %s: %d %s", id, code, body)
	}
	peak := map[string]*peakDoc{}
	for _, sr := range g.Series {
		peak[sr.Resource] = sr.Peak
	}
	for res, p := range peak {
		if p != nil {
			t.Logf("job %s: %s peak %.1f in task %d %q", id, res, p.V, p.Counter, served[p.Counter])
		}
	}
	if measured == "process-tree" {
		checkTreeCPU(t, id, g)
	}
	if t.Failed() {
		_, tb := s.get(t, "/api/v1/jobs/"+id+"/tasks")
		t.Logf("job %s: tasks %s", id, tb)
		for _, sr := range g.Series {
			if sr.Resource == "cpu" {
				t.Logf("job %s: cpu t=%v v=%.0f", id, sr.T, sr.V)
			}
		}
	}
	if p := peak["memory"]; p == nil || p.V < 250e6 || served[p.Counter] != "allocate memory" {
		t.Errorf("job %s: memory peak %+v (task %q), want >= 250 MB in \"allocate memory\"", id, p, served[peakCounter(p)])
	}
	// A process tree's CPU shows a member's last interval only when its
	// parent reaps it (docs/awx.md, "Jobs with no cgroup of their own"), so the
	// burners' end can land a sample into the next task: for such a job
	// only the means decide.
	peakShare := 0.75
	if measured == "process-tree" {
		peakShare = 0
	}
	checkCPUTask(t, "job "+id+": ", g, "burn some cpu", peakShare)
	if p := peak["pids"]; p == nil || p.V < 25 || served[p.Counter] != "fork a burst of processes" {
		t.Errorf("job %s: pids peak %+v (task %q), want >= 25 in \"fork a burst of processes\"", id, p, served[peakCounter(p)])
	}
}

// checkTreeCPU checks that no CPU sample of a job measured from its
// process tree shows more than the host's CPUs can do, plus a half.
// /proc/<pid>/stat's times are rounded down to 10 ms clock ticks, so over
// an interval a process shows up to one tick more than it used in it, and
// only if it ran (one that ran for d crosses a tick boundary with
// probability d / 10 ms: rounding adds nothing on average). The sampler's
// CPU intervals are 50 to 100 ms (half the agent's 100 ms poll at the
// shortest, where a boundary sample closes one): the half leaves 50 ms
// over two CPUs' worth, five ticks, in the shortest interval and ten in a
// regular one, for the ticks of the burning shells and of ansible's own
// processes beside them, and for the interval's wall time, taken after
// the pass over /proc that read the counter, some milliseconds late on a
// loaded host. A time counted twice, or a member's past put in one
// interval, shows as seconds in 100 ms: tens of CPUs (4291% on 2 CPUs,
// before the tree counted each member's time once).
func checkTreeCPU(t *testing.T, id string, g graphDoc) {
	t.Helper()
	limit := 100 * float64(runtime.NumCPU()) * 1.5
	for _, sr := range g.Series {
		if sr.Resource != "cpu" {
			continue
		}
		if sr.RawSamples != len(sr.V) {
			t.Fatalf("job %s: the graph has %d cpu points for %d samples; want them all", id, len(sr.V), sr.RawSamples)
		}
		for i, v := range sr.V {
			if v > limit {
				t.Errorf("job %s: cpu sample at %d is %.0f%%, more than %.0f%% (%d CPUs and a half)", id, sr.T[i], v, limit, runtime.NumCPU())
			}
		}
	}
}

func mapsEqual(a, b map[int64]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// jobIDBase keeps the tests' AWX job ids apart from any other run's.
func jobIDBase() int64 { return 900_000 + int64(os.Getpid()%1000)*100 + agentSeq.Add(1)*10 }

// TestAgentFindsAWXJobs runs three AWX jobs at once on one node: one in a
// podman container's cgroup, one in a Kubernetes pod's, one with no cgroup
// of its own (its processes in the test's cgroup). The agent discovers
// each, follows its events through the fake AWX (pages of 5, 2s of lag, a
// 503, a bearer token) and the server stores each with its AWX identity,
// the runner's tasks and the peaks on the right tasks.
func TestAgentFindsAWXJobs(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	n.awx.FailRequests(awxtest.Fault{Status: 503}, 3)
	a := n.startAgent(s.URL, "--process-tree")
	// One job after the other: three jobs burning two CPUs each at once
	// on a loaded 2-core host would blur the CPU peaks.
	base := jobIDBase()
	tree := n.startJob(base+3, agentPlaybook(t, ""), nil)
	tree.wait(t)
	podman := n.startJob(base+1, agentPlaybook(t, ""), n.podmanCgroup())
	podman.wait(t)
	k8s := n.startJob(base+2, agentPlaybook(t, ""), n.kubernetesCgroup())
	k8s.wait(t)
	for _, j := range []*runnerJob{podman, k8s, tree} {
		a.waitLog(t, jobDoneRE(j.id), 45*time.Second)
	}
	checkJob(t, s, podman, "cgroup")
	checkJob(t, s, k8s, "cgroup")
	checkJob(t, s, tree, "process-tree")

	var bearer, failed int
	for _, r := range n.awx.Requests() {
		if r.Status == 401 {
			bearer++
		}
		if r.Status == 503 {
			failed++
		}
	}
	if bearer != 0 || failed != 1 {
		t.Errorf("AWX answered 401 %d times and 503 %d times, want 0 and 1", bearer, failed)
	}
	// Only this test's jobs: other processes on the host may carry a
	// JOB_ID too, and the agent rightly measures them as process trees.
	log := a.log.String()
	for _, j := range []*runnerJob{podman, k8s, tree} {
		re := regexp.MustCompile(fmt.Sprintf(`msg="job was running before the agent started[^"]*".* job=%d\b`, j.id))
		if re.MatchString(log) {
			t.Errorf("job %d started after the agent but was said to predate it:\n%s", j.id, log)
		}
	}
}

// TestAgentRestartMidJob kills the agent with SIGKILL in the middle of a
// job and starts it again: the new agent picks the job up, says its start
// is missing, and the stored job has the runner's tasks with the later
// tasks' peaks where they belong.
func TestAgentRestartMidJob(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	a := n.startAgent(s.URL)
	j := n.startJob(jobIDBase(), agentPlaybook(t, "3"), n.podmanCgroup())
	a.waitLog(t, regexp.MustCompile(fmt.Sprintf(`msg="sampling job".* job=%d\b`, j.id)), 30*time.Second)
	time.Sleep(time.Second)
	must(t, a.cmd.Process.Kill())
	<-a.done
	a2 := n.startAgent(s.URL)
	j.wait(t)
	a2.waitLog(t, jobDoneRE(j.id), 45*time.Second)
	a2.waitLog(t, regexp.MustCompile(fmt.Sprintf(`job was running before the agent started.* job=%d\b`, j.id)), time.Second)
	checkJob(t, s, j, "cgroup")
}

// TestAgentAWXOutage makes AWX answer 503 to the agent's first requests
// about a job, for several seconds of the job: the samples wait, and are
// attributed to the right tasks once AWX answers.
func TestAgentAWXOutage(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	n.awx.FailRequests(awxtest.Fault{Status: 503}, 1, 2, 3, 4)
	a := n.startAgent(s.URL)
	j := n.startJob(jobIDBase(), agentPlaybook(t, ""), n.podmanCgroup())
	j.wait(t)
	a.waitLog(t, jobDoneRE(j.id), 60*time.Second)
	checkJob(t, s, j, "cgroup")
	var firstOK time.Duration
	for _, r := range n.awx.Requests() {
		if r.Status == 200 && r.JobID == j.id && firstOK == 0 {
			firstOK = time.Duration(r.N)
		}
	}
	if firstOK != 5 {
		t.Errorf("the first request AWX answered was number %d, want 5 (after four 503s)", firstOK)
	}
}

// TestAgentServerOutage runs a job while the server is down: the agent
// spools its batches at exit, and once the server is back a new agent
// sends them.
func TestAgentServerOutage(t *testing.T) {
	n := newE2ENode(t)
	addr := freeAddr(t)
	data := t.TempDir()
	url := "http://" + addr
	// The job has a cgroup of its own; with process trees off, no other
	// process on the host that carries a JOB_ID adds to what is spooled.
	a := n.startAgent(url, "--process-tree=false")
	j := n.startJob(jobIDBase(), agentPlaybook(t, ""), n.podmanCgroup())
	j.wait(t)
	a.waitLog(t, jobDoneRE(j.id), 45*time.Second)
	a.stop(t)
	if !strings.Contains(a.log.String(), "spooled") {
		t.Fatalf("the agent did not spool its batches:\n%s", a.log.String())
	}
	s := serve(t, "--data", data, "--listen", addr)
	a2 := n.startAgent(s.URL, "--process-tree=false")
	a2.waitLog(t, regexp.MustCompile(`resending spooled batches`), 10*time.Second)
	// A spooled batch leaves the spool once the server took it.
	deadline := time.Now().Add(testscale.Scaled(t, 20*time.Second))
	for {
		left, _ := filepath.Glob(filepath.Join(n.spool, "*.json.gz"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches still spooled 20s after the server came back", len(left))
		}
		time.Sleep(200 * time.Millisecond)
	}
	a2.stop(t)
	checkJob(t, s, j, "cgroup")
	// The server was down for the whole job: what the first agent left
	// unsent is all the server has, once.
	m := regexp.MustCompile(`unsent_samples=(\d+)`).FindStringSubmatch(a.log.String())
	if m == nil {
		t.Fatalf("the first agent did not say what it left unsent:\n%s", a.log.String())
	}
	if stored := s.rawSamples(t, strconv.FormatInt(j.id, 10)); strconv.Itoa(stored) != m[1] {
		t.Errorf("the server stored %d samples, the agent spooled %s", stored, m[1])
	}
}
