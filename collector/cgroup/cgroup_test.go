package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeHost is a temp dir laid out like a host's / for Detect.
type fakeHost struct {
	t    *testing.T
	root string
}

func newFakeHost(t *testing.T, mountinfo, procCgroup string) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: t.TempDir()}
	h.write("proc/self/mountinfo", mountinfo)
	h.write("proc/self/cgroup", procCgroup)
	return h
}

func (h *fakeHost) path(rel string) string { return filepath.Join(h.root, rel) }

func (h *fakeHost) write(rel, content string) {
	h.t.Helper()
	p := h.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) read(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.path(rel))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *fakeHost) mkdir(rel string) {
	h.t.Helper()
	if err := os.MkdirAll(h.path(rel), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

// hybridMountinfo is this project's CI host: v1 controllers in separate
// hierarchies, cgroup2 at /sys/fs/cgroup/unified without controllers.
const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const hybridProcCgroup = `9:name=systemd:/
8:pids:/
4:memory:/sandbox/s1
2:cpuacct:/
1:cpu:/
0::/
`

func newHybrid(t *testing.T) *fakeHost {
	h := newFakeHost(t, hybridMountinfo, hybridProcCgroup)
	for _, d := range []string{"cpu", "cpuacct", "memory/sandbox/s1", "pids", "unified"} {
		h.mkdir("sys/fs/cgroup/" + d)
	}
	h.write("sys/fs/cgroup/unified/cgroup.controllers", "\n")
	return h
}

const v2Mountinfo = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"

func newV2(t *testing.T, rootControllers, self string) *fakeHost {
	h := newFakeHost(t, v2Mountinfo, "0::"+self+"\n")
	h.write("sys/fs/cgroup/cgroup.controllers", rootControllers)
	h.mkdir("sys/fs/cgroup" + self)
	return h
}

func TestDetectHybridUsesV1UnderOwnCgroups(t *testing.T) {
	h := newHybrid(t)
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(); m != ModeV1 || err != nil {
		t.Fatalf("Mode() = %v, %v; want v1", m, err)
	}
	c, err := l.Create("job1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		h.path("sys/fs/cgroup/memory/sandbox/s1/job1"),
		h.path("sys/fs/cgroup/pids/job1"),
		h.path("sys/fs/cgroup/cpuacct/job1"),
	}
	if !slices.Equal(c.Dirs(), want) {
		t.Fatalf("Dirs() = %q\nwant %q", c.Dirs(), want)
	}
	if c.Path() != want[0] {
		t.Fatalf("Path() = %q, want the memory dir", c.Path())
	}
	if err := c.AddProc(4242); err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if got := h.read(strings.TrimPrefix(d, h.root) + "/cgroup.procs"); got != "4242" {
			t.Fatalf("%s/cgroup.procs = %q", d, got)
		}
	}
	if _, err := c.OpenDir(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("OpenDir on v1: %v, want ErrUnsupported", err)
	}

	h.write("sys/fs/cgroup/cpuacct/job1/cpuacct.usage", "1500000000\n")
	h.write("sys/fs/cgroup/memory/sandbox/s1/job1/memory.usage_in_bytes", "1000\n")
	h.write("sys/fs/cgroup/memory/sandbox/s1/job1/memory.max_usage_in_bytes", "5000\n")
	h.write("sys/fs/cgroup/pids/job1/pids.current", "3\n")
	c.initPeaks() // the fake files appear after Create; the kernel's exist at once
	if cpu, err := c.CPU(); cpu != 1500*time.Millisecond || err != nil {
		t.Fatalf("CPU() = %v, %v", cpu, err)
	}
	cur, peak, err := c.Memory()
	if cur != 1000 || peak != 5000 || err != nil {
		t.Fatalf("Memory() = %d, %d, %v; want 1000, 5000", cur, peak, err)
	}
	if got := h.read("sys/fs/cgroup/memory/sandbox/s1/job1/memory.max_usage_in_bytes"); got != "0" {
		t.Fatalf("max_usage_in_bytes after read = %q, want reset to 0", got)
	}
	if n, peak, err := c.PIDs(); n != 3 || peak != 0 || err != nil {
		t.Fatalf("PIDs() = %d, %d, %v", n, peak, err)
	}

	// A leftover process goes back home; the cgroups go away.
	h.write("sys/fs/cgroup/pids/job1/cgroup.procs", "777\n")
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there after Remove: %v", d, err)
		}
	}
	if got := h.read("sys/fs/cgroup/pids/cgroup.procs"); got != "777" {
		t.Fatalf("leftover pid moved to %q, want 777 in the parent", got)
	}
}

func TestCreateCoMountedCPUAndCPUAcct(t *testing.T) {
	h := newFakeHost(t, `1 0 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
2 0 0:2 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
3 0 0:3 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
`, "3:pids:/\n2:memory:/\n1:cpu,cpuacct:/user.slice\n")
	h.mkdir("sys/fs/cgroup/cpu,cpuacct/user.slice")
	h.mkdir("sys/fs/cgroup/memory")
	h.mkdir("sys/fs/cgroup/pids")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Create("j")
	if err != nil {
		t.Fatal(err)
	}
	if c.cpuDir != h.path("sys/fs/cgroup/cpu,cpuacct/user.slice/j") || len(c.Dirs()) != 3 {
		t.Fatalf("cpu dir %q, dirs %q", c.cpuDir, c.Dirs())
	}
}

