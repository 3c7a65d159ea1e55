package e2e

// Right-sizing on real runs: one playbook run by ansible-runner under
// `peakline collect` against four local-connection hosts, each fork
// holding a known amount of memory, with --forks 1 to 4; then under a
// cgroup memory limit that the 4-fork run outgrows (OOM-killed in
// "hold memory"), and a run at its cap (a file written through the page
// cache fills its limit). The recommendation must match what the runs
// themselves show.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// sizingPlaybook: every host holds hold_mib MiB for 2 s in "hold
// memory"; with scratch_mib > 0, one host writes that many MiB to a
// file first (page cache, charged to the job's cgroup). The holders
// offer themselves to the OOM killer first (oom_score_adj 1000), so
// that a run outgrowing its limit loses a holder, as a container loses
// its biggest module, rather than ansible-playbook itself, whose size
// while the holders still fill their memory is close to theirs.
const sizingPlaybook = `- name: size me
  hosts: fleet
  gather_facts: false
  vars:
    hold_mib: 64
    scratch_mib: 0
  tasks:
    - name: warm up
      ansible.builtin.command: /bin/true
    - name: write scratch
      ansible.builtin.command: dd if=/dev/zero of={{ playbook_dir }}/scratch bs=1M count={{ scratch_mib }} oflag=dsync status=none
      when: scratch_mib | int > 0
      run_once: true
    - name: hold memory
      ansible.builtin.command: >-
        /usr/bin/python3 -c "import time; open('/proc/self/oom_score_adj', 'w').write('1000');
        b = bytearray({{ hold_mib | int }} << 20);
        [b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; time.sleep(2)"
    - name: report
      ansible.builtin.debug:
        msg: "held {{ hold_mib }} MiB"
`

// sizingHoldMiB is what each fork's "hold memory" allocates.
const sizingHoldMiB = 64

// sizingInventory is the fleet the sizing playbook runs on: four hosts,
// each run locally, so that --forks sets how many run at once.
const sizingInventory = `[fleet]
h1 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
h2 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
h3 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
h4 ansible_connection=local ansible_python_interpreter=/usr/bin/python3
`

// sizingRun runs the playbook once under collect as job id of template
// 77 with forks forks, under limit bytes of memory (0: none) and writing
// scratchMiB of scratch; it returns collect's exit code and output.
func sizingRun(t *testing.T, s *served, id string, forks int, limit int64, scratchMiB int) (int, string) {
	t.Helper()
	pdd := privateDataDir(t, sizingPlaybook, sizingInventory, fmt.Sprintf("scratch_mib: %d\nhold_mib: %d\n", scratchMiB, sizingHoldMiB))
	args := []string{"collect", "--server", s.URL, "--template", "77", "--template-name", "size me",
		"--poll-interval", "100ms", "--spool-dir", t.TempDir()}
	if limit > 0 {
		args = append(args, "--memory-limit", fmt.Sprint(limit))
	}
	args = append(args, "--", "ansible-runner", "run", pdd, "-p", "site.yml", "--forks", fmt.Sprint(forks), "--ident", id)
	cmd := exec.Command(peaklineBin(t), args...)
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code <= 0 {
		t.Fatalf("collect %s: %v\n%s", id, err, out)
	}
	if !strings.Contains(string(out), "collection done") {
		t.Fatalf("collect %s did not finish its collection:\n%s", id, out)
	}
	return code, string(out)
}

// sizingJob is a job of the jobs list as the test reads it.
type sizingJob struct {
	JobID string `json:"job_id"`
	Peaks struct {
		Memory struct {
			V float64 `json:"v"`
		} `json:"memory"`
	} `json:"peaks"`
	Status string `json:"status"`
	Sizing struct {
		Forks            int    `json:"forks"`
		MemoryLimitBytes int64  `json:"memory_limit_bytes"`
		OOMKills         int    `json:"oom_kills"`
		OOMCounter       int64  `json:"oom_counter"`
		AtCap            bool   `json:"at_cap"`
		EEImage          string `json:"ee_image"`
		ProjectRevision  string `json:"project_revision"`
	} `json:"sizing"`
}

// templateJobs reads the jobs list of template id, by job id.
func templateJobs(t *testing.T, s *served, id string) map[string]sizingJob {
	t.Helper()
	var page struct{ Jobs []sizingJob }
	code, body := s.get(t, "/api/v1/jobs?template="+id)
	if code != 200 || json.Unmarshal(body, &page) != nil {
		t.Fatalf("jobs of template %s: %d %s", id, code, body)
	}
	out := map[string]sizingJob{}
	for _, j := range page.Jobs {
		out[j.JobID] = j
	}
	return out
}

