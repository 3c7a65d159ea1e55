package live

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIsPlaybookCommand(t *testing.T) {
	f := func(want bool, argv ...string) {
		t.Helper()
		if got := isPlaybookCommand(argv); got != want {
			t.Errorf("isPlaybookCommand(%q) = %v, want %v", argv, got, want)
		}
	}
	f(true, "ansible-playbook", "-i", "inventory", "site.yml")
	f(true, "/usr/bin/ansible-playbook", "site.yml")
	f(true, "python3", "-m", "ansible.cli.playbook", "site.yml")
	f(false, "python3", "-m", "ansible_runner", "run", "dir")
	f(false, "ansible-runner", "run", "dir")
	f(false, "ansible", "all", "-m", "ping")
	f(false, "sh", "-c", "ansible-playbook site.yml")
	f(false)
}

func TestSafeIdent(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := safeIdent(in); got != want {
			t.Errorf("safeIdent(%q) = %q, want %q", in, got, want)
		}
	}
	f("web-20261202T004912Z-17", "web-20261202T004912Z-17")
	f("a/b", "a_b")
	f("../x", "_x")
	f("..", "job")
	f("", "job")
}

// TestCallbackEnv checks that the plugin is added to what Ansible would
// have used: an environment variable replaces the ansible.cfg key of its
// setting, so the user's value must be carried over, from wherever it was.
func TestCallbackEnv(t *testing.T) {
	home := t.TempDir()
	work := t.TempDir()
	cfgDir := t.TempDir()
	writeFile(t, filepath.Join(cfgDir, "ansible.cfg"), `# a comment
[ssh_connection]
callbacks_enabled = not_this_section
[defaults]
Callback_Plugins = cb:~/more:$EXTRA/cb ; inline comment
callbacks_enabled = profile_tasks,
    timer
`)
	writeFile(t, filepath.Join(home, ".ansible.cfg"), "[defaults]\ncallback_whitelist: junit\n")
	const plugin = "/tmp/p/plugins"
	f := func(env map[string]string, system string, want ...string) {
		t.Helper()
		env["HOME"] = home
		got := callbackEnv(env, plugin, readAnsibleCfg(env, work, system))
		if !slices.Equal(got, want) {
			t.Errorf("callbackEnv(%v)\n got %q\nwant %q", env, got, want)
		}
	}
	// ~/.ansible.cfg, with the old key name.
	f(map[string]string{}, "/nonexistent",
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":"+home+"/.ansible/plugins/callback:/usr/share/ansible/plugins/callback",
		"ANSIBLE_CALLBACKS_ENABLED=junit,peakline_events")
	// ANSIBLE_CONFIG naming a directory; paths relative to it, ~ and $VARS.
	f(map[string]string{"ANSIBLE_CONFIG": cfgDir, "EXTRA": "/opt"}, "/nonexistent",
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":"+cfgDir+"/cb:"+home+"/more:/opt/cb",
		"ANSIBLE_CALLBACKS_ENABLED=profile_tasks,timer,peakline_events")
	// The environment wins over the file, as in Ansible.
	f(map[string]string{"ANSIBLE_CONFIG": cfgDir, "ANSIBLE_CALLBACK_PLUGINS": "/a:/b", "ANSIBLE_CALLBACKS_ENABLED": " x , y "}, "/nonexistent",
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":/a:/b",
		"ANSIBLE_CALLBACKS_ENABLED=x,y,peakline_events")
	// The old variable is set only when the user sets it.
	f(map[string]string{"ANSIBLE_CALLBACK_WHITELIST": "junit"}, "/nonexistent",
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":"+home+"/.ansible/plugins/callback:/usr/share/ansible/plugins/callback",
		"ANSIBLE_CALLBACKS_ENABLED=junit,peakline_events",
		"ANSIBLE_CALLBACK_WHITELIST=junit,peakline_events")
	// ./ansible.cfg comes before ~/.ansible.cfg; ANSIBLE_HOME moves the default.
	writeFile(t, filepath.Join(work, "ansible.cfg"), "[defaults]\nforks = 5\n")
	f(map[string]string{"ANSIBLE_HOME": "/srv/ans"}, "/nonexistent",
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":/srv/ans/plugins/callback:/usr/share/ansible/plugins/callback",
		"ANSIBLE_CALLBACKS_ENABLED=peakline_events")
	// The system file is read last.
	if err := os.Remove(filepath.Join(work, "ansible.cfg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(home, ".ansible.cfg")); err != nil {
		t.Fatal(err)
	}
	f(map[string]string{}, filepath.Join(cfgDir, "ansible.cfg"),
		"ANSIBLE_CALLBACK_PLUGINS="+plugin+":"+cfgDir+"/cb:"+home+"/more:/cb",
		"ANSIBLE_CALLBACKS_ENABLED=profile_tasks,timer,peakline_events")
}

const playbookSite = `- name: playbook under collect
  hosts: all
  gather_facts: false
  tasks:
    - name: skipped task
      ansible.builtin.debug:
        msg: never
      when: false
    - name: burn some cpu
      ansible.builtin.command:
        argv: [python3, -c, "import time\nwhile time.process_time() < 2: pass"]
    - name: allocate memory
      ansible.builtin.command:
        argv: [python3, -c, "b = b'x' * (260 << 20)"]
      changed_when: true
      notify: say goodbye
    - name: loop over items
      ansible.builtin.command: "echo {{ item }}"
      loop: [one, two, three]
    - name: fail but go on
      ansible.builtin.command:
        argv: [python3, -c, "import sys; b = b'x' * (120 << 20); sys.exit(3)"]
      ignore_errors: true
    - name: fork a few
      ansible.builtin.shell: for i in $(seq 24); do sleep 1 & done; wait
  handlers:
    - name: say goodbye
      ansible.builtin.command: sleep 0.5
`

// requireAnsiblePlaybook skips (or fails where runnerRequired) without
// ansible-playbook.
func requireAnsiblePlaybook(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		msg := "ansible-playbook is not installed, so a real playbook under the collector did not run (apt-get install ansible)"
		if runnerRequired() {
			t.Fatal(msg + "; CI=true or PEAKLINE_REQUIRE_RUNNER=1 says this environment must have it")
		}
		t.Skip(msg + "; set PEAKLINE_REQUIRE_RUNNER=1 to make this a failure")
	}
}