func TestModeMissingController(t *testing.T) {
	f := func(name string, h *fakeHost, wantParts ...string) {
		t.Helper()
		l, err := Detect(h.root)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = l.Create("j")
		if !errors.Is(err, ErrNoController) {
			t.Fatalf("%s: Create error %v, want ErrNoController", name, err)
		}
		for _, w := range wantParts {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: error %q lacks %q", name, err, w)
			}
		}
	}

	// v1 without pids, cgroup2 without controllers.
	noPids := newFakeHost(t, strings.ReplaceAll(hybridMountinfo, "rw,pids", "rw,devices"), hybridProcCgroup)
	noPids.write("sys/fs/cgroup/unified/cgroup.controllers", "")
	f("v1 no pids", noPids, `controller(s) pids not mounted`, "mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids")

	// Pure v2 whose root lacks memory (disabled at boot).
	f("v2 root no memory", newV2(t, "cpu io pids", "/"), "memory", "cgroup_disable=")

	// v2 whose own cgroup's parent does not delegate memory and pids.
	h := newV2(t, "cpu io memory pids", "/user.slice/user-0.slice/session-1.scope")
	h.write("sys/fs/cgroup/cgroup.subtree_control", "cpu memory pids")
	h.write("sys/fs/cgroup/user.slice/cgroup.subtree_control", "cpu")
	h.write("sys/fs/cgroup/user.slice/user-0.slice/cgroup.subtree_control", "")
	h.write("sys/fs/cgroup/user.slice/user-0.slice/session-1.scope/cgroup.controllers", "")
	f("v2 not delegated", h,
		`echo "+memory +pids" > /sys/fs/cgroup/user.slice/cgroup.subtree_control; echo "+memory +pids" > /sys/fs/cgroup/user.slice/user-0.slice/cgroup.subtree_control`)
}

