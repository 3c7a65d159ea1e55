package live

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// eventJSON is a job event file as ansible-runner writes it.
func eventJSON(counter int, event, created, task, taskUUID string) string {
	return fmt.Sprintf(`{"uuid": "ev-%d", "counter": %d, "event": %q, "created": %q, "stdout": "", `+
		`"event_data": {"task": %q, "task_uuid": %q, "playbook": "p.yml"}}`, counter, counter, event, created, task, taskUUID)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ms(s string) int64 {
	t, err := time.Parse("2006-01-02T15:04:05.999999", s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func TestFollowerProgressiveEvents(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "job_events")
	f := newEventFollower(fixedDir(events), time.Now, testLogger(t))
	counterAt := func(when string) int64 {
		t.Helper()
		ev, _ := f.events.taskAt(ms(when))
		return ev.Counter
	}

	f.scan() // the directory does not exist yet
	if f.events.settled(ms("2026-11-30T03:39:35.0")) {
		t.Fatal("settled before any event")
	}
	if err := os.Mkdir(events, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(events, "1-ev-1.json"), eventJSON(1, "playbook_on_start", "2026-11-30T03:39:35.957529", "", ""))
	writeFile(t, filepath.Join(events, "2-ev-2.json"), eventJSON(2, "playbook_on_play_start", "2026-11-30T03:39:35.961253", "", ""))
	// The display callback's partial file and runner's temporary file are
	// not events.
	writeFile(t, filepath.Join(events, "ev-3-partial.json"), eventJSON(3, "playbook_on_task_start", "2026-11-30T03:39:35.979439", "burn", "t-4"))
	writeFile(t, filepath.Join(events, "3-ev-3.json.tmp"), eventJSON(3, "playbook_on_task_start", "2026-11-30T03:39:35.979439", "burn", "t-4"))
	f.scan()
	if got := counterAt("2026-11-30T03:39:36.5"); got != 0 {
		t.Fatalf("before the first task start: counter %d, want 0", got)
	}
	if !f.events.settled(ms("2026-11-30T03:39:35.961")) || f.events.settled(ms("2026-11-30T03:39:35.962")) {
		t.Fatal("settled must hold up to the newest event's time")
	}

	// Runner renames the temporary file: the task starts.
	if err := os.Rename(filepath.Join(events, "3-ev-3.json.tmp"), filepath.Join(events, "3-ev-3.json")); err != nil {
		t.Fatal(err)
	}
	// A writer that does not rename: the file is seen half written first.
	half := eventJSON(6, "playbook_on_task_start", "2026-11-30T03:39:39.460640", "allocate", "t-5")
	writeFile(t, filepath.Join(events, "6-ev-6.json"), half[:len(half)/2])
	writeFile(t, filepath.Join(events, "5-ev-5.json"), eventJSON(5, "runner_on_ok", "2026-11-30T03:39:39.447448", "burn", "t-4"))
	f.scan()
	if got := counterAt("2026-11-30T03:39:39.5"); got != 3 {
		t.Fatalf("with task 6 half written: counter %d, want 3", got)
	}
	writeFile(t, filepath.Join(events, "6-ev-6.json"), half)
	// A handler, and an event out of counter order on disk.
	writeFile(t, filepath.Join(events, "9-ev-9.json"), eventJSON(9, "playbook_on_handler_task_start", "2026-11-30T03:39:41.785678", "restart", "t-6"))
	writeFile(t, filepath.Join(events, "12-ev-12.json"), eventJSON(12, "playbook_on_stats", "2026-11-30T03:39:41.831333", "", ""))
	f.scan()

	f2 := func(when string, want int64) {
		t.Helper()
		if got := counterAt(when); got != want {
			t.Fatalf("counter at %s = %d, want %d", when, got, want)
		}
	}
	f2("2026-11-30T03:39:35.978", 0)
	f2("2026-11-30T03:39:35.979", 3) // created .979439 rounds to .979: at or before
	f2("2026-11-30T03:39:39.461", 6) // .460640 rounds to .461, as the importers do
	f2("2026-11-30T03:39:39.460", 3)
	f2("2026-11-30T03:39:41.786", 9)
	f2("2026-11-30T03:39:50.0", 9) // after the stats event: still the last task

	starts, last, ok := f.events.takeTasks()
	var counters []int64
	for _, s := range starts {
		counters = append(counters, s.Counter)
	}
	if !slices.Equal(counters, []int64{3, 6, 9}) || !ok || last.Counter != 12 {
		t.Fatalf("takeTasks = %v, last %d (%v); want [3 6 9], 12", counters, last.Counter, ok)
	}
	if ev, _ := f.events.taskAt(ms("2026-11-30T03:39:40.0")); ev.Task != "allocate" || ev.TaskUUID != "t-5" {
		t.Fatalf("task at 39:40 = %+v, want allocate/t-5", ev)
	}
	if starts, _, ok := f.events.takeTasks(); len(starts) != 0 || ok {
		t.Fatalf("second takeTasks = %v, %v; want nothing new", starts, ok)
	}
}

func TestFollowerGivesUpOnBadFile(t *testing.T) {
	dir := t.TempDir()
	f := newEventFollower(fixedDir(dir), time.Now, testLogger(t))
	writeFile(t, filepath.Join(dir, "1-x.json"), "{not json")
	for i := 0; i < followMaxTries; i++ {
		f.scan()
	}
	if !f.read["1-x.json"] {
		t.Fatalf("still retrying a bad file after %d scans", followMaxTries)
	}
}

func TestParseRunnerCommand(t *testing.T) {
	f := func(argv []string, want runnerArgs, wantOK bool) {
		t.Helper()
		got, ok := parseRunnerCommand(argv)
		if ok != wantOK || got != want {
			t.Fatalf("parseRunnerCommand(%q) = %+v, %v; want %+v, %v", argv, got, ok, want, wantOK)
		}
	}
	f([]string{"ansible-runner", "run", "/tmp/demo", "-p", "site.yml"}, runnerArgs{privateDataDir: "/tmp/demo"}, true)
	f([]string{"/usr/bin/ansible-runner", "run", "-p", "site.yml", "--ident", "42", "pdd"}, runnerArgs{privateDataDir: "pdd", ident: "42"}, true)
	f([]string{"ansible-runner", "run", "pdd", "-i", "7", "--artifact-dir=/var/art"}, runnerArgs{privateDataDir: "pdd", ident: "7", artifactDir: "/var/art"}, true)
	f([]string{"ansible-runner", "--debug", "run", "--process-isolation-ro-paths", "/a", "/b", "-j", "pdd"}, runnerArgs{privateDataDir: "pdd"}, true)
	f([]string{"python3", "-m", "ansible_runner", "run", "pdd", "--ident=9"}, runnerArgs{privateDataDir: "pdd", ident: "9"}, true)
	f([]string{"ansible-runner", "start", "pdd"}, runnerArgs{}, false)
	f([]string{"ansible-runner", "run"}, runnerArgs{}, false)
	f([]string{"ansible-playbook", "run", "site.yml"}, runnerArgs{}, false)
	f([]string{"python3", "-c", "run"}, runnerArgs{}, false)
	f(nil, runnerArgs{}, false)
}

func TestRunnerLocatorFindsNewIdent(t *testing.T) {
	pdd := t.TempDir()
	art := filepath.Join(pdd, "artifacts")
	if err := os.MkdirAll(filepath.Join(art, "old-job"), 0o755); err != nil {
		t.Fatal(err)
	}
	loc := newRunnerLocator(runnerArgs{privateDataDir: pdd})
	if d := loc.locate(); d != "" {
		t.Fatalf("locate before runner made its dir = %q, want \"\" (old-job was there before)", d)
	}
	if err := os.MkdirAll(filepath.Join(art, "5d1e7c1a", "job_events"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d := loc.locate(); d != filepath.Join(art, "5d1e7c1a", "job_events") || loc.identNow() != "5d1e7c1a" {
		t.Fatalf("locate = %q, ident %q", d, loc.identNow())
	}
	given := newRunnerLocator(runnerArgs{privateDataDir: pdd, ident: "42", artifactDir: "/x"})
	if d := given.locate(); d != "/x/42/job_events" {
		t.Fatalf("locate with --ident and --artifact-dir = %q", d)
	}
}
