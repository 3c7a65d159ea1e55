package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/live"
)

// fakeProc is a writable copy of the recorded receptor shape's /proc
// (testdata/v2-real/receptor), whose stat files carry the counters of
// treeCounters in place of the recorded ones: the processes, their
// parents, names, command lines and environments are the recording's, the
// CPU, memory and thread counts known numbers the tests can add up.
type fakeProc struct {
	shape
	dir string
}

// treeCounters are the stat counters newFakeProc gives each recorded
// process, by role.
var treeCounters = map[string]struct {
	state                                             byte
	utime, stime, cutime, cstime, threads, start, rss uint64
}{
	"receptor":    {'S', 7000, 900, 0, 0, 12, 500, 9000},
	"runner":      {'S', 80, 20, 0, 0, 1, 900, 12000},
	"podman":      {'S', 30, 10, 0, 0, 9, 920, 14000},
	"conmon103":   {'S', 2, 1, 0, 0, 1, 940, 300},
	"conmon104":   {'S', 2, 1, 0, 0, 1, 941, 300},
	"playbook103": {'S', 300, 100, 40, 10, 2, 1000, 20000},
	"fork103":     {'S', 50, 20, 0, 0, 1, 1100, 15000},
	"shell103":    {'S', 1, 1, 0, 0, 1, 1200, 200},
	"module103":   {'R', 120, 30, 0, 0, 4, 1300, 8000},
	"version103":  {'S', 10, 5, 2, 1, 1, 1400, 5000},
	"playbook104": {'S', 999, 111, 0, 0, 3, 1500, 30000},
	"byhand":      {'S', 5, 5, 0, 0, 1, 1600, 7000},
}

// Pids the tests add to the recorded ones: above the recording guest's
// pid_max (32768), so none is a recorded process.
const (
	gonePid = 99980 // listed with no stat: a process gone mid-read
	sshPid  = 99956
	pid105  = 99990 // job 105's ansible-playbook; 99991… its children
)

func newFakeProc(t *testing.T) *fakeProc {
	t.Helper()
	sh := loadShape(t, "receptor")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(sh.dir, "proc"))); err != nil {
		t.Fatal(err)
	}
	p := &fakeProc{shape: sh, dir: dir}
	if len(sh.roles) != len(treeCounters) {
		t.Fatalf("recorded roles %v; want those of treeCounters", sh.roles)
	}
	for role, c := range treeCounters {
		pid := p.pid(role)
		if pid >= 32768 {
			t.Fatalf("%s: recorded pid %d collides with the tests' own", role, pid)
		}
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		st, comm, ok := parseStat(b)
		if !ok {
			t.Fatalf("%s: recorded stat %q does not parse", role, b)
		}
		p.stat(pid, string(comm), c.state, st.ppid, c.utime, c.stime, c.cutime, c.cstime, c.threads, c.start, c.rss)
	}
	if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(gonePid)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(gonePid), "cmdline"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecordedTreeShape checks the parents the receptor recording holds,