func TestCreateV2(t *testing.T) {
	// At the root, the controllers are enabled in the root's subtree.
	h := newV2(t, "cpuset cpu io memory pids", "/")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Create("job")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.read("sys/fs/cgroup/cgroup.subtree_control"); got != "+memory +pids" {
		t.Fatalf("root subtree_control = %q", got)
	}
	if c.Path() != h.path("sys/fs/cgroup/job") || c.Mode() != ModeV2 {
		t.Fatalf("Path() = %q, mode %v", c.Path(), c.Mode())
	}
	f, err := c.OpenDir()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	h.write("sys/fs/cgroup/job/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	h.write("sys/fs/cgroup/job/memory.current", "100\n")
	h.write("sys/fs/cgroup/job/memory.peak", "300\n")
	h.write("sys/fs/cgroup/job/pids.current", "2\n")
	h.write("sys/fs/cgroup/job/pids.peak", "4\n")
	c.initPeaks()
	if cpu, err := c.CPU(); cpu != 2500*time.Millisecond || err != nil {
		t.Fatalf("CPU() = %v, %v", cpu, err)
	}
	// Not a cgroupfs: the all-time peak counts when it rose.
	memF := func(wantCur, wantPeak uint64) {
		t.Helper()
		cur, peak, err := c.Memory()
		if cur != wantCur || peak != wantPeak || err != nil {
			t.Fatalf("Memory() = %d, %d, %v; want %d, %d", cur, peak, err, wantCur, wantPeak)
		}
	}
	memF(100, 300) // created: everything so far is this job's
	memF(100, 0)   // unchanged
	h.write("sys/fs/cgroup/job/memory.peak", "900\n")
	memF(100, 900)
	if n, peak, err := c.PIDs(); n != 2 || peak != 4 || err != nil {
		t.Fatalf("PIDs() = %d, %d, %v", n, peak, err)
	}

	// Populated follows cgroup.events.
	h.write("sys/fs/cgroup/job/cgroup.events", "populated 1\nfrozen 0\n")
	if p, err := c.Populated(); !p || err != nil {
		t.Fatalf("Populated() = %v, %v", p, err)
	}
	h.write("sys/fs/cgroup/job/cgroup.events", "populated 0\nfrozen 0\n")
	if p, err := c.Populated(); p || err != nil {
		t.Fatalf("Populated() = %v, %v", p, err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.path("sys/fs/cgroup/job")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("job cgroup still there: %v", err)
	}
}

func TestCreateV2BesideOwnCgroup(t *testing.T) {
	h := newV2(t, "cpu io memory pids", "/user.slice/session-1.scope")
	h.write("sys/fs/cgroup/user.slice/session-1.scope/cgroup.controllers", "cpu memory pids")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Create("peakline-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path() != h.path("sys/fs/cgroup/user.slice/peakline-1") {
		t.Fatalf("Path() = %q, want a sibling of the own cgroup", c.Path())
	}
	if c.homes[0] != h.path("sys/fs/cgroup/user.slice/session-1.scope") {
		t.Fatalf("home = %q", c.homes[0])
	}
}

func TestOpenV1FollowsMemberProcess(t *testing.T) {
	h := newHybrid(t)
	// The job's cgroup sits at different paths per hierarchy, like
	// systemd's v1 layout.
	h.write("sys/fs/cgroup/memory/ansible/42/cgroup.procs", "123\n")
	h.mkdir("sys/fs/cgroup/pids/other/42")
	h.mkdir("sys/fs/cgroup/cpuacct/acct/42")
	h.write("proc/123/cgroup", "8:pids:/other/42\n4:memory:/ansible/42\n2:cpuacct:/acct/42\n")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Open(h.path("sys/fs/cgroup/memory/ansible/42"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		h.path("sys/fs/cgroup/memory/ansible/42"),
		h.path("sys/fs/cgroup/pids/other/42"),
		h.path("sys/fs/cgroup/cpuacct/acct/42"),
	}
	if !slices.Equal(c.Dirs(), want) {
		t.Fatalf("Dirs() = %q\nwant %q", c.Dirs(), want)
	}
	// Opened cgroups never reset the shared peak and start from a baseline.
	h.write("sys/fs/cgroup/memory/ansible/42/memory.usage_in_bytes", "10\n")
	h.write("sys/fs/cgroup/memory/ansible/42/memory.max_usage_in_bytes", "99\n")
	c.initPeaks()
	if cur, peak, _ := c.Memory(); cur != 10 || peak != 0 {
		t.Fatalf("first Memory() = %d, %d; want 10, 0", cur, peak)
	}
	if got := h.read("sys/fs/cgroup/memory/ansible/42/memory.max_usage_in_bytes"); got != "99\n" {
		t.Fatalf("opened cgroup's peak was written: %q", got)
	}
	// Populated walks child cgroups on v1.
	h.write("sys/fs/cgroup/pids/other/42/cgroup.procs", "")
	h.write("sys/fs/cgroup/pids/other/42/sub/cgroup.procs", "555\n")
	if p, err := c.Populated(); !p || err != nil {
		t.Fatalf("Populated() = %v, %v; want true from the child", p, err)
	}
	h.write("sys/fs/cgroup/pids/other/42/sub/cgroup.procs", "")
	if p, err := c.Populated(); p || err != nil {
		t.Fatalf("Populated() = %v, %v; want false", p, err)
	}
	// Remove of an opened cgroup deletes nothing.
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want[0]); err != nil {
		t.Fatalf("opened cgroup removed: %v", err)
	}

	// A cgroup path instead of a directory; a missing one.
	if _, err := l.Open("/ansible/42"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open by cgroup path with different per-hierarchy paths: %v, want ErrNotFound", err)
	}
	h.mkdir("sys/fs/cgroup/pids/ansible/42")
	h.mkdir("sys/fs/cgroup/cpuacct/ansible/42")
	if _, err := l.Open("/ansible/42"); err != nil {
		t.Fatalf("Open by cgroup path: %v", err)
	}
}

func TestDetectErrors(t *testing.T) {
	h := newFakeHost(t, "22 27 0:21 / /proc rw - proc proc rw\n", "0::/\n")
	if _, err := Detect(h.root); !errors.Is(err, ErrNoCgroupFS) {
		t.Fatalf("Detect without cgroups: %v", err)
	}
	if _, err := Detect(t.TempDir()); err == nil {
		t.Fatal("Detect without a mount table: no error")
	}
	l, err := Detect(newHybrid(t).root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "a/b", "..", "x\ny"} {
		if _, err := l.Create(name); err == nil {
			t.Fatalf("Create(%q): no error", name)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := unescapeMount(in); got != want {
			t.Fatalf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
	f(`/sys/fs/cgroup`, `/sys/fs/cgroup`)
	f(`/mnt/my\040cgroups`, `/mnt/my cgroups`)
	f(`/a\134b`, `/a\b`)
	f(`/tail\04`, `/tail\04`)
}

func TestRemoveStale(t *testing.T) {
	h := newHybrid(t)
	h.mkdir("sys/fs/cgroup/pids/peakline-1-1")
	h.mkdir("sys/fs/cgroup/memory/sandbox/s1/peakline-1-1")
	h.write("sys/fs/cgroup/pids/peakline-2-1/cgroup.procs", "99\n") // still busy
	h.mkdir("sys/fs/cgroup/pids/someone-else")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.RemoveStale(func(name string) bool { return strings.HasPrefix(name, "peakline-") })
	if n != 2 || err != nil {
		t.Fatalf("RemoveStale = %d, %v; want 2 removed", n, err)
	}
	for rel, want := range map[string]bool{
		"sys/fs/cgroup/pids/peakline-1-1":              false,
		"sys/fs/cgroup/memory/sandbox/s1/peakline-1-1": false,
		"sys/fs/cgroup/pids/peakline-2-1":              true,
		"sys/fs/cgroup/pids/someone-else":              true,
	} {
		if _, err := os.Stat(h.path(rel)); (err == nil) != want {
			t.Fatalf("%s exists: %v, want %v", rel, err == nil, want)
		}
	}
}