// rightsizeAnswer is the part of GET .../rightsize the test reads.
type rightsizeAnswer struct {
	Runs       int    `json:"runs"`
	RunsUsed   int    `json:"runs_used"`
	Confidence string `json:"confidence"`
	Memory     struct {
		RequestBytes int64 `json:"request_bytes"`
		LimitBytes   int64 `json:"limit_bytes"`
		DrivenBy     *struct {
			Task string `json:"task"`
		} `json:"driven_by"`
	} `json:"memory"`
	Forks struct {
		PerForkBytes     *int64 `json:"per_fork_bytes"`
		BaseBytes        *int64 `json:"base_bytes"`
		MaxForksForLimit *int   `json:"max_forks_for_limit"`
		Fit              struct {
			Runs int      `json:"runs"`
			R2   *float64 `json:"r2"`
		} `json:"fit"`
	} `json:"forks"`
	OOM []struct {
		JobID      string `json:"job_id"`
		Task       string `json:"task"`
		Counter    int64  `json:"counter"`
		LimitBytes int64  `json:"limit_bytes"`
	} `json:"oom"`
	AtCap []struct {
		JobID string `json:"job_id"`
		Task  string `json:"task"`
	} `json:"at_cap"`
	PodSpecOverride string   `json:"pod_spec_override"`
	Notes           []string `json:"notes"`
}

// fitPerFork fits peak = base + perFork × forks by least squares.
func fitPerFork(forks []int, peaks []float64) (base, perFork float64) {
	n := float64(len(forks))
	var sx, sy, sxx, sxy float64
	for i, f := range forks {
		x := float64(f)
		sx, sy, sxx, sxy = sx+x, sy+peaks[i], sxx+x*x, sxy+x*peaks[i]
	}
	perFork = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return (sy - perFork*sx) / n, perFork
}

func TestRightsizeRealRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("real ansible-runner runs: skipped under -short")
	}
	needCgroups(t)
	needTool(t, "ansible-runner", "python3-ansible-runner ansible")
	s := serve(t, "--data", t.TempDir(), "--events-url", eventsTemplate)

	// A first run charges the page cache of python and ansible to a
	// cgroup of its own, so that the runs measured start alike.
	sizingRun(t, s, "warmup", 1, 0, 0)
	forks := []int{1, 2, 3, 4}
	for _, f := range forks {
		if code, out := sizingRun(t, s, fmt.Sprintf("f%d", f), f, 0, 0); code != 0 {
			t.Fatalf("run with %d forks exited %d:\n%s", f, code, out)
		}
	}
	// The per-fork cost the runs show, fitted here from the jobs list's
	// peaks: the allocation plus ansible's own worker and module.
	byID := templateJobs(t, s, "77")
	var peaks []float64
	for _, f := range forks {
		j := byID[fmt.Sprintf("f%d", f)]
		if j.Sizing.Forks != f {
			t.Fatalf("job f%d says %d forks", f, j.Sizing.Forks)
		}
		peaks = append(peaks, j.Peaks.Memory.V)
	}
	base, perFork := fitPerFork(forks, peaks)
	t.Logf("peaks %.1f MiB at forks %v: %.1f MiB + %.1f MiB per fork", mibs(peaks), forks, base/(1<<20), perFork/(1<<20))
	if perFork < sizingHoldMiB<<20 {
		t.Fatalf("the runs show %.1f MiB per fork, less than the %d MiB each fork allocates", perFork/(1<<20), sizingHoldMiB)
	}

	// Killed: four forks under the memory of two and a half (whole MiB:
	// the kernel keeps limits in pages).
	oomLimit := int64(base+2.5*perFork) >> 20 << 20
	if code, out := sizingRun(t, s, "oom", 4, oomLimit, 0); code == 0 {
		t.Fatalf("the run under %d bytes exited 0: it was not killed\n%s", oomLimit, out)
	}
	// At its cap: one fork with room to spare for its own memory, but a
	// scratch file twice the limit written through the page cache.
	capLimit := int64(peaks[0]+64<<20) >> 20 << 20
	if code, out := sizingRun(t, s, "atcap", 1, capLimit, int(2*capLimit>>20)); code != 0 {
		t.Fatalf("the run at its cap exited %d:\n%s", code, out)
	}

	byID = templateJobs(t, s, "77")
	oom, atCap := byID["oom"], byID["atcap"]
	if oom.Sizing.OOMKills < 1 || oom.Sizing.MemoryLimitBytes != oomLimit || oom.Status != "failed" {
		t.Errorf("oom job: %+v, want OOM kills under %d, failed", oom, oomLimit)
	}
	if !atCap.Sizing.AtCap || atCap.Sizing.OOMKills != 0 || atCap.Sizing.MemoryLimitBytes != capLimit {
		t.Errorf("at-cap job: %+v, want at its cap of %d, not killed", atCap, capLimit)
	}
	// The task running at the kill, by the job's own tasks.
	var tasks struct {
		Tasks []struct {
			Counter int64  `json:"counter"`
			Name    string `json:"name"`
		} `json:"tasks"`
	}
	if code, body := s.get(t, "/api/v1/jobs/oom/tasks"); code != 200 || json.Unmarshal(body, &tasks) != nil {
		t.Fatalf("tasks of oom: %d %s", code, body)
	}
	var holdCounter int64
	for _, tk := range tasks.Tasks {
		if tk.Name == "hold memory" {
			holdCounter = tk.Counter
		}
	}
	if holdCounter == 0 || oom.Sizing.OOMCounter != holdCounter {
		t.Errorf("oom job killed at task counter %d, want %d (hold memory)", oom.Sizing.OOMCounter, holdCounter)
	}

	code, body := s.get(t, "/api/v1/templates/77/rightsize")
	var rs rightsizeAnswer
	if code != 200 || json.Unmarshal(body, &rs) != nil {
		t.Fatalf("rightsize: %d %s", code, body)
	}
	t.Logf("rightsize: %s", body)
	if rs.Runs != 7 || rs.RunsUsed != 7 {
		t.Errorf("runs %d used %d, want 7 (warm-up, 4 fork runs, OOM, at cap)", rs.Runs, rs.RunsUsed)
	}
	if rs.Forks.PerForkBytes == nil {
		t.Fatalf("no per-fork estimate: %s", body)
	}
	got := float64(*rs.Forks.PerForkBytes)
	if got < sizingHoldMiB<<20 || got < 0.8*perFork || got > 1.2*perFork {
		t.Errorf("per fork %.1f MiB, want within 20%% of the runs' %.1f MiB and at least the %d MiB allocated", got/(1<<20), perFork/(1<<20), sizingHoldMiB)
	}
	if len(rs.OOM) != 1 || rs.OOM[0].JobID != "oom" || rs.OOM[0].Task != "hold memory" || rs.OOM[0].Counter != holdCounter || rs.OOM[0].LimitBytes != oomLimit {
		t.Errorf("oom runs %+v, want job oom killed in hold memory (counter %d) at %d", rs.OOM, holdCounter, oomLimit)
	}
	if rs.Memory.RequestBytes <= oomLimit || rs.Memory.LimitBytes != rs.Memory.RequestBytes {
		t.Errorf("memory request %d, limit %d: want both above the OOM run's limit %d", rs.Memory.RequestBytes, rs.Memory.LimitBytes, oomLimit)
	}
	// Never below what four forks need: the 4-fork run's peak.
	if float64(rs.Memory.RequestBytes) < peaks[3] {
		t.Errorf("memory request %d below the 4-fork peak %.0f", rs.Memory.RequestBytes, peaks[3])
	}
	if len(rs.AtCap) != 1 || rs.AtCap[0].JobID != "atcap" {
		t.Errorf("at-cap runs %+v, want job atcap", rs.AtCap)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(rs.PodSpecOverride), &pod); err != nil {
		t.Fatalf("pod_spec_override does not decode into a Pod: %v\n%s", err, rs.PodSpecOverride)
	}
	c := pod.Spec.Containers[0]
	if q := c.Resources.Limits[corev1.ResourceMemory]; c.Name != "worker" || q.Value() != rs.Memory.LimitBytes {
		t.Errorf("pod spec worker %q memory limit %v, want worker at %d", c.Name, q.String(), rs.Memory.LimitBytes)
	}
	writeSizingExample(t, body)

	t.Run("pages", func(t *testing.T) { testRightsizePages(t, s, holdCounter) })
}

func mibs(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v / (1 << 20)
	}
	return out
}

// writeSizingExample keeps the answer where PEAKLINE_RIGHTSIZE_EXAMPLE
// says (the worked example of docs/rightsizing.md is made so).
func writeSizingExample(t *testing.T, body []byte) {
	if p := os.Getenv("PEAKLINE_RIGHTSIZE_EXAMPLE"); p != "" {
		must(t, os.WriteFile(p, body, 0o644))
	}
}
