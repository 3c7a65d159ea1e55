package ansible

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestForksFromArgs(t *testing.T) {
	f := func(want int, args ...string) {
		t.Helper()
		if got := ForksFromArgs(args); got != want {
			t.Errorf("ForksFromArgs(%q) = %d, want %d", args, got, want)
		}
	}
	f(0)
	f(0, "site.yml")
	f(10, "-f", "10", "site.yml")
	f(7, "-f7")
	f(3, "--forks", "3")
	f(4, "--forks=4")
	f(8, "--forks", "2", "-f", "8") // the last wins
	f(0, "-f")
	f(0, "-f", "zero")
	f(0, "-f", "-3")
	f(0, "--", "-f", "9")
	f(0, "--force-handlers") // a long option starting with -f is no -f
}

func TestForksFromEnv(t *testing.T) {
	if got := ForksFromEnv([]string{"PATH=/bin", "ANSIBLE_FORKS=12"}); got != 12 {
		t.Errorf("ANSIBLE_FORKS=12: %d", got)
	}
	if got := ForksFromEnv([]string{"ANSIBLE_FORKS=12", "ANSIBLE_FORKS=x"}); got != 0 {
		t.Errorf("a bad last ANSIBLE_FORKS: %d", got)
	}
	if got := ForksFromEnv(nil); got != 0 {
		t.Errorf("none: %d", got)
	}
}

func TestCmdlineForks(t *testing.T) {
	pdd := t.TempDir()
	if got := CmdlineForks(pdd); got != 0 {
		t.Errorf("no env/cmdline: %d", got)
	}
	if err := os.MkdirAll(filepath.Join(pdd, "env"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdd, "env", "cmdline"), []byte("-v --forks 15 --diff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CmdlineForks(pdd); got != 15 {
		t.Errorf("--forks 15: %d", got)
	}
}

// A task result killed by SIGKILL (rc -9) is an OOM kill of that task;
// the forks of the command runner ran win over the default; the hosts
// come from playbook_on_stats.
func TestReadSizing(t *testing.T) {
	pdd := copyPDD(t, realTree("runner-loops"))
	ev := filepath.Join(pdd, "artifacts", "loops", "job_events", "12-cd229582-bec7-43aa-8161-3c12da9c0457.json")
	data, err := os.ReadFile(ev)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["event_data"].(map[string]any)["res"].(map[string]any)["rc"] = -9
	out, _ := json.Marshal(doc)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(ev, out, 0o644))
	must(os.WriteFile(filepath.Join(pdd, "artifacts", "loops", "command"),
		[]byte(`{"command": ["ansible-playbook", "-i", "/tmp/gen/pdd/inventory", "--forks", "7", "loops.yml"], "cwd": "/tmp/gen/pdd/project", "env": {}}`), 0o644))
	jobs, err := Read(pdd, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := jobs[0].Info
	var failCounter int64
	for _, tk := range jobs[0].Tasks {
		if tk.Name == "fail but ignore" {
			failCounter = tk.Counter
		}
	}
	if info.OOMKills != 1 || info.OOMCounter != failCounter || failCounter == 0 || info.Forks != 7 || info.Hosts != 1 {
		t.Errorf("info %+v, want 1 OOM kill in fail but ignore (counter %d), 7 forks, 1 host", info, failCounter)
	}
}