// TestCollectAnsiblePlaybook runs a real `ansible-playbook -i inventory
// site.yml` under Collect: Peakline's callback plugin must write the job
// events, every task (the handler, the loop, the failed-but-ignored and
// the skipped one too) must reach the server with its counter and name in
// playbook order, and each peak must land in the task that made it. The
// user's stdout callback stays: the play recap is still printed.
//
// A task of milliseconds (the skipped one) comes first: when two task
// starts are seen in one scan of job_events, the sampler closes the open
// interval at the newer one, so a peak at the end of the task before a
// very short one would be the short one's.
func TestCollectAnsiblePlaybook(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ansible-playbook for about 10s")
	}
	requireAnsiblePlaybook(t)
	requireCgroups(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "site.yml"), playbookSite)
	writeFile(t, filepath.Join(dir, "inventory"), "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
	t.Chdir(dir)
	srv := newIngestServer(t)
	var stdout, notices bytes.Buffer
	cfg := LiveConfig{
		Server:         srv.url(),
		JobID:          "site-run",
		SpoolDir:       t.TempDir(),
		Command:        []string{"ansible-playbook", "-i", "inventory", "site.yml"},
		MemoryInterval: 3 * time.Second,
		Stdout:         &stdout,
		Stderr:         t.Output(),
		Notices:        &notices,
		Logger:         testLogger(t),
	}
	tune := testTuning()
	tune.settle, tune.eventsEvery = defaultLiveTuning().settle, defaultLiveTuning().eventsEvery
	code, err := collectLive(context.Background(), cfg, tune)
	t.Logf("ansible-playbook output:\n%s", stdout.String())
	if err != nil || code != 0 {
		t.Fatalf("Collect = %d, %v", code, err)
	}
	if !strings.Contains(stdout.String(), "PLAY RECAP") || !strings.Contains(stdout.String(), "TASK [burn some cpu]") {
		t.Errorf("the default stdout callback did not print the play")
	}
	if want := "peakline collect: job page " + srv.url() + "/jobs/site-run\n"; notices.String() != want {
		t.Errorf("notices %q, want only %q", notices.String(), want)
	}

	srv.mu.Lock()
	tasks, last, playbook := srv.tasks, srv.last, srv.playbook
	srv.mu.Unlock()
	if playbook != "site.yml" {
		t.Errorf("playbook sent %q, want site.yml", playbook)
	}
	counters := make([]int64, 0, len(tasks))
	for c := range tasks {
		counters = append(counters, c)
	}
	slices.Sort(counters)
	var names []string
	for _, c := range counters {
		names = append(names, tasks[c])
	}
	wantNames := []string{"skipped task", "burn some cpu", "allocate memory", "loop over items", "fail but go on", "fork a few", "say goodbye"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("tasks in counter order %q (counters %v), want %q", names, counters, wantNames)
	}
	// Each task start is followed by at least runner_on_start and a
	// result; the stats event is last.
	for i := 1; i < len(counters); i++ {
		if counters[i]-counters[i-1] < 3 {
			t.Errorf("task %q at counter %d follows %q at %d: want its start and result events between", names[i], counters[i], names[i-1], counters[i-1])
		}
	}
	if last <= counters[len(counters)-1]+1 {
		t.Errorf("last event %d, want the stats event after the handler's results (start %d)", last, counters[len(counters)-1])
	}
	byName := map[string]int64{}
	for c, name := range tasks {
		byName[name] = c
	}
	samples := srv.got()
	peaks, taskMax, _ := taskPeaks(t, samples, "site-run", tasks)
	for _, c := range append([]int64{0}, counters...) {
		m := taskMax[c]
		t.Logf("counter %2d %-16q: max cpu %6.1f%%, memory %6.1f MiB, pids %2.0f", c, tasks[c], m["cpu"], m["memory"]/(1<<20), m["pids"])
	}
	if m := taskMax[byName["fail but go on"]]["memory"]; m < 115<<20 || m >= 250<<20 {
		t.Errorf("\"fail but go on\" peaks at %.1f MiB, want its own 120 MiB allocation", m/(1<<20))
	}
	checkPerfPeaks(t, samples, byName, tasks, peaks, taskMax)
	// The plugin's directory is gone with the job.
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "peakline-collect-*", "artifacts", "site-run")); len(left) > 0 {
		t.Errorf("callback directory left behind: %v", left)
	}
}

