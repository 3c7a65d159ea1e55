package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/live"
)

// fakeProc is a writable copy of testdata/receptor-v2/proc.
type fakeProc struct {
	t   *testing.T
	dir string
}

func newFakeProc(t *testing.T) *fakeProc {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/receptor-v2/proc")); err != nil {
		t.Fatal(err)
	}
	return &fakeProc{t: t, dir: dir}
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

	// Roots 950, 951 (comm) and 955 (python3 running ansible-playbook);
	// 952 and 953 descend from 951. Not members: podman 930 (JOB_ID, not
	// trusted, not a descendant), 960 (job 104), 970 (no JOB_ID), 980
	// (gone: no stat).
	// CPU ticks: 950: 300+100+40+10, 951: 50+20, 952: 1+1, 953: 120+30,
	// 955: 10+5+2+1.
	mem := (20000 + 15000 + 200 + 8000 + 5000) * page
	checkReading(t, "start", readTree(t, tr), treeReading{
		cpu: 690 * tick, mem: mem, memPeak: mem, tasks: 2 + 1 + 1 + 4 + 1, taskPeak: 9,
		populated: true, members: []int{950, 951, 952, 953, 955},
	})

	// 953 grows to its peak, seen by an extra CPU read (a second pass),
	// then exits and is reaped by 952 (cutime 150+30); 955, whose parent
	// is init, exits: its last 18 ticks are kept. 950 forks ssh 956.
	p.stat(953, "python3", 'R', 952, 150, 30, 0, 0, 6, 1300, 30000)
	if _, err := tr.CPU(); err != nil {
		t.Fatal(err)
	}
	p.exit(953, 955)
	p.stat(952, "sh) (x) y", 'S', 951, 1, 1, 180, 0, 1, 1200, 200)
	p.stat(956, "ssh", 'S', 950, 3, 2, 0, 0, 1, 1500, 1000)
	peak := (20000 + 15000 + 200 + 30000 + 5000) * page
	checkReading(t, "953 and 955 exit", readTree(t, tr), treeReading{
		cpu: (450 + 70 + 182 + 5 + 18) * tick, mem: (20000 + 15000 + 200 + 1000) * page, memPeak: peak,
		tasks: 2 + 1 + 1 + 1, taskPeak: 2 + 1 + 1 + 6 + 1, populated: true, members: []int{950, 951, 952, 956},
	})

	// 951 exits, reaped by 950 (cutime +70); 952 is reparented to init
	// and stays a member. A kernel oddity lowers 950's cutime again: the
	// counter does not go back.
	p.exit(951)
	p.stat(950, "ansible-playboo", 'S', 940, 300, 100, 110, 10, 2, 1000, 20000)
	p.stat(952, "sh) (x) y", 'S', 1, 1, 1, 180, 0, 1, 1200, 200)
	checkReading(t, "951 reaped", readTree(t, tr), treeReading{
		cpu: (520 + 182 + 5 + 18) * tick, mem: (20000 + 200 + 1000) * page, memPeak: (20000 + 200 + 1000) * page,
		tasks: 4, taskPeak: 4, populated: true, members: []int{950, 952, 956},
	})
	p.stat(950, "ansible-playboo", 'S', 940, 300, 100, 0, 0, 2, 1000, 20000)
	got := readTree(t, tr)
	if got.cpu != 725*tick {
		t.Fatalf("CPU after a counter went down = %v; want it held at %v", got.cpu, 725*tick)
	}

	// A zombie alone does not populate the tree, but counts as a task.
	p.exit(950, 956)
	p.stat(952, "sh) (x) y", 'Z', 1, 1, 1, 180, 0, 1, 1200, 0)
	checkReading(t, "zombie left", readTree(t, tr), treeReading{
		cpu: 725 * tick, mem: 0, memPeak: 0, tasks: 1, taskPeak: 1, populated: false, members: []int{952},
	})
	p.exit(952)
	checkReading(t, "all gone", readTree(t, tr), treeReading{cpu: 725 * tick, populated: false, members: []int{}})
}