// the ones the process-tree tests rely on.
func TestRecordedTreeShape(t *testing.T) {
	sh := loadShape(t, "receptor")
	parent := map[string]string{
		"receptor": "", "runner": "receptor", "podman": "runner",
		"conmon103": "init", "playbook103": "conmon103", "fork103": "playbook103", "shell103": "fork103", "module103": "shell103",
		"version103": "init", "conmon104": "init", "playbook104": "conmon104", "byhand": "init",
	}
	for role, want := range parent {
		b, err := os.ReadFile(filepath.Join(sh.dir, "proc", strconv.Itoa(sh.pid(role)), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		st, _, ok := parseStat(b)
		switch {
		case !ok:
			t.Errorf("%s: stat %q does not parse", role, b)
		case want == "init" && st.ppid != 1:
			t.Errorf("%s: parent %d; want init (1)", role, st.ppid)
		case want != "" && want != "init" && st.ppid != sh.pid(want):
			t.Errorf("%s: parent %d; want %s (%d)", role, st.ppid, want, sh.pid(want))
		}
	}
	// Unchanged, the recording's own counters: job 103's members are
	// the playbook, its fork, the shell and module, and the version.
	tr, err := NewTree(filepath.Join(sh.dir, "proc"), 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readTree(t, tr), sh.pids("playbook103", "fork103", "shell103", "module103", "version103"); !slices.Equal(got.members, want) || !got.populated || got.tasks != uint64(len(want)) {
		t.Fatalf("job 103 on the recording: %+v; want members %v, populated, one task each", got, want)
	}
}

// stat writes /proc/<pid>/stat in the kernel's format.
func (p *fakeProc) stat(pid int, comm string, state byte, ppid int, utime, stime, cutime, cstime, threads, start, rss uint64) {
	p.t.Helper()
	line := fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 1200 0 3 0 %d %d %d %d 20 0 %d 0 %d %d %d 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		pid, comm, state, ppid, ppid, ppid, utime, stime, cutime, cstime, threads, start, rss*4096*3, rss)
	if err := os.MkdirAll(filepath.Join(p.dir, fmt.Sprint(pid)), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, fmt.Sprint(pid), "stat"), []byte(line), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *fakeProc) exit(pids ...int) {
	p.t.Helper()
	for _, pid := range pids {
		if err := os.RemoveAll(filepath.Join(p.dir, fmt.Sprint(pid))); err != nil {
			p.t.Fatal(err)
		}
	}
}

type treeReading struct {
	cpu             time.Duration
	mem, memPeak    uint64
	tasks, taskPeak uint64
	populated       bool
	members         []int
}

// read makes one sampler tick (CPU, Memory, PIDs), then Populated.
func readTree(t *testing.T, tr *Tree) treeReading {
	t.Helper()
	var r treeReading
	var err error
	if r.cpu, err = tr.CPU(); err != nil {
		t.Fatal(err)
	}
	if r.mem, r.memPeak, err = tr.Memory(); err != nil {
		t.Fatal(err)
	}
	if r.tasks, r.taskPeak, err = tr.PIDs(); err != nil {
		t.Fatal(err)
	}
	if r.populated, err = tr.Populated(); err != nil {
		t.Fatal(err)
	}
	r.members = tr.Procs()
	return r
}

func checkReading(t *testing.T, step string, got, want treeReading) {
	t.Helper()
	if got.cpu != want.cpu || got.mem != want.mem || got.memPeak != want.memPeak || got.tasks != want.tasks ||
		got.taskPeak != want.taskPeak || got.populated != want.populated || !slices.Equal(got.members, want.members) {
		t.Fatalf("%s:\n got %+v\nwant %+v", step, got, want)
	}
}

func TestTree(t *testing.T) {
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	tick := 10 * time.Millisecond
	pb, fork, shell, mod, ver := p.pid("playbook103"), p.pid("fork103"), p.pid("shell103"), p.pid("module103"), p.pid("version103")

	// Roots the playbook, its fork (comm) and the version (python3
	// running ansible-playbook); the shell and module descend from the
	// fork. Not members: podman (JOB_ID, not trusted, not a
	// descendant), job 104's playbook, the one run by hand (no JOB_ID),
	// gonePid (no stat).
	// CPU ticks: playbook: 300+100+40+10, fork: 50+20, shell: 1+1,
	// module: 120+30, version: 10+5+2+1.
	mem := (20000 + 15000 + 200 + 8000 + 5000) * page
	checkReading(t, "start", readTree(t, tr), treeReading{
		cpu: 690 * tick, mem: mem, memPeak: mem, tasks: 2 + 1 + 1 + 4 + 1, taskPeak: 9,
		populated: true, members: sorted(pb, fork, shell, mod, ver),
	})

	// The module grows to its peak, seen by an extra CPU read (a second
	// pass), then exits and is reaped by the shell (cutime 150+30); the
	// version, whose parent is init, exits: its last 18 ticks are kept.
	// The playbook forks an ssh.
	p.stat(mod, "python3", 'R', shell, 150, 30, 0, 0, 6, 1300, 30000)
	if _, err := tr.CPU(); err != nil {
		t.Fatal(err)
	}
	p.exit(mod, ver)
	p.stat(shell, "sh) (x) y", 'S', fork, 1, 1, 180, 0, 1, 1200, 200)
	p.stat(sshPid, "ssh", 'S', pb, 3, 2, 0, 0, 1, 1500, 1000)
	peak := (20000 + 15000 + 200 + 30000 + 5000) * page
	checkReading(t, "module and version exit", readTree(t, tr), treeReading{
		cpu: (450 + 70 + 182 + 5 + 18) * tick, mem: (20000 + 15000 + 200 + 1000) * page, memPeak: peak,
		tasks: 2 + 1 + 1 + 1, taskPeak: 2 + 1 + 1 + 6 + 1, populated: true, members: sorted(pb, fork, shell, sshPid),
	})

	// The fork exits, reaped by the playbook (cutime +70); the shell is
	// reparented to init and stays a member. A kernel oddity lowers the
	// playbook's cutime again: the counter does not go back.
	p.exit(fork)
	p.stat(pb, "ansible-playboo", 'S', p.pid("conmon103"), 300, 100, 110, 10, 2, 1000, 20000)
	p.stat(shell, "sh) (x) y", 'S', 1, 1, 1, 180, 0, 1, 1200, 200)
	checkReading(t, "fork reaped", readTree(t, tr), treeReading{
		cpu: (520 + 182 + 5 + 18) * tick, mem: (20000 + 200 + 1000) * page, memPeak: (20000 + 200 + 1000) * page,
		tasks: 4, taskPeak: 4, populated: true, members: sorted(pb, shell, sshPid),
	})
	p.stat(pb, "ansible-playboo", 'S', p.pid("conmon103"), 300, 100, 0, 0, 2, 1000, 20000)
	got := readTree(t, tr)
	if got.cpu != 725*tick {
		t.Fatalf("CPU after a counter went down = %v; want it held at %v", got.cpu, 725*tick)
	}

	// A zombie alone does not populate the tree, but counts as a task.
	p.exit(pb, sshPid)
	p.stat(shell, "sh) (x) y", 'Z', 1, 1, 1, 180, 0, 1, 1200, 0)
	checkReading(t, "zombie left", readTree(t, tr), treeReading{
		cpu: 725 * tick, mem: 0, memPeak: 0, tasks: 1, taskPeak: 1, populated: false, members: []int{shell},
	})
	p.exit(shell)
	checkReading(t, "all gone", readTree(t, tr), treeReading{cpu: 725 * tick, populated: false, members: []int{}})
}

// TestTreePidReuse checks that a new process on a member's pid is no member.
func TestTreePidReuse(t *testing.T) {
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if r, want := readTree(t, tr), p.pids("playbook103", "fork103", "shell103", "module103", "version103"); !slices.Equal(r.members, want) {
		t.Fatalf("members = %v; want %v", r.members, want)
	}
	// The module exits; its pid goes to an unrelated process under init.
	p.stat(p.pid("module103"), "cron", 'S', 1, 0, 0, 0, 0, 1, 99999, 100)
	if r, want := readTree(t, tr), p.pids("playbook103", "fork103", "shell103", "version103"); !slices.Equal(r.members, want) {
		t.Fatalf("members after pid reuse = %v; want %v, the module gone", r.members, want)
	}
}

func TestTreeOneLookPerTick(t *testing.T) {
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 104, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	first := readTree(t, tr)
	if first.cpu != 1110*10*time.Millisecond || first.tasks != 3 {
		t.Fatalf("job 104: %+v", first)
	}
	// Within one tick the same look answers: a change shows at the
	// next tick's first read.
	p.stat(p.pid("playbook104"), "ansible-playboo", 'S', p.pid("conmon104"), 1000, 111, 0, 0, 3, 1500, 30000)
	if n, _, _ := tr.PIDs(); n != 3 {
		t.Fatal("PIDs changed")
	}
	if cpu, _ := tr.CPU(); cpu != 1111*10*time.Millisecond {
		t.Fatalf("CPU at the next tick = %v; want 11.11s", cpu)
	}
}

func TestNewTreeRejects(t *testing.T) {
	if _, err := NewTree("/proc", 0, DefaultRules()); err == nil {
		t.Fatal("NewTree accepted job id 0")
	}
	r := DefaultRules()
	r.JobIDEnv = ""
	if _, err := NewTree("/proc", 1, r); err == nil {
		t.Fatal("NewTree accepted rules without a job id key")
	}
}

// A Tree is what collector/live samples in place of a job's cgroup.
var _ live.Stats = (*Tree)(nil)

// TestTreeConcurrent reads a tree from two goroutines, as a sampler and
// the agent's end-of-job check do (run under -race).
func TestTreeConcurrent(t *testing.T) {
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			if p, err := tr.Populated(); !p || err != nil {
				t.Errorf("Populated() = %v, %v", p, err)
				return
			}
		}
	}()
	for i := 0; i < 50; i++ {
		if cpu, err := tr.CPU(); cpu != 690*10*time.Millisecond || err != nil {
			t.Fatalf("CPU() = %v, %v", cpu, err)
		}
	}
	<-done
}

