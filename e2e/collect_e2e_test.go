package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/testscale"
)

// needCgroups fails (skips only under -short) when this host cannot make
// cgroups for the collector, saying why.
func needCgroups(t *testing.T) {
	t.Helper()
	probe := "/sys/fs/cgroup/memory"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		probe = "/sys/fs/cgroup"
	}
	dir := filepath.Join(probe, fmt.Sprintf("peakline-probe-%d", os.Getpid()))
	err := os.Mkdir(dir, 0o755)
	if err == nil {
		_ = os.Remove(dir)
		return
	}
	msg := fmt.Sprintf("the collector needs to create cgroups and cannot here (%v); run as root on a host with cgroup v1 or v2 mounted read-write", err)
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s not found: apt-get install -y %s (.ci/run installs it)", name, pkg)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return p
}

// collectPlaybook burns two CPUs for burn seconds, allocates 300 MiB and
// forks 25 processes.
func collectPlaybook(burn string) string {
	return `- name: collector end-to-end
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: burn some cpu
      ansible.builtin.shell: "timeout ` + burn + ` sh -c 'while :; do :; done' & timeout ` + burn + ` sh -c 'while :; do :; done'; wait; true"
      changed_when: true
      notify: say goodbye
    - name: allocate memory
      ansible.builtin.command: python3 -c "b = b'x' * (300 << 20)"
    - name: fork a burst of processes
      ansible.builtin.shell: "for i in $(seq 1 25); do sleep 2 & done; wait"
  handlers:
    - name: say goodbye
      ansible.builtin.command: sleep 0.5
`
}

// The allocation task ends at its peak: python writes 300 MiB and exits at
// once, and the next task starts. With memory polled every 3s, the
// kernel's peak since the previous poll is mostly read at or after that
// start; the collector closes the task's interval at the start
// (collector/live/sampler.go), so the peak must be the allocation task's.
//
// The burn task keeps two CPUs busy: every task also spends about one
// CPU for a moment starting Ansible's module, so a burn of one CPU would
// not stand out reliably. Under emulation (PEAKLINE_TEST_TIME_SCALE) that
// moment lasts several seconds, so the burn and the poll interval are
// scaled with it.
//
// TestCollectAnsibleRunner runs a real playbook under peakline collect
// against a real peakline serve and checks, through the graph API, that
// every task carries its playbook_on_task_start counter and that the
// memory and CPU peaks land on the tasks that caused them.
func TestCollectAnsibleRunner(t *testing.T) {
	needCgroups(t)
	needTool(t, "ansible-runner", "python3-ansible-runner ansible")
	data := t.TempDir()
	s := serve(t, "--data", data)

	pdd := privateDataDir(t, collectPlaybook(burnSeconds(t)), localInventory, "")

	// Memory is polled less often than the allocation task lasts: only
	// the task boundary puts its peak on it.
	cmd := exec.Command(peaklineBin(t), "collect", "--server", s.URL, "--poll-interval", testscale.Scaled(t, 100*time.Millisecond).String(), "--memory-poll-interval", testscale.Scaled(t, 3*time.Second).String(),
		"--spool-dir", t.TempDir(), "--", "ansible-runner", "run", pdd, "-p", "site.yml", "--ident", "e2e")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("collect: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "collection done") {
		t.Fatalf("collect did not finish its collection:\n%s", out)
	}

	starts := readTaskStarts(t, filepath.Join(pdd, "artifacts", "e2e", "job_events"))
	if len(starts) != 4 {
		t.Fatalf("%d task starts in the artifacts, want 4 (3 tasks and a handler)", len(starts))
	}
	var g graphDoc
	code, body := s.get(t, "/api/v1/jobs/e2e/graph?points=1000")
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph: %d %s", code, body)
	}
	byName := map[string]int64{}
	for _, tk := range g.Tasks {
		byName[tk.Name] = tk.Counter
	}
	var tasks struct {
		Tasks []struct {
			Counter int64  `json:"counter"`
			Name    string `json:"name"`
		} `json:"tasks"`
	}
	code, body = s.get(t, "/api/v1/jobs/e2e/tasks")
	if code != 200 || json.Unmarshal(body, &tasks) != nil {
		t.Fatalf("tasks: %d %s", code, body)
	}
	served := map[int64]string{}
	for _, tk := range tasks.Tasks {
		served[tk.Counter] = tk.Name
	}
	for _, st := range starts {
		if _, ok := served[st.counter]; !ok {
			t.Errorf("task start counter %d (uuid %s) is not a served task: %v", st.counter, st.uuid, served)
		}
	}
	peak := map[string]*peakDoc{}
	for _, sr := range g.Series {
		peak[sr.Resource] = sr.Peak
	}
	for res, p := range peak {
		if p != nil {
			t.Logf("%s peak %.1f in task %d %q", res, p.V, p.Counter, served[p.Counter])
		}
	}
	if p := peak["memory"]; p == nil || p.V < 250e6 || served[p.Counter] != "allocate memory" {
		t.Errorf("memory peak %+v (task %q), want >= 250 MB in \"allocate memory\"", p, served[peakCounter(p)])
	}
	checkCPUTask(t, "", g, "burn some cpu", 0.75)
	if p := peak["pids"]; p == nil || p.V < 25 || served[p.Counter] != "fork a burst of processes" {
		t.Errorf("pids peak %+v (task %q), want >= 25 in \"fork a burst of processes\"", p, served[peakCounter(p)])
	}
}

