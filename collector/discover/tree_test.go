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