// env writes /proc/<pid>/environ.
func (p *fakeProc) env(pid int, vars ...string) {
	p.t.Helper()
	b := []byte{}
	for _, v := range vars {
		b = append(append(b, v...), 0)
	}
	if err := os.WriteFile(filepath.Join(p.dir, fmt.Sprint(pid), "environ"), b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// treeStep changes the fake /proc, then makes one sampler tick and
// checks the CPU counter (in clock ticks) and the members.
type treeStep struct {
	name    string
	do      func(p *fakeProc)
	cpu     uint64
	members []int
}

func runTreeSteps(t *testing.T, steps []treeStep) {
	t.Helper()
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 105, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.do != nil {
			s.do(p)
		}
		r := readTree(t, tr)
		if r.cpu != time.Duration(s.cpu)*clockTick || !slices.Equal(r.members, s.members) {
			t.Fatalf("%s: CPU %v, members %v; want %v, %v", s.name, r.cpu, r.members, time.Duration(s.cpu)*clockTick, s.members)
		}
	}
}

// TestTreeCPU checks how members joining and leaving move the CPU
// counter, on job 105 (none of the fixture's processes): ansible-playbook
// pid105 under init, with children pid105+1, pid105+2, …
func TestTreeCPU(t *testing.T) {
	const job = "JOB_ID=105"
	root := func(p *fakeProc, own, reaped uint64) {
		p.stat(pid105, "ansible-playboo", 'S', 1, own, 0, reaped, 0, 1, 5000, 100)
		p.env(pid105, "PATH=/usr/bin", job)
	}
	t.Run("the first pass counts the history", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) { root(p, 4000, 1000) }, 5000, []int{pid105}},
			{"it runs", func(p *fakeProc) { root(p, 4010, 1000) }, 5010, []int{pid105}},
		})
	})
	t.Run("a root found late counts from its join", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			// A shell with the job's environment and 50 s behind
			// it, no trusted process yet: nothing to measure.
			{"untrusted", func(p *fakeProc) {
				p.stat(pid105, "sh", 'S', 1, 4000, 1000, 0, 0, 1, 5000, 100)
				p.env(pid105, job)
			}, 0, []int{}},
			// It execs ansible-playbook: it joins, its 50 s do not
			// land in this interval.
			{"exec", func(p *fakeProc) { root(p, 4000, 1000) }, 0, []int{pid105}},
			{"runs", func(p *fakeProc) { root(p, 4007, 1000) }, 7, []int{pid105}},
		})
	})
	t.Run("a process reparented into the tree counts from its join", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"apart", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(pid105+3, "python3", 'S', 1, 3000, 0, 0, 0, 1, 800, 10)
			}, 100, []int{pid105}},
			// pid105 is a subreaper and adopts pid105+3.
			{"adopted", func(p *fakeProc) { p.stat(pid105+3, "python3", 'S', pid105, 3000, 0, 0, 0, 1, 800, 10) }, 100, []int{pid105, pid105 + 3}},
			{"runs", func(p *fakeProc) { p.stat(pid105+3, "python3", 'S', pid105, 3004, 0, 0, 0, 1, 800, 10) }, 104, []int{pid105, pid105 + 3}},
		})
	})
	t.Run("a child born between passes counts whole", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"root", func(p *fakeProc) { root(p, 100, 0) }, 100, []int{pid105}},
			// pid105+1 was born, used 20 ticks and reaped a child of 10.
			// Another child of pid105 was born and reaped: 7.
			{"born", func(p *fakeProc) {
				root(p, 100, 7)
				p.stat(pid105+1, "sh", 'S', pid105, 20, 0, 10, 0, 1, 5100, 10)
			}, 137, []int{pid105, pid105 + 1}},
		})
	})
	t.Run("a chain that exits at once is counted once", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"chain", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(pid105+1, "sh", 'S', pid105, 5, 0, 0, 0, 1, 5100, 10)
				p.stat(pid105+2, "sh", 'R', pid105+1, 200, 0, 0, 0, 1, 5200, 10)
			}, 305, []int{pid105, pid105 + 1, pid105 + 2}},
			// pid105+2 burns 30 more and exits, reaped by pid105+1, which
			// uses 1 more and exits, reaped by pid105: pid105's cutime
			// holds 6 + 230.
			{"exit", func(p *fakeProc) {
				p.exit(pid105+1, pid105+2)
				root(p, 100, 236)
			}, 336, []int{pid105}},
		})
	})
	t.Run("a reaper read before it reaps", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"chain", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(pid105+1, "sh", 'S', pid105, 5, 0, 0, 0, 1, 5100, 10)
				p.stat(pid105+2, "sh", 'R', pid105+1, 200, 0, 0, 0, 1, 5200, 10)
			}, 305, []int{pid105, pid105 + 1, pid105 + 2}},
			// Both are gone, but pid105 was read just before it reaped.
			{"gone", func(p *fakeProc) { p.exit(pid105+1, pid105+2) }, 305, []int{pid105}},
			{"reaped", func(p *fakeProc) { root(p, 100, 236) }, 336, []int{pid105}},
			// The credit was used up: a later reaped child counts.
			{"later child", func(p *fakeProc) { root(p, 100, 243) }, 343, []int{pid105}},
		})
	})
	t.Run("a child nobody in the tree reaps", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(pid105+1, "sh", 'S', pid105, 10, 0, 0, 0, 1, 5100, 10)
				p.stat(pid105+2, "sh", 'S', pid105+1, 100, 0, 0, 0, 1, 5200, 10)
			}, 210, []int{pid105, pid105 + 1, pid105 + 2}},
			// pid105+1 exits first (pid105 reaps it: 10 + 1), pid105+2 is
			// reparented to init and stays a member.
			{"reaper left", func(p *fakeProc) {
				p.exit(pid105 + 1)
				root(p, 100, 11)
				p.stat(pid105+2, "sh", 'S', 1, 120, 0, 0, 0, 1, 5200, 10)
			}, 231, []int{pid105, pid105 + 2}},
			// init reaps pid105+2: its last 5 ticks are not seen.
			{"pid105+2 exits", func(p *fakeProc) { p.exit(pid105 + 2) }, 231, []int{pid105}},
			{"root runs", func(p *fakeProc) { root(p, 103, 11) }, 234, []int{pid105}},
		})
	})
	t.Run("a child reaped by init while its parent left too", func(t *testing.T) {
		// The residual error the Tree doc tells: pid105+1 exits, pid105+2 is
		// reparented to init and exits, all within one interval. pid105+2
		// is taken for reaped by pid105 through pid105+1, and what pid105 reaps
		// in that pass and the next is taken off, up to pid105+2's 100.
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(pid105+1, "sh", 'S', pid105, 10, 0, 0, 0, 1, 5100, 10)
				p.stat(pid105+2, "sh", 'S', pid105+1, 100, 0, 0, 0, 1, 5200, 10)
			}, 210, []int{pid105, pid105 + 1, pid105 + 2}},
			{"both gone", func(p *fakeProc) {
				p.exit(pid105+1, pid105+2)
				root(p, 100, 11)
			}, 210, []int{pid105}},
			{"next pass", func(p *fakeProc) { root(p, 100, 18) }, 210, []int{pid105}},
			{"credit dropped", func(p *fakeProc) { root(p, 100, 25) }, 217, []int{pid105}},
		})
	})
	t.Run("a process that execs into a trusted name late", func(t *testing.T) {
		p := newFakeProc(t)
		tr, err := NewTree(p.dir, 105, DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		p.stat(pid105, "sh", 'S', 1, 4000, 1000, 0, 0, 1, 5000, 100)
		p.env(pid105, job)
		// Its name stays the same long enough to be cached.
		for range stableAfter + 1 {
			if r := readTree(t, tr); r.cpu != 0 || len(r.members) != 0 {
				t.Fatalf("before the exec: %+v", r)
			}
		}
		root(p, 4000, 1000)
		passes := 0
		for ; passes < recheckEvery; passes++ {
			r := readTree(t, tr)
			if r.cpu != 0 {
				t.Fatalf("CPU %v after the exec; want 0: its past is no part of an interval", r.cpu)
			}
			if slices.Equal(r.members, []int{pid105}) {
				break
			}
		}
		if passes == recheckEvery {
			t.Fatalf("pid105 not a member %d passes after its exec", recheckEvery)
		}
		root(p, 4003, 1000)
		if r := readTree(t, tr); r.cpu != 3*clockTick {
			t.Fatalf("CPU %v; want 3 ticks", r.cpu)
		}
	})
}

