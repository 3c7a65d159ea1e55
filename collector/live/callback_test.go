package live

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
)

// runWithCallback runs ansible-playbook on playbook with the environment
// setupCallback makes, in a directory of its own, and returns the
// callback's events directory and the command's stdout and stderr.
func runWithCallback(t *testing.T, cb *callbackSetup, playbook string, extraEnv ...string) (stdout, stderr string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs ansible-playbook for a few seconds")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "site.yml"), playbook)
	writeFile(t, filepath.Join(dir, "inventory"), "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
	cmd := exec.Command("ansible-playbook", "-i", "inventory", "site.yml")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), cb.env...), extraEnv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("ansible-playbook: %v\n%s\n%s", err, o.String(), e.String())
	}
	return o.String(), e.String()
}

func newCallback(t *testing.T) *callbackSetup {
	t.Helper()
	wd, _ := os.Getwd()
	cb, err := setupCallback("cbtest", os.Environ(), wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.remove() })
	return cb
}

// rawEvents reads every event file of dir as JSON, by counter.
func rawEvents(t *testing.T, dir string) map[int64]map[string]any {
	t.Helper()
	paths, err := ansible.ListEventFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[string]any{}
	r := ansible.NewEventReader()
	for _, p := range paths {
		ev, err := r.ReadFile(p)
		if err != nil {
			t.Fatalf("the event reader refuses %s: %v", p, err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[ev.Counter]; dup {
			t.Fatalf("counter %d twice", ev.Counter)
		}
		if filepath.Base(p) != jsonName(m) {
			t.Errorf("file %s holds counter %v uuid %v", filepath.Base(p), m["counter"], m["uuid"])
		}
		out[ev.Counter] = m
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	return out
}

func jsonName(m map[string]any) string {
	c, _ := m["counter"].(float64)
	u, _ := m["uuid"].(string)
	return strings.Join([]string{jsonInt(c), u}, "-") + ".json"
}

func jsonInt(f float64) string { b, _ := json.Marshal(int64(f)); return string(b) }

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCallbackWritesRunnerEvents checks the plugin's events against a real
// ansible-runner tree (testdata/ansible/runner-basic): every top-level and
// event_data field runner writes for an event type, the plugin writes too.
func TestCallbackWritesRunnerEvents(t *testing.T) {
	requireAnsiblePlaybook(t)
	cb := newCallback(t)
	stdout, stderr := runWithCallback(t, cb, playbookSite)
	if !strings.Contains(stdout, "PLAY RECAP") || strings.Contains(stderr, "peakline") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	got := rawEvents(t, cb.eventsDir)
	byType := map[string]map[string]any{}
	for c := int64(1); c <= int64(len(got)); c++ {
		m, ok := got[c]
		if !ok {
			t.Fatalf("counters are not 1..%d: %d missing", len(got), c)
		}
		if m["runner_ident"] != "cbtest" {
			t.Errorf("runner_ident %v, want the ident cbtest", m["runner_ident"])
		}
		if byType[m["event"].(string)] == nil {
			byType[m["event"].(string)] = m
		}
	}
	if got[1]["event"] != "playbook_on_start" || got[int64(len(got))]["event"] != "playbook_on_stats" {
		t.Errorf("first event %v, last %v", got[1]["event"], got[int64(len(got))]["event"])
	}
	runner := rawEvents(t, filepath.Join("..", "..", "testdata", "ansible", "runner-basic", "artifacts", "demo2", "job_events"))
	checked := 0
	for _, rm := range runner {
		ev := rm["event"].(string)
		m := byType[ev]
		if m == nil {
			t.Errorf("the plugin wrote no %s event", ev)
			continue
		}
		for _, k := range keys(rm) {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no field %q", ev, k)
			}
		}
		rd, _ := rm["event_data"].(map[string]any)
		d, _ := m["event_data"].(map[string]any)
		for _, k := range keys(rd) {
			if _, ok := d[k]; !ok {
				t.Errorf("%s: no event_data field %q", ev, k)
			}
		}
		checked++
	}
	if checked < 6 {
		t.Errorf("compared %d event types with runner's", checked)
	}
	for _, ev := range []string{"runner_item_on_ok", "runner_on_failed", "runner_on_skipped"} {
		if byType[ev] == nil {
			t.Errorf("no %s event", ev)
		}
	}
	failed := byType["runner_on_failed"]["event_data"].(map[string]any)
	if failed["ignore_errors"] != true || failed["task"] != "fail but go on" || failed["res"].(map[string]any)["rc"] != float64(3) {
		t.Errorf("runner_on_failed event_data: %v", failed)
	}
}

// TestCallbackOneSequence runs two playbooks into one events directory (as
// a playbook that starts ansible-playbook in a task does): their events
// make one sequence of counters, and a result over 1 MiB is stored
// without its res.
func TestCallbackOneSequence(t *testing.T) {
	requireAnsiblePlaybook(t)
	cb := newCallback(t)
	const pb = `- hosts: all
  gather_facts: false
  tasks:
    - name: print a lot
      ansible.builtin.command:
        argv: [python3, -c, "print('x' * (2 << 20))"]
`
	runWithCallback(t, cb, pb)
	first := len(rawEvents(t, cb.eventsDir))
	runWithCallback(t, cb, pb)
	got := rawEvents(t, cb.eventsDir)
	if len(got) != 2*first {
		t.Fatalf("%d events after two runs of %d", len(got), first)
	}
	starts := 0
	for c := int64(1); c <= int64(len(got)); c++ {
		m, ok := got[c]
		if !ok {
			t.Fatalf("counter %d missing of 1..%d", c, len(got))
		}
		switch m["event"] {
		case "playbook_on_start":
			starts++
			if want := int64(first*(starts-1) + 1); c != want {
				t.Errorf("playbook_on_start at counter %d, want %d", c, want)
			}
		case "runner_on_ok":
			res := m["event_data"].(map[string]any)["res"].(map[string]any)
			if _, ok := res["_peakline_omitted"]; !ok || len(res) != 1 {
				t.Errorf("runner_on_ok of a 2 MiB result holds res %.200v", res)
			}
		}
	}
	if starts != 2 {
		t.Errorf("%d playbook_on_start events, want 2", starts)
	}
}

// TestCallbackNeverBreaksTheRun points the plugin at a directory that
// does not exist: the playbook runs and succeeds, and the plugin says so
// once on stderr.
func TestCallbackNeverBreaksTheRun(t *testing.T) {
	requireAnsiblePlaybook(t)
	cb := newCallback(t)
	stdout, stderr := runWithCallback(t, cb, playbookSite, EnvJobEventsDir+"="+filepath.Join(t.TempDir(), "missing"))
	if !strings.Contains(stdout, "PLAY RECAP") || !strings.Contains(stdout, "RUNNING HANDLER [say goodbye]") {
		t.Errorf("the playbook did not run through:\n%s", stdout)
	}
	if n := strings.Count(stderr, "peakline: the job events callback failed"); n != 1 {
		t.Errorf("the plugin reported %d failures on stderr, want 1:\n%s", n, stderr)
	}
}
