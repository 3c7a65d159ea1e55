package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/testscale"
)

// playbookE2E is a playbook whose tasks each leave a mark of their own:
// a skipped task (milliseconds, first: see
// collector/live.TestCollectAnsiblePlaybook), 4 s of CPU time burnt by two
// processes (CPU time, not wall time: on a busy machine the task takes
// longer but burns as much), 300 MiB allocated (notifying the handler), a
// loop, a task that fails with its failure ignored, 25 forks, and the
// handler.
func playbookE2E() string {
	return `- name: playbook end-to-end
  hosts: all
  gather_facts: false
  tasks:
    - name: skipped task
      ansible.builtin.debug:
        msg: never
      when: false
    - name: burn some cpu
      ansible.builtin.command:
        argv: [python3, -c, "import os, time\nchild = os.fork()\nwhile time.process_time() < 2: pass\nif child: os.wait()"]
    - name: allocate memory
      ansible.builtin.command: python3 -c "b = b'x' * (300 << 20)"
      changed_when: true
      notify: say goodbye
    - name: loop over items
      ansible.builtin.command: "echo {{ item }}"
      loop: [one, two, three]
    - name: fail but go on
      ansible.builtin.command: "false"
      ignore_errors: true
    - name: fork a burst of processes
      ansible.builtin.shell: "for i in $(seq 1 25); do sleep 2 & done; wait"
  handlers:
    - name: say goodbye
      ansible.builtin.command: sleep 0.5
`
}

var jobPageRE = regexp.MustCompile(`(?m)^peakline collect: job page (\S+)$`)