// fakePlaybook writes an executable named ansible-playbook that records
// the callback environment it was given into out and writes no event.
func fakePlaybook(t *testing.T, out string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ansible-playbook")
	script := "#!/bin/sh\nprintf '%s\\n%s\\n%s\\n' \"$ANSIBLE_CALLBACKS_ENABLED\" \"$ANSIBLE_CALLBACK_PLUGINS\" \"$" + EnvJobEventsDir + "\" > " + out + "\nsleep 0.3\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCollectWarnsWithoutEvents: an ansible-playbook that writes no event
// got the plugin's environment, and collect says once at the end that no
// task is attributed; a command that is neither ansible-playbook nor
// ansible-runner gets no plugin, and the warning at once.
func TestCollectWarnsWithoutEvents(t *testing.T) {
	requireCgroups(t)
	srv := newIngestServer(t)
	t.Setenv("ANSIBLE_CALLBACKS_ENABLED", "mine")
	collect := func(job string, command ...string) []string {
		t.Helper()
		var notices bytes.Buffer
		cfg := LiveConfig{Server: srv.url(), JobID: job, SpoolDir: t.TempDir(), Command: command, Notices: &notices, Logger: testLogger(t)}
		code, err := collectLive(context.Background(), cfg, testTuning())
		if err != nil || code != 0 {
			t.Fatalf("Collect = %d, %v", code, err)
		}
		lines := strings.Split(strings.TrimSpace(notices.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("notices %q, want the job page and one warning", notices.String())
		}
		return lines
	}

	out := filepath.Join(t.TempDir(), "env")
	lines := collect("no events/here", fakePlaybook(t, out), "-i", "inventory", "site.yml")
	if want := "peakline collect: job page " + srv.url() + "/jobs/no%20events%2Fhere"; lines[0] != want {
		t.Errorf("first notice %q, want %q", lines[0], want)
	}
	for _, part := range []string{"WARNING: no job events: tasks are not attributed", "ansible-playbook wrote none through Peakline's callback plugin", "--events DIR"} {
		if !strings.Contains(lines[1], part) {
			t.Errorf("warning %q does not say %q", lines[1], part)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(env) != 3 || env[0] != "mine,peakline_events" || !strings.HasSuffix(env[2], "/artifacts/no events_here/job_events") ||
		!strings.HasPrefix(env[1], filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(env[2]))), "plugins")+":") {
		t.Errorf("the command's callback environment: %q", env)
	}
	if _, err := os.Stat(env[2]); err == nil {
		t.Errorf("the callback directory %s outlived the job", env[2])
	}

	out = filepath.Join(t.TempDir(), "plain")
	lines = collect("plain", "sh", "-c", `echo "$ANSIBLE_CALLBACKS_ENABLED" > "$0"`, out)
	if !strings.Contains(lines[1], "WARNING: no job events: tasks are not attributed; the command is neither ansible-playbook nor ansible-runner") {
		t.Errorf("warning %q", lines[1])
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "mine\n" {
		t.Errorf("a plain command ran with ANSIBLE_CALLBACKS_ENABLED %q (%v), want it untouched", b, err)
	}
	if len(srv.got()) == 0 {
		t.Errorf("no samples sent")
	}
	for _, s := range srv.got() {
		if s.counter != 0 {
			t.Fatalf("sample with counter %d, want 0 without events", s.counter)
		}
	}
}

// TestCollectWarnsWhenPluginCannotBeEnabled: with no writable temporary
// directory the plugin cannot be written; the command runs all the same
// and collect says once, at start, that no task is attributed.
func TestCollectWarnsWhenPluginCannotBeEnabled(t *testing.T) {
	requireCgroups(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("ANSIBLE_CALLBACKS_ENABLED", "mine")
	srv := newIngestServer(t)
	out := filepath.Join(t.TempDir(), "ran")
	var notices bytes.Buffer
	cfg := LiveConfig{
		Server: srv.url(), JobID: "no-plugin", SpoolDir: t.TempDir(),
		Command: []string{fakePlaybook(t, out), "site.yml"},
		Notices: &notices, Logger: testLogger(t),
	}
	code, err := collectLive(context.Background(), cfg, testTuning())
	if err != nil || code != 0 {
		t.Fatalf("Collect = %d, %v", code, err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "mine\n") {
		t.Errorf("the command ran with ANSIBLE_CALLBACKS_ENABLED %q (%v), want it untouched", b, err)
	}
	if n := strings.Count(notices.String(), "WARNING: no job events: tasks are not attributed; Peakline's Ansible callback plugin cannot be enabled"); n != 1 {
		t.Errorf("notices %q: want the warning once", notices.String())
	}
}