// TestTreeByConmon finds a job's tree with no environment readable: the
// children of the conmon whose -n names the job are its roots (conmon
// itself is not measured); the version, known by its environment alone,
// is not.
func TestTreeByConmon(t *testing.T) {
	p := newFakeProc(t)
	envs, _ := filepath.Glob(filepath.Join(p.dir, "*", "environ"))
	for _, f := range envs {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readTree(t, tr).members, p.pids("playbook103", "fork103", "shell103", "module103"); !slices.Equal(got, want) {
		t.Errorf("members %v, want conmon103's descendants %v", got, want)
	}
	tr, err = NewTree(p.dir, 104, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readTree(t, tr).members, p.pids("playbook104"); !slices.Equal(got, want) {
		t.Errorf("members %v, want conmon104's child %v", got, want)
	}
}

// TestTreeExecInProgress: a conmon read while it execs (its comm set, its
// command line not yet) and a trusted process whose environment is not
// there yet are read again at the next look: the tree then holds the
// conmon's descendants, and the process its environment names. The
// other environments are gone, so only those two tell the job.
func TestTreeExecInProgress(t *testing.T) {
	p := newFakeProc(t)
	conmon := filepath.Join(p.dir, strconv.Itoa(p.pid("conmon103")), "cmdline")
	envFile := filepath.Join(p.dir, strconv.Itoa(p.pid("version103")), "environ")
	saved := map[string][]byte{}
	for _, f := range []string{conmon, envFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		saved[f] = b
	}
	envs, _ := filepath.Glob(filepath.Join(p.dir, "*", "environ"))
	for _, f := range envs {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for f := range saved {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, tr).members; len(got) != 0 {
		t.Fatalf("members while conmon103 and version103 exec %v, want none", got)
	}
	for f, b := range saved {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := p.pids("playbook103", "fork103", "shell103", "module103", "version103")
	slices.Sort(want)
	if got := readTree(t, tr).members; !slices.Equal(got, want) {
		t.Errorf("members once both execed %v, want %v", got, want)
	}
}
