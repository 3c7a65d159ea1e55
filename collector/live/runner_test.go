package live

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const runnerPlaybook = `- name: live collector test play
  hosts: localhost
  gather_facts: false
  tasks:
    - name: burn some cpu
      ansible.builtin.command:
        argv: [python3, -c, "import time\nwhile time.process_time() < 2: pass"]
    - name: allocate memory
      ansible.builtin.command:
        argv: [python3, -c, "b = b'x' * (260 << 20)"]
      changed_when: true
      notify: say goodbye
    - name: fork a few
      ansible.builtin.shell: for i in $(seq 24); do sleep 1 & done; wait
  handlers:
    - name: say goodbye
      ansible.builtin.command: sleep 0.5
`

// runnerRequired tells whether the environment promises ansible-runner:
// CI=true (set by most CI systems) or PEAKLINE_REQUIRE_RUNNER=1.
func runnerRequired() bool {
	return os.Getenv("CI") == "true" || os.Getenv("PEAKLINE_REQUIRE_RUNNER") == "1"
}

// TestCollectAnsibleRunner runs a real `ansible-runner run` of a small
// playbook under Collect, without --ident, so the collector must find the
// artifacts dir runner makes, follow its job events as they are written and
// attribute each peak to its task.
//
// "allocate memory" ends at its peak: python writes 260 MiB and exits at
// once, so the task may hold no poll at all and the kernel's peak is read
// at or after the next task's start: memory is polled every 3s here, so
// most runs hold no memory poll between the allocation and the next
// start. The sampler closes the task's interval at that start (a boundary
// sample, or the poll restamped just before it), so the peak must be the
// allocation's, with the production settle and job_events scan interval.
func TestCollectAnsibleRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ansible-runner for about 10s")
	}
	if _, err := exec.LookPath("ansible-runner"); err != nil {
		msg := "ansible-runner is not installed, so a real playbook under the collector did not run " +
			"(apt-get install ansible python3-ansible-runner)"
		if runnerRequired() {
			t.Fatal(msg + "; CI=true or PEAKLINE_REQUIRE_RUNNER=1 says this environment must have it")
		}
		t.Skip(msg + "; set PEAKLINE_REQUIRE_RUNNER=1 to make this a failure")
	}
	requireCgroups(t)
	pdd := t.TempDir()
	for name, content := range map[string]string{
		"project/perf.yml": runnerPlaybook,
		"inventory/hosts":  "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n",
	} {
		if err := os.MkdirAll(filepath.Join(pdd, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(pdd, name), content)
	}
	srv := newIngestServer(t)
	var notices bytes.Buffer
	cfg := LiveConfig{
		Server:   srv.url(),
		SpoolDir: t.TempDir(),
		Notices:  &notices,
		Command:  []string{"ansible-runner", "run", pdd, "-p", "perf.yml"},
		// Memory is polled less often than the allocation task lasts:
		// only the task boundary puts its peak on it.
		MemoryInterval: 3 * time.Second,
		Stdout:         t.Output(),
		Stderr:         t.Output(),
		Logger:         testLogger(t),
	}
	tune := testTuning()
	tune.settle, tune.eventsEvery = defaultLiveTuning().settle, defaultLiveTuning().eventsEvery
	code, err := collectLive(context.Background(), cfg, tune)
	if err != nil || code != 0 {
		t.Fatalf("Collect = %d, %v", code, err)
	}
	idents, _ := os.ReadDir(filepath.Join(pdd, "artifacts"))
	if len(idents) != 1 {
		t.Fatalf("artifacts: %v", idents)
	}
	ident := idents[0].Name()
	// The job page is printed once runner has named its ident, and
	// nothing else: the job had events.
	if want := "peakline collect: job page " + srv.url() + "/jobs/" + ident + "\n"; notices.String() != want {
		t.Errorf("notices %q, want %q", notices.String(), want)
	}

	srv.mu.Lock()
	tasks, last, playbook := srv.tasks, srv.last, srv.playbook
	srv.mu.Unlock()
	// The job events name the playbook; the job's info carries it, as
	// import's does.
	if playbook != "perf.yml" {
		t.Errorf("playbook sent %q, want perf.yml", playbook)
	}
	byName := map[string]int64{}
	for c, name := range tasks {
		byName[name] = c
	}
	t.Logf("tasks %v, last event %d", tasks, last)
	for _, name := range []string{"burn some cpu", "allocate memory", "fork a few", "say goodbye"} {
		if byName[name] == 0 {
			t.Fatalf("task %q not sent; got %v", name, tasks)
		}
	}
	samples := srv.got()
	peaks, taskMax, perTask := taskPeaks(t, samples, ident, tasks)
	t.Logf("job %s: samples per counter %v; peaks: cpu %.1f%% in %q, memory %.1f MiB in %q, pids %.0f in %q",
		ident, perTask, peaks["cpu"].v, tasks[peaks["cpu"].counter], peaks["memory"].v/(1<<20), tasks[peaks["memory"].counter],
		peaks["pids"].v, tasks[peaks["pids"].counter])
	for c, m := range taskMax {
		t.Logf("counter %2d %-16q samples %3d: max cpu %6.1f%%, memory %6.1f MiB, pids %2.0f", c, tasks[c], perTask[c], m["cpu"], m["memory"]/(1<<20), m["pids"])
	}
	checkPerfPeaks(t, samples, byName, tasks, peaks, taskMax)
}