type peakDoc struct {
	T       int64   `json:"t"`
	V       float64 `json:"v"`
	Counter int64   `json:"counter"`
}

func peakCounter(p *peakDoc) int64 {
	if p == nil {
		return -1
	}
	return p.Counter
}

// graphDoc is the graph payload as the end-to-end tests read it, decoded
// independently of the server's types.
type graphDoc struct {
	From      int64          `json:"from"`
	To        int64          `json:"to"`
	Points    int            `json:"points"`
	Series    []seriesDoc    `json:"series"`
	Tasks     []graphTaskDoc `json:"tasks"`
	EventsURL string         `json:"events_url"`
}

// seriesDoc is one resource's line of graphDoc.
type seriesDoc struct {
	Resource   string   `json:"resource"`
	RawSamples int      `json:"raw_samples"`
	T          []int64  `json:"t"`
	Peak       *peakDoc `json:"peak"`

	V []float64 `json:"v"`
}

// graphTaskDoc is one task of graphDoc.
type graphTaskDoc struct {
	Counter int64              `json:"counter"`
	Name    string             `json:"name"`
	Max     map[string]float64 `json:"max"`
	Mean    map[string]float64 `json:"mean"`
	Events  *struct {
		GTE int64 `json:"counter_gte"`
		LTE int64 `json:"counter_lte"`
	} `json:"events"`
}

// checkCPUTask checks that the task named burn is the job's heaviest on
// CPU: it has the highest mean CPU of all tasks and, with peakShare > 0,
// reaches that share of the job's CPU peak (0.75: a quarter below). The peak
// alone would be a coin toss on a host whose cores the burning task
// saturates: there another task's burst (a module's Python start-up beside
// 25 forks) can touch the same level for one 100 ms sample. who prefixes
// the messages.
func checkCPUTask(t *testing.T, who string, g graphDoc, burn string, peakShare float64) {
	t.Helper()
	var peak float64
	for _, sr := range g.Series {
		if sr.Resource == "cpu" && sr.Peak != nil {
			peak = sr.Peak.V
		}
	}
	var b *graphTaskDoc
	for i := range g.Tasks {
		if g.Tasks[i].Name == burn {
			b = &g.Tasks[i]
		}
	}
	switch {
	case peak == 0:
		t.Errorf("%sno cpu peak", who)
		return
	case b == nil:
		t.Errorf("%sno task %q in the graph", who, burn)
		return
	case b.Max["cpu"] < peakShare*peak:
		t.Errorf("%stask %q reached %.1f%% CPU, want at least %.2f × the job's peak %.1f%%", who, burn, b.Max["cpu"], peakShare, peak)
	}
	for _, tk := range g.Tasks {
		if tk.Counter != b.Counter && tk.Mean["cpu"] >= b.Mean["cpu"] {
			t.Errorf("%stask %q has mean CPU %.1f%%, not below %q's %.1f%%", who, tk.Name, tk.Mean["cpu"], burn, b.Mean["cpu"])
		}
	}
}

