package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
)

// startSizedJob starts the right-sizing playbook (sizingPlaybook, four
// hosts) as AWX job id of template 78 with forks forks, in the
// container cgroup whose cgroup.procs files are procs; the AWX stand-in
// says the forks, as AWX's job API does.
func (n *e2eNode) startSizedJob(id int64, forks int, procs []string) *runnerJob {
	t := n.t
	t.Helper()
	pdd := privateDataDir(t, sizingPlaybook, sizingInventory, fmt.Sprintf("hold_mib: %d\n", sizingHoldMiB))
	meta := awxtest.Job{ID: id, Name: "size me", Status: "running", TemplateID: 78, TemplateName: "size me",
		Playbook: "site.yml", ExecutionNode: "node1", Started: time.Now(), Forks: forks,
		SCMRevision: "0123456789abcdef", EEImage: "quay.io/ansible/awx-ee:24.6.1"}
	return n.runJob(pdd, meta, procs, ` --forks "$FORKS"`, fmt.Sprintf("FORKS=%d", forks))
}

// limitCgroup limits the memory of the cgroup above the leaf whose
// cgroup.procs files are procs (a container's scope): the job's
// processes live in the leaf, under the scope's limit.
func limitCgroup(t *testing.T, procs []string, bytes int64) {
	t.Helper()
	for _, p := range procs {
		dir := filepath.Dir(filepath.Dir(p))
		file := ""
		switch {
		case strings.Contains(p, "/sys/fs/cgroup/memory/"):
			file = "memory.limit_in_bytes"
		case len(procs) == 1:
			file = "memory.max"
		default:
			continue
		}
		must(t, os.WriteFile(filepath.Join(dir, file), []byte(fmt.Sprint(bytes)), 0o644))
	}
}

// The agent path: jobs found in their container cgroups, forks from the
// AWX API stand-in, one job OOM-killed under its container's limit.
func TestAgentRightsize(t *testing.T) {
	n := newE2ENode(t)
	s := serve(t, "--data", t.TempDir())
	a := n.startAgent(s.URL)
	base := jobIDBase()
	// A warm-up job charges the page cache of python and ansible to a
	// cgroup of its own.
	warm := n.startSizedJob(base, 1, n.podmanCgroup())
	warm.wait(t)
	forks := []int{1, 2, 3}
	var jobs []*runnerJob
	for i, f := range forks {
		j := n.startSizedJob(base+1+int64(i), f, n.podmanCgroup())
		j.wait(t)
		jobs = append(jobs, j)
	}
	for _, j := range append([]*runnerJob{warm}, jobs...) {
		a.waitLog(t, jobDoneRE(j.id), 45*time.Second)
	}
	byID := templateJobs(t, s, "78")
	var peaks []float64
	for i, j := range jobs {
		e := byID[fmt.Sprint(j.id)]
		if e.Sizing.Forks != forks[i] || e.Sizing.EEImage != "quay.io/ansible/awx-ee:24.6.1" || e.Sizing.ProjectRevision != "0123456789abcdef" {
			t.Fatalf("job %d sizing %+v, want %d forks and the EE and revision AWX gave", j.id, e.Sizing, forks[i])
		}
		peaks = append(peaks, e.Peaks.Memory.V)
	}
	b, perFork := fitPerFork(forks, peaks)
	t.Logf("agent: peaks %.1f MiB at forks %v: %.1f MiB + %.1f MiB per fork", mibs(peaks), forks, b/(1<<20), perFork/(1<<20))

	// Three forks under the memory of one and a half: killed.
	procs := n.podmanCgroup()
	limit := int64(b+1.5*perFork) >> 20 << 20
	limitCgroup(t, procs, limit)
	oom := n.startSizedJob(base+9, 3, procs)
	<-oom.done
	if oom.err == nil {
		t.Fatalf("job %d under %d bytes was not killed:\n%s", oom.id, limit, oom.out.String())
	}
	a.waitLog(t, jobDoneRE(oom.id), 45*time.Second)
	hold := int64(0)
	for c, name := range taskNames(t, oom.eventsDir()) {
		if name == "hold memory" {
			hold = c
		}
	}
	e := templateJobs(t, s, "78")[fmt.Sprint(oom.id)]
	if e.Sizing.OOMKills < 1 || e.Sizing.MemoryLimitBytes != limit || e.Sizing.OOMCounter != hold || hold == 0 {
		t.Errorf("OOM job sizing %+v, want kills under %d in hold memory (counter %d)", e.Sizing, limit, hold)
	}
	code, body := s.get(t, "/api/v1/templates/78/rightsize")
	var rs rightsizeAnswer
	if code != 200 || json.Unmarshal(body, &rs) != nil {
		t.Fatalf("rightsize: %d %s", code, body)
	}
	t.Logf("agent rightsize: %s", body)
	if rs.Forks.PerForkBytes == nil {
		t.Fatalf("no per-fork estimate: %s", body)
	}
	if got := float64(*rs.Forks.PerForkBytes); got < sizingHoldMiB<<20 || got < 0.8*perFork || got > 1.2*perFork {
		t.Errorf("per fork %.1f MiB, want within 20%% of the runs' %.1f MiB and at least %d MiB", got/(1<<20), perFork/(1<<20), sizingHoldMiB)
	}
	if len(rs.OOM) != 1 || rs.OOM[0].JobID != fmt.Sprint(oom.id) || rs.OOM[0].Task != "hold memory" {
		t.Errorf("oom runs %+v, want job %d in hold memory", rs.OOM, oom.id)
	}
	if rs.Memory.RequestBytes <= limit {
		t.Errorf("memory request %d not above the OOM limit %d", rs.Memory.RequestBytes, limit)
	}
	if !strings.Contains(rs.PodSpecOverride, "image: quay.io/ansible/awx-ee:24.6.1") {
		t.Errorf("pod spec without the jobs' EE image:\n%s", rs.PodSpecOverride)
	}
}