// taskPeak is a resource's highest sample and the task counter it is on.
type taskPeak struct {
	v       float64
	counter int64
}

// taskPeaks reads the samples of one job: each resource's peak, each
// counter's highest sample per resource and each counter's sample count.
// Every sample must be of job and name the task of its counter.
func taskPeaks(t *testing.T, samples []gotSample, job string, tasks map[int64]string) (map[string]taskPeak, map[int64]map[string]float64, map[int64]int) {
	t.Helper()
	peaks := map[string]taskPeak{}
	taskMax := map[int64]map[string]float64{}
	perTask := map[int64]int{}
	for _, s := range samples {
		if s.job != job {
			t.Fatalf("sample of job %q, want %q", s.job, job)
		}
		if s.counter != 0 && tasks[s.counter] != s.task {
			t.Fatalf("sample names task %q for counter %d, the task is %q", s.task, s.counter, tasks[s.counter])
		}
		perTask[s.counter]++
		if taskMax[s.counter] == nil {
			taskMax[s.counter] = map[string]float64{}
		}
		taskMax[s.counter][s.resource] = max(taskMax[s.counter][s.resource], s.v)
		if s.v > peaks[s.resource].v {
			peaks[s.resource] = taskPeak{s.v, s.counter}
		}
	}
	return peaks, taskMax, perTask
}

// checkPerfPeaks checks the peaks of testdata's perf playbook, run by
// ansible-runner or ansible-playbook: the memory peak in "allocate
// memory", the PID peak in "fork a few" and 2 s of CPU in "burn some cpu".
func checkPerfPeaks(t *testing.T, samples []gotSample, byName map[string]int64, tasks map[int64]string, peaks map[string]taskPeak, taskMax map[int64]map[string]float64) {
	t.Helper()
	if p := peaks["memory"]; p.counter != byName["allocate memory"] || p.v < 250<<20 {
		t.Errorf("memory peak %.0f in counter %d, want ≥ 250 MiB in \"allocate memory\" (%d)", p.v, p.counter, byName["allocate memory"])
	}
	// Ansible's own processes reach 13-14 PIDs in any task, so "fork a
	// few" starts 24 sleeps. The sample closing the task before may hold
	// the first moments of "fork a few" (the boundary rule: up to the
	// event latency of the next task), so it may tie the peak but not
	// pass it.
	fork := taskMax[byName["fork a few"]]["pids"]
	if fork < 24 {
		t.Errorf("\"fork a few\" peaks at %.0f PIDs, want ≥ 24", fork)
	}
	for c, m := range taskMax {
		if c != byName["fork a few"] && m["pids"] > fork {
			t.Errorf("counter %d %q peaks at %.0f PIDs, above \"fork a few\" (%.0f)", c, tasks[c], m["pids"], fork)
		}
	}
	// The task burns 2 s of CPU time (not of wall time), however busy the
	// machine. A sample stands for the interval before it, so up to one
	// interval at each end of the task lands in its neighbours.
	burnt := cpuSeconds(samples, 0, func(s gotSample) bool { return s.counter == byName["burn some cpu"] })
	t.Logf("CPU time in \"burn some cpu\" from the samples: %.2fs (the task burns 2s plus ansible's own)", burnt)
	if burnt < 1.5 {
		t.Errorf("the samples of \"burn some cpu\" add up to %.2fs of CPU, want ≥ 1.5s", burnt)
	}
}