var samplesRE = regexp.MustCompile(`collection done.* samples=(\d+)`)

// TestCollectSurvivesServerRestart stops the server in the middle of a job
// and starts it again on the same port: every sample the collector took
// is stored, once.
func TestCollectSurvivesServerRestart(t *testing.T) {
	needCgroups(t)
	data := t.TempDir()
	addr := freeAddr(t)
	s := serve(t, "--data", data, "--listen", addr)

	cmd := exec.Command(peaklineBin(t), "collect", "--server", s.URL, "--job", "restart", "--poll-interval", "50ms",
		"--spool-dir", t.TempDir(), "--", "sh", "-c", "sleep 6; exit 7")
	outFile, err := os.CreateTemp(t.TempDir(), "collect")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outFile, outFile
	must(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond)
	s.stop(t)
	time.Sleep(2 * time.Second)
	s = serve(t, "--data", data, "--listen", addr)
	err = cmd.Wait()
	out, _ := os.ReadFile(outFile.Name())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("collect exit: %v, want the command's code 7\n%s", err, out)
	}
	m := samplesRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("collect did not report its samples:\n%s", out)
	}
	taken, _ := strconv.Atoi(string(m[1]))
	stored := s.rawSamples(t, "restart")
	t.Logf("collector took %d samples over a server restart; the server stored %d", taken, stored)
	if stored != taken || taken < 3*60 {
		t.Fatalf("collector took %d samples, the server stored %d (want equal, and >= 180 at 50ms over 6s)\n%s", taken, stored, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// localInventory is an Ansible inventory of localhost alone, run
// without ssh by this machine's Python 3.
const localInventory = "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"

// privateDataDir lays out an ansible-runner private data dir in a new
// temporary directory and returns it: project/site.yml holding playbook
// (none when empty: an ad hoc command's), inventory/hosts and, when
// extravars is not empty, env/extravars.
func privateDataDir(t *testing.T, playbook, inventory, extravars string) string {
	t.Helper()
	pdd := t.TempDir()
	write := func(rel, content string) {
		must(t, os.MkdirAll(filepath.Join(pdd, filepath.Dir(rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(pdd, rel), []byte(content), 0o644))
	}
	if playbook != "" {
		write("project/site.yml", playbook)
	}
	write("inventory/hosts", inventory)
	if extravars != "" {
		write("env/extravars", extravars)
	}
	return pdd
}

// TestCollectPolicyOff: with collection off for a template, collect runs
// the command untouched, says so, passes its exit code and stores nothing.
func TestCollectPolicyOff(t *testing.T) {
	data := t.TempDir()
	s := serve(t, "--data", data)
	req := func(method, path, body string) {
		t.Helper()
		r, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %v %v", method, path, resp, err)
		}
		resp.Body.Close()
	}
	req(http.MethodPut, "/api/v1/settings", `{"collection": "opt-in"}`)
	req(http.MethodPut, "/api/v1/templates/on", `{"collection": "on"}`)
	out, err := exec.Command(peaklineBin(t), "collect", "--server", s.URL, "--job", "skipped", "--template", "other",
		"--spool-dir", t.TempDir(), "--", "sh", "-c", "echo ran; exit 3").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("collect exit: %v, want 3\n%s", err, out)
	}
	if !strings.Contains(string(out), "ran") || !strings.Contains(string(out), "not collecting") {
		t.Fatalf("collect output does not show the command ran untouched:\n%s", out)
	}
	if code, _ := s.get(t, "/api/v1/jobs/skipped/graph"); code != 404 {
		t.Fatalf("a job with collection off was stored: %d", code)
	}
}