// TestCollectAnsiblePlaybook runs `peakline collect -- ansible-playbook -i
// inventory site.yml` on a real playbook against a real serve: collect
// prints the job page URL, the job stores every task with its counter and
// name in playbook order, each peak lands in its task, the play's own
// output is untouched, and the template history holds the playbook's
// tasks but not the samples before the first one.
func TestCollectAnsiblePlaybook(t *testing.T) {
	needCgroups(t)
	needTool(t, "ansible-playbook", "ansible")
	s := serve(t, "--data", t.TempDir())
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "site.yml"), []byte(playbookE2E()), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "inventory"), []byte(localInventory), 0o644))

	cmd := exec.Command(peaklineBin(t), "collect", "--server", s.URL, "--template", "pb", "--template-name", "playbook e2e",
		"--poll-interval", testscale.Scaled(t, 100*time.Millisecond).String(), "--memory-poll-interval", testscale.Scaled(t, 3*time.Second).String(),
		"--spool-dir", t.TempDir(), "--", "ansible-playbook", "-i", "inventory", "site.yml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("collect: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PLAY RECAP") || !strings.Contains(string(out), "RUNNING HANDLER [say goodbye]") {
		t.Errorf("ansible-playbook's own output is not all there:\n%s", out)
	}
	if strings.Contains(string(out), "no job events") {
		t.Errorf("collect warned about job events although the playbook wrote them:\n%s", out)
	}
	pages := jobPageRE.FindAllStringSubmatch(string(out), -1)
	if len(pages) != 1 {
		t.Fatalf("collect printed the job page %d times, want once:\n%s", len(pages), out)
	}
	page, err := url.Parse(pages[0][1])
	if err != nil || !strings.HasPrefix(pages[0][1], s.URL+"/jobs/") {
		t.Fatalf("job page %q is not a job page of %s", pages[0][1], s.URL)
	}
	job := strings.TrimPrefix(page.Path, "/jobs/")
	if code, body := s.get(t, page.Path); code != 200 || !strings.Contains(string(body), "<") {
		t.Errorf("GET the printed job page: %d", code)
	}

	var tasks struct {
		Tasks []struct {
			Counter int64  `json:"counter"`
			Name    string `json:"name"`
		} `json:"tasks"`
	}
	code, body := s.get(t, "/api/v1/jobs/"+url.PathEscape(job)+"/tasks")
	if code != 200 || json.Unmarshal(body, &tasks) != nil {
		t.Fatalf("tasks of job %q: %d %s", job, code, body)
	}
	var names []string
	var prev int64
	served := map[int64]string{}
	for _, tk := range tasks.Tasks {
		served[tk.Counter] = tk.Name
		if tk.Counter == 0 {
			if tk.Name != "" {
				t.Errorf("the samples before the first task are named %q", tk.Name)
			}
			continue
		}
		if tk.Counter <= prev {
			t.Errorf("task %q at counter %d after counter %d", tk.Name, tk.Counter, prev)
		}
		prev = tk.Counter
		names = append(names, tk.Name)
	}
	want := []string{"skipped task", "burn some cpu", "allocate memory", "loop over items", "fail but go on", "fork a burst of processes", "say goodbye"}
	if !slices.Equal(names, want) {
		t.Fatalf("tasks %q (%s), want %q", names, body, want)
	}

	var g graphDoc
	code, body = s.get(t, "/api/v1/jobs/"+url.PathEscape(job)+"/graph?points=1000")
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph: %d %s", code, body)
	}
	peak := map[string]*peakDoc{}
	for _, sr := range g.Series {
		peak[sr.Resource] = sr.Peak
		if sr.Peak != nil {
			t.Logf("%s peak %.1f in task %d %q", sr.Resource, sr.Peak.V, sr.Peak.Counter, served[sr.Peak.Counter])
		}
	}
	if p := peak["memory"]; p == nil || p.V < 250e6 || served[p.Counter] != "allocate memory" {
		t.Errorf("memory peak %+v (task %q), want >= 250 MB in \"allocate memory\"", p, served[peakCounter(p)])
	}
	if p := peak["pids"]; p == nil || p.V < 25 || served[p.Counter] != "fork a burst of processes" {
		t.Errorf("pids peak %+v (task %q), want >= 25 in \"fork a burst of processes\"", p, served[peakCounter(p)])
	}

	var h struct {
		Tasks []struct {
			Key  string `json:"key"`
			Name string `json:"name"`
			Runs []struct {
				CPUSeconds *float64 `json:"cpu_seconds"`
			} `json:"runs"`
		} `json:"tasks"`
	}
	code, body = s.get(t, "/api/v1/templates/pb/history")
	if code != 200 || json.Unmarshal(body, &h) != nil {
		t.Fatalf("history: %d %s", code, body)
	}
	var histNames []string
	cpu := map[string]float64{}
	for _, tk := range h.Tasks {
		histNames = append(histNames, tk.Name)
		if len(tk.Runs) == 1 && tk.Runs[0].CPUSeconds != nil {
			cpu[tk.Name] = *tk.Runs[0].CPUSeconds
		}
	}
	t.Logf("CPU seconds per task: %v", cpu)
	// A sample stands for the interval before it, so up to one interval
	// at each end of the task lands in its neighbours.
	if burnt := cpu["burn some cpu"]; burnt < 3.5 {
		t.Errorf("\"burn some cpu\" used %.2f CPU seconds, want ≥ 3.5 of its 4", burnt)
	}
	for name, c := range cpu {
		if name != "burn some cpu" && c >= cpu["burn some cpu"] {
			t.Errorf("task %q used %.2f CPU seconds, not less than \"burn some cpu\"", name, c)
		}
	}
	if !slices.Equal(histNames, want) {
		t.Errorf("template history tasks %q, want the playbook's %q and no row for the samples before the first task", histNames, want)
	}
}

// TestCollectWarnsWithoutJobEvents runs a command that starts no
// playbook: collect prints the job page, then says once that tasks are
// not attributed and what to do.
func TestCollectWarnsWithoutJobEvents(t *testing.T) {
	needCgroups(t)
	s := serve(t, "--data", t.TempDir())
	out, err := run(t, "collect", "--server", s.URL, "--job", "plain", "--spool-dir", t.TempDir(), "--", "sleep", "0.3")
	if err != nil {
		t.Fatalf("collect: %v\n%s", err, out)
	}
	if pages := jobPageRE.FindAllStringSubmatch(out, -1); len(pages) != 1 || pages[0][1] != s.URL+"/jobs/plain" {
		t.Errorf("job page lines %q, want one for %s/jobs/plain:\n%s", pages, s.URL, out)
	}
	warn := regexp.MustCompile(`(?m)^peakline collect: WARNING: no job events: tasks are not attributed; the command is neither ansible-playbook nor ansible-runner; run ansible-playbook or ansible-runner under collect, or pass --events DIR`)
	if n := len(warn.FindAllString(out, -1)); n != 1 {
		t.Errorf("the no-events warning appears %d times, want once:\n%s", n, out)
	}
}