// TestTreePidReuse checks that a new process on a member's pid is no member.
func TestTreePidReuse(t *testing.T) {
	p := newFakeProc(t)
	tr, err := NewTree(p.dir, 103, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if r := readTree(t, tr); !slices.Equal(r.members, []int{950, 951, 952, 953, 955}) {
		t.Fatalf("members = %v", r.members)
	}
	// 953 exits; its pid goes to an unrelated process under init.
	p.stat(953, "cron", 'S', 1, 0, 0, 0, 0, 1, 99999, 100)
	if r := readTree(t, tr); !slices.Equal(r.members, []int{950, 951, 952, 955}) {
		t.Fatalf("members after pid reuse = %v; want 953 gone", r.members)
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
	p.stat(960, "ansible-playboo", 'S', 941, 1000, 111, 0, 0, 3, 1500, 30000)
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
// 990 under init, with children 991, 992, …
func TestTreeCPU(t *testing.T) {
	const job = "JOB_ID=105"
	root := func(p *fakeProc, own, reaped uint64) {
		p.stat(990, "ansible-playboo", 'S', 1, own, 0, reaped, 0, 1, 5000, 100)
		p.env(990, "PATH=/usr/bin", job)
	}
	t.Run("the first pass counts the history", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) { root(p, 4000, 1000) }, 5000, []int{990}},
			{"it runs", func(p *fakeProc) { root(p, 4010, 1000) }, 5010, []int{990}},
		})
	})
	t.Run("a root found late counts from its join", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			// A shell with the job's environment and 50 s behind
			// it, no trusted process yet: nothing to measure.
			{"untrusted", func(p *fakeProc) {
				p.stat(990, "sh", 'S', 1, 4000, 1000, 0, 0, 1, 5000, 100)
				p.env(990, job)
			}, 0, []int{}},
			// It execs ansible-playbook: it joins, its 50 s do not
			// land in this interval.
			{"exec", func(p *fakeProc) { root(p, 4000, 1000) }, 0, []int{990}},
			{"runs", func(p *fakeProc) { root(p, 4007, 1000) }, 7, []int{990}},
		})
	})
	t.Run("a process reparented into the tree counts from its join", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"apart", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(993, "python3", 'S', 1, 3000, 0, 0, 0, 1, 800, 10)
			}, 100, []int{990}},
			// 990 is a subreaper and adopts 993.
			{"adopted", func(p *fakeProc) { p.stat(993, "python3", 'S', 990, 3000, 0, 0, 0, 1, 800, 10) }, 100, []int{990, 993}},
			{"runs", func(p *fakeProc) { p.stat(993, "python3", 'S', 990, 3004, 0, 0, 0, 1, 800, 10) }, 104, []int{990, 993}},
		})
	})
	t.Run("a child born between passes counts whole", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"root", func(p *fakeProc) { root(p, 100, 0) }, 100, []int{990}},
			// 991 was born, used 20 ticks and reaped a child of 10.
			// Another child of 990 was born and reaped: 7.
			{"born", func(p *fakeProc) {
				root(p, 100, 7)
				p.stat(991, "sh", 'S', 990, 20, 0, 10, 0, 1, 5100, 10)
			}, 137, []int{990, 991}},
		})
	})
	t.Run("a chain that exits at once is counted once", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"chain", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(991, "sh", 'S', 990, 5, 0, 0, 0, 1, 5100, 10)
				p.stat(992, "sh", 'R', 991, 200, 0, 0, 0, 1, 5200, 10)
			}, 305, []int{990, 991, 992}},
			// 992 burns 30 more and exits, reaped by 991, which
			// uses 1 more and exits, reaped by 990: 990's cutime
			// holds 6 + 230.
			{"exit", func(p *fakeProc) {
				p.exit(991, 992)
				root(p, 100, 236)
			}, 336, []int{990}},
		})
	})
	t.Run("a reaper read before it reaps", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"chain", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(991, "sh", 'S', 990, 5, 0, 0, 0, 1, 5100, 10)
				p.stat(992, "sh", 'R', 991, 200, 0, 0, 0, 1, 5200, 10)
			}, 305, []int{990, 991, 992}},
			// Both are gone, but 990 was read just before it reaped.
			{"gone", func(p *fakeProc) { p.exit(991, 992) }, 305, []int{990}},
			{"reaped", func(p *fakeProc) { root(p, 100, 236) }, 336, []int{990}},
			// The credit was used up: a later reaped child counts.
			{"later child", func(p *fakeProc) { root(p, 100, 243) }, 343, []int{990}},
		})
	})
	t.Run("a child nobody in the tree reaps", func(t *testing.T) {
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(991, "sh", 'S', 990, 10, 0, 0, 0, 1, 5100, 10)
				p.stat(992, "sh", 'S', 991, 100, 0, 0, 0, 1, 5200, 10)
			}, 210, []int{990, 991, 992}},
			// 991 exits first (990 reaps it: 10 + 1), 992 is
			// reparented to init and stays a member.
			{"reaper left", func(p *fakeProc) {
				p.exit(991)
				root(p, 100, 11)
				p.stat(992, "sh", 'S', 1, 120, 0, 0, 0, 1, 5200, 10)
			}, 231, []int{990, 992}},
			// init reaps 992: its last 5 ticks are not seen.
			{"992 exits", func(p *fakeProc) { p.exit(992) }, 231, []int{990}},
			{"root runs", func(p *fakeProc) { root(p, 103, 11) }, 234, []int{990}},
		})
	})
	t.Run("a child reaped by init while its parent left too", func(t *testing.T) {
		// The residual error the Tree doc tells: 991 exits, 992 is
		// reparented to init and exits, all within one interval. 992
		// is taken for reaped by 990 through 991, and what 990 reaps
		// in that pass and the next is taken off, up to 992's 100.
		runTreeSteps(t, []treeStep{
			{"start", func(p *fakeProc) {
				root(p, 100, 0)
				p.stat(991, "sh", 'S', 990, 10, 0, 0, 0, 1, 5100, 10)
				p.stat(992, "sh", 'S', 991, 100, 0, 0, 0, 1, 5200, 10)
			}, 210, []int{990, 991, 992}},
			{"both gone", func(p *fakeProc) {
				p.exit(991, 992)
				root(p, 100, 11)
			}, 210, []int{990}},
			{"next pass", func(p *fakeProc) { root(p, 100, 18) }, 210, []int{990}},
			{"credit dropped", func(p *fakeProc) { root(p, 100, 25) }, 217, []int{990}},
		})
	})
	t.Run("a process that execs into a trusted name late", func(t *testing.T) {
		p := newFakeProc(t)
		tr, err := NewTree(p.dir, 105, DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		p.stat(990, "sh", 'S', 1, 4000, 1000, 0, 0, 1, 5000, 100)
		p.env(990, job)
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
			if slices.Equal(r.members, []int{990}) {
				break
			}
		}
		if passes == recheckEvery {
			t.Fatalf("990 not a member %d passes after its exec", recheckEvery)
		}
		root(p, 4003, 1000)
		if r := readTree(t, tr); r.cpu != 3*clockTick {
			t.Fatalf("CPU %v; want 3 ticks", r.cpu)
		}
	})
}

// TestTreeByConmon finds a job's tree with no environment readable: the
// children of the conmon whose -n names the job are its roots (conmon
// itself is not measured); 955, known by its environment alone, is not.
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
	if got := readTree(t, tr).members; !slices.Equal(got, []int{950, 951, 952, 953}) {
		t.Errorf("members %v, want conmon 940's descendants 950-953", got)
	}
	tr, err = NewTree(p.dir, 104, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, tr).members; !slices.Equal(got, []int{960}) {
		t.Errorf("members %v, want conmon 941's child 960", got)
	}
}
