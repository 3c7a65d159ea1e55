package discover

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/cgroup"
	"github.com/peakline/peakline/collector/testscale"
)

// These tests use this machine's real cgroups and processes: they need
// root. Each works below a cgroup named after the test and its pid, and
// looks only at its own findings: other tests may make cgroups meanwhile.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testing.Short() {
			t.Skip("needs root")
		}
		t.Fatal("this test makes cgroups and reads other processes' environment: run it as root (or with -short to skip)")
	}
}

// unavailable skips the test under -short and fails it otherwise: a
// real-host test that cannot run says so, never passes silently.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if testing.Short() {
		t.Skipf(format, args...)
	}
	t.Fatalf(format+" (pass -short to skip)", args...)
}

// hex64 is a made-up container id unique to this test process and label.
func hex64(label string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", label, os.Getpid())))
	return hex.EncodeToString(sum[:])
}

// testRules are the defaults plus the two container layouts placed
// below the test's own top-level cgroup.
func testRules(top string) Rules {
	r := DefaultRules()
	r.Scopes = append(r.Scopes,
		ScopeRule{Kind: KindPodman, Top: top, Name: `^libpod-([0-9a-f]{64})\.scope$`},
		ScopeRule{Kind: KindKubernetes, Top: top, Name: `^cri-containerd-([0-9a-f]{64})\.scope$`},
	)
	return r
}

// fakeAnsible copies a program under the name ansible-playbook, so that
// the kernel's comm of the process is a trusted one.
func fakeAnsible(t *testing.T, program string) string {
	t.Helper()
	src, err := exec.LookPath(program)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "ansible-playbook")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// mkCgroups makes rel (and its parents) in each hierarchy and removes
// them at cleanup, deepest first, after the test's processes are gone.
func mkCgroups(t *testing.T, hierarchies []string, top string, rels ...string) {
	t.Helper()
	for _, h := range hierarchies {
		for _, rel := range rels {
			if err := os.MkdirAll(filepath.Join(h, top, rel), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		topDir := filepath.Join(h, top)
		t.Cleanup(func() {
			var dirs []string
			_ = filepath.WalkDir(topDir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.Reverse(dirs)
			for _, d := range dirs {
				var err error
				for try := 0; try < 50; try++ { // a killed process may hold it a moment
					if err = syscall.Rmdir(d); err == nil || !errors.Is(err, syscall.EBUSY) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					t.Errorf("remove cgroup %s: %v", d, err)
				}
			}
		})
	}
}

// startJob starts program with args and JOB_ID=jobID in its own process
// group. stdin, if set, is a pipe the test writes to. The group is killed
// after 9 s (scaled) at the latest, so that a stuck test ends, and at
// cleanup.
func startJob(t *testing.T, jobID int64, withStdin bool, program string, args ...string) (*exec.Cmd, *bufio.Reader, *os.File) {
	t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "AWX_TOKEN=fake-token-not-a-secret", "JOB_ID=" + strconv.FormatInt(jobID, 10)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdinW *os.File
	if withStdin {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin, stdinW = r, w
		defer r.Close()
		t.Cleanup(func() { w.Close() })
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	stop := time.AfterFunc(testscale.Scaled(t, 9*time.Second), func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	t.Cleanup(func() {
		stop.Stop()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, bufio.NewReader(out), stdinW
}

func moveTo(t *testing.T, pid int, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("move %d into %s: %v", pid, d, err)
		}
	}
}

// waitComm waits until pid's comm is want (an exec happened).
func waitComm(t *testing.T, pid int, want string) {
	t.Helper()
	// The wait is for burnScript's 300000 shell loops: about 0.5 s on an
	// idle host, 35 s in the emulated guest of make test-v2 on a host at
	// a load of 14 (scaled by 5 there).
	deadline := time.Now().Add(testscale.Scaled(t, 20*time.Second))
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(b)) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not become %q", pid, want)
}

// ownJobs keeps the jobs whose cgroup is below top.
func ownJobs(jobs []Job, top string) []Job {
	var own []Job
	for _, j := range jobs {
		if strings.HasPrefix(j.Cgroup, "/"+top+"/") {
			own = append(own, j)
		}
	}
	return own
}

// burnScript waits for a line on stdin, burns CPU, then becomes sleep.
const burnScript = `read go; i=0; while [ "$i" -lt 300000 ]; do i=$((i+1)); done; exec sleep 30`

// TestRealV1 lays out a podman scope and a Kubernetes pod in this host's
// v1 hierarchies (cpuacct, memory, pids), runs a process with a JOB_ID in
// each, and checks that Scan finds them and collector/cgroup samples them.
func TestRealV1(t *testing.T) {
	needRoot(t)
	base := "/sys/fs/cgroup"
	var hier []string
	for _, c := range []string{"memory", "pids", "cpuacct"} {
		if _, err := os.Stat(filepath.Join(base, c, "cgroup.procs")); err != nil {
			t.Skipf("no cgroup v1 %s hierarchy here: %v", c, err)
		}
		hier = append(hier, filepath.Join(base, c))
	}
	top := fmt.Sprintf("peakline-discover-v1-%d", os.Getpid())
	podID, workerID := hex64("podman"), hex64("worker")
	podScope := "machine.slice/libpod-" + podID + ".scope"
	k8sScope := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_0000_4e5f_8a9b_0c1d2e3f4a5b.slice/cri-containerd-" + workerID + ".scope"
	mkCgroups(t, hier, top, podScope+"/container", k8sScope)

	prog := fakeAnsible(t, "dash")
	jobPod, jobK8s := int64(800000+os.Getpid()%100000), int64(900000+os.Getpid()%100000)
	pod, _, podIn := startJob(t, jobPod, true, prog, "-c", burnScript)
	k8s, _, _ := startJob(t, jobK8s, false, prog, "-c", "exec sleep 30")
	var podDirs, k8sDirs []string
	for _, h := range hier {
		podDirs = append(podDirs, filepath.Join(h, top, podScope, "container"))
		k8sDirs = append(k8sDirs, filepath.Join(h, top, k8sScope))
	}
	moveTo(t, pod.Process.Pid, podDirs...)
	waitComm(t, k8s.Process.Pid, "sleep") // execs before the move: comm must then be trusted...
	moveTo(t, k8s.Process.Pid, k8sDirs...)

	s, err := NewScanner(base, "/proc", testRules(top))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	// The Kubernetes process is sleep by now, which is not trusted: only
	// the podman one is placed.
	checkJobs(t, ownJobs(jobs, top), []Job{
		{ID: jobPod, Kind: KindPodman, Cgroup: "/" + top + "/" + podScope, ContainerID: podID, PIDs: []int{pod.Process.Pid}, Via: ViaEnviron},
	})

	// A trusted process in the pod's container places it, within
	// maxWait scans: an unplaced container is looked at less and less
	// often.
	k8s2, _, _ := startJob(t, jobK8s, true, prog, "-c", "read x")
	moveTo(t, k8s2.Process.Pid, k8sDirs...)
	for scans := 1; ; scans++ {
		if jobs, err = s.Scan(); err != nil {
			t.Fatal(err)
		}
		if len(ownJobs(jobs, top)) == 2 || scans > maxWait {
			break
		}
	}
	checkJobs(t, ownJobs(jobs, top), []Job{
		{ID: jobPod, Kind: KindPodman, Cgroup: "/" + top + "/" + podScope, ContainerID: podID, PIDs: []int{pod.Process.Pid}, Via: ViaEnviron},
		{ID: jobK8s, Kind: KindKubernetes, Cgroup: "/" + top + "/" + k8sScope, ContainerID: workerID, PIDs: sorted(k8s.Process.Pid, k8s2.Process.Pid), Via: ViaEnviron},
	})

	// collector/cgroup opens the found path in all three hierarchies and
	// sees the podman job's CPU grow.
	l, err := cgroup.Detect("/")
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Open(ownJobs(jobs, top)[0].Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	if n, _, err := c.PIDs(); n != 1 || err != nil {
		t.Fatalf("PIDs() = %d, %v; want 1", n, err)
	}
	if p, err := c.Populated(); !p || err != nil {
		t.Fatalf("Populated() = %v, %v", p, err)
	}
	cpu0, err := c.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(podIn, "go\n"); err != nil {
		t.Fatal(err)
	}
	waitComm(t, pod.Process.Pid, "sleep")
	cpu1, err := c.CPU()
	if err != nil {
		t.Fatal(err)
	}
	used := procCPU(t, pod.Process.Pid)
	if cpu1-cpu0 < used/2 || used == 0 {
		t.Fatalf("the scope's CPU grew by %v; the process used %v (by /proc)", cpu1-cpu0, used)
	}
}

func sorted(pids ...int) []int {
	slices.Sort(pids)
	return pids
}

// procCPU is a process's own utime+stime.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	st := readStat(t, pid)
	return time.Duration(st.utime+st.stime) * clockTick
}

// readStat reads and parses /proc/<pid>/stat.
func readStat(t *testing.T, pid int) procStat {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	st, _, ok := parseStat(b)
	if !ok {
		t.Fatalf("cannot parse %q", b)
	}
	return st
}

// TestRealV2 mounts this host's cgroup2 hierarchy (it has no controllers
// here, but cgroup.procs and cpu.stat) and does the same on real v2
// kernel files.
func TestRealV2(t *testing.T) {
	needRoot(t)
	mnt := t.TempDir()
	if err := syscall.Mount("none", mnt, "cgroup2", 0, ""); err != nil {
		unavailable(t, "cannot mount cgroup2 here: %v", err)
	}
	top := fmt.Sprintf("peakline-discover-v2-%d", os.Getpid())
	podID, workerID := hex64("podman2"), hex64("worker2")
	podScope := "user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + podID + ".scope"
	k8sScope := "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b3c4d_0000_4e5f_8a9b_0c1d2e3f4a5b.slice/cri-containerd-" + workerID + ".scope"
	// Cleanups run last-in first-out: the unmount goes after the rmdirs
	// and the processes' end.
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	mkCgroups(t, []string{mnt}, top, podScope+"/container", k8sScope)

	prog := fakeAnsible(t, "dash")
	jobPod, jobK8s := int64(810000+os.Getpid()%100000), int64(910000+os.Getpid()%100000)
	pod, _, podIn := startJob(t, jobPod, true, prog, "-c", burnScript)
	k8s, _, _ := startJob(t, jobK8s, true, prog, "-c", "read x")
	podDir := filepath.Join(mnt, top, podScope)
	moveTo(t, pod.Process.Pid, filepath.Join(podDir, "container"))
	moveTo(t, k8s.Process.Pid, filepath.Join(mnt, top, k8sScope))

	jobs, err := Scan(mnt, "/proc", testRules(top))
	if err != nil {
		t.Fatal(err)
	}
	checkJobs(t, ownJobs(jobs, top), []Job{
		{ID: jobPod, Kind: KindPodman, Cgroup: "/" + top + "/" + podScope, ContainerID: podID, PIDs: []int{pod.Process.Pid}, Via: ViaEnviron},
		{ID: jobK8s, Kind: KindKubernetes, Cgroup: "/" + top + "/" + k8sScope, ContainerID: workerID, PIDs: []int{k8s.Process.Pid}, Via: ViaEnviron},
	})

	// The scope's cpu.stat (the kernel's, hierarchical) counts the
	// process in its container sub-group.
	usage := func() time.Duration {
		b, err := os.ReadFile(filepath.Join(podDir, "cpu.stat"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return time.Duration(us) * time.Microsecond
			}
		}
		t.Fatalf("no usage_usec in %s:\n%s", podDir, b)
		return 0
	}
	cpu0 := usage()
	if _, err := io.WriteString(podIn, "go\n"); err != nil {
		t.Fatal(err)
	}
	waitComm(t, pod.Process.Pid, "sleep")
	cpu1 := usage()
	used := procCPU(t, pod.Process.Pid)
	if cpu1-cpu0 < used/2 || used == 0 {
		t.Fatalf("the scope's usage_usec grew by %v; the process used %v (by /proc)", cpu1-cpu0, used)
	}
	b, err := os.ReadFile(filepath.Join(podDir, "cgroup.events"))
	if err != nil || !strings.Contains(string(b), "populated 1") {
		t.Fatalf("cgroup.events = %q, %v; want populated 1", b, err)
	}
}

// TestRealProcessTree measures a real tree of processes with a JOB_ID
// and no cgroup of its own: a shell (named ansible-playbook) with a
// Python child holding 64 MiB in 4 threads and a CPU burner.
func TestRealProcessTree(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("python3"); err != nil {
		unavailable(t, "no python3: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const alloc = 64 << 20
	py := `import threading, time
b = bytearray(` + strconv.Itoa(alloc) + `)
for i in range(0, len(b), 4096): b[i] = 1
for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
time.sleep(30)`
	script := `python3 -c '` + py + `' &
sh -c 'read x < ` + fifo + `; i=0; while [ "$i" -lt 300000 ]; do i=$((i+1)); done; echo burned; exec sleep 30' &
wait`
	jobID := int64(700000 + os.Getpid()%100000)
	root, out, _ := startJob(t, jobID, false, fakeAnsible(t, "dash"), "-c", script)
	if line, err := out.ReadString('\n'); line != "ready\n" || err != nil {
		t.Fatalf("read %q, %v; want ready", line, err)
	}

	// Scan sees a job outside any container: the root is its trusted
	// process (the children run python3 -c and sh, not trusted).
	rules := DefaultRules()
	rules.ProcessTree = true
	jobs, err := Scan("/sys/fs/cgroup", "/proc", rules)
	if err != nil {
		t.Fatal(err)
	}
	var found []Job
	for _, j := range jobs {
		if j.ID == jobID {
			found = append(found, j)
		}
	}
	checkJobs(t, found, []Job{{ID: jobID, Kind: KindProcessTree, PIDs: []int{root.Process.Pid}, Via: ViaEnviron}})

	tr, err := NewTree("/proc", jobID, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	cpu0, err := tr.CPU()
	if err != nil {
		t.Fatal(err)
	}
	mem, _, err := tr.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if mem < alloc {
		t.Fatalf("Memory() = %d; want at least the %d bytes allocated", mem, alloc)
	}
	// The shell, python3 with 3 more threads, the burner's shell.
	if n, _, err := tr.PIDs(); n != 1+4+1 || err != nil {
		t.Fatalf("PIDs() = %d, %v; want 6 (members %v)", n, err, tr.Procs())
	}
	if len(tr.Procs()) != 3 {
		t.Fatalf("members %v; want 3 processes", tr.Procs())
	}

	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if line, err := out.ReadString('\n'); line != "burned\n" || err != nil {
		t.Fatalf("read %q, %v; want burned", line, err)
	}
	cpu1, err := tr.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if cpu1-cpu0 < 20*time.Millisecond {
		t.Fatalf("CPU grew by %v while a child burned 300000 shell loops", cpu1-cpu0)
	}
	if p, err := tr.Populated(); !p || err != nil {
		t.Fatalf("Populated() = %v, %v", p, err)
	}

	// The job ends: nothing lives, the CPU counter stays.
	_ = syscall.Kill(-root.Process.Pid, syscall.SIGKILL)
	_ = root.Wait()
	deadline := time.Now().Add(testscale.Scaled(t, 5*time.Second))
	for {
		p, err := tr.Populated()
		if err != nil {
			t.Fatal(err)
		}
		if !p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still populated after the kill: %v", tr.Procs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cpu, _ := tr.CPU(); cpu < cpu1 {
		t.Fatalf("CPU went back from %v to %v", cpu1, cpu)
	}
}

// procTotal is a process's own and reaped time (utime+stime+cutime+cstime).
func procTotal(t *testing.T, pid int) time.Duration {
	t.Helper()
	st := readStat(t, pid)
	return time.Duration(st.utime+st.stime+st.cutime+st.cstime) * clockTick
}

// TestRealProcessTreeChainExit runs, below a root that waits, a chain of
// two shells whose inner one burns CPU; the chain ends at once, each
// shell reaped by its parent, as an Ansible task's processes do at its
// end. The root's own and reaped time then holds the chain's whole time,
// once; the Tree, polled meanwhile, must have counted exactly as much:
// what it counted of the chain while it ran is taken off the root's
// cutime when the root reaps it.
func TestRealProcessTreeChainExit(t *testing.T) {
	needRoot(t)
	script := `read x; sh -c 'sh -c "i=0; while [ \$i -lt 300000 ]; do i=\$((i+1)); done"; true'; echo burned; read x`
	jobID := int64(710000 + os.Getpid()%100000)
	root, out, stdin := startJob(t, jobID, true, fakeAnsible(t, "dash"), "-c", script)
	pid := root.Process.Pid
	tr, err := NewTree("/proc", jobID, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	var passes []string // the Tree's state after each pass, logged on failure
	cpu := func() (time.Duration, error) {
		d, err := tr.CPU()
		passes = append(passes, treeState(tr))
		return d, err
	}
	// settle makes passes until the root's own and reaped time stood
	// still across two of them (two: a root read just before it reaped
	// is seen again) and returns the Tree's counter and the root's time
	// of that moment. The root may be short of its read yet (at the
	// start, dash's start-up takes tens of milliseconds under emulation)
	// or back from it (its echo after the chain) and cross a clock tick.
	settle := func() (counted, root time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(testscale.Scaled(t, 5*time.Second)); ; {
			before := procTotal(t, pid)
			for range 2 {
				if counted, err = cpu(); err != nil {
					t.Fatal(err)
				}
			}
			if root = procTotal(t, pid); root == before && slices.Equal(tr.Procs(), []int{pid}) {
				return counted, root
			}
			if time.Now().After(deadline) {
				t.Fatalf("the root's time still grows (%v, then %v) or members %v are more than the root %d: it should wait in read alone", before, root, tr.Procs(), pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cpu0, root0 := settle()

	burned := make(chan string, 1)
	go func() {
		line, _ := out.ReadString('\n')
		burned <- line
	}()
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	members := 0
	for polling := true; polling; {
		select {
		case line := <-burned:
			if line != "burned\n" {
				t.Fatalf("read %q; want burned", line)
			}
			polling = false
		case <-time.After(10 * time.Millisecond):
		}
		if _, err := cpu(); err != nil {
			t.Fatal(err)
		}
		members = max(members, len(tr.Procs()))
	}
	cpu1, root1 := settle()
	if members != 3 {
		t.Errorf("at most %d members; want 3 (the root and the two shells)", members)
	}
	if got, want := cpu1-cpu0, root1-root0; got != want || want < 50*time.Millisecond {
		t.Logf("the root %d at %v then %v; the passes:\n%s", pid, root0, root1, strings.Join(passes, "\n"))
		t.Fatalf("the Tree counted %v while the root's own and reaped time grew by %v (want equal, at least 50ms)", got, want)
	}
}

// treeState is one line of the Tree's counter and members (pid: parent,
// own and reaped ticks, credit and its passes).
func treeState(tr *Tree) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "pass %d: %d ticks;", tr.gen, tr.cpuTicks)
	pids := make([]int, 0, len(tr.members))
	for pid := range tr.members {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		m := tr.members[pid]
		p := tr.snap[pid]
		fmt.Fprintf(&b, " %d(%d %c u%d s%d cu%d cs%d own%d reaped%d credit%d/%d)", pid, m.ppid, p.state, p.utime, p.stime, p.cutime, p.cstime, m.own, m.reaped, m.credit, m.creditPasses)
	}
	return b.String()
}

// TestScaled checks the deadline scale: unset it is 1, set it multiplies.
func TestScaled(t *testing.T) {
	t.Setenv("PEAKLINE_TEST_TIME_SCALE", "")
	if got := testscale.Scaled(t, 8*time.Second); got != 8*time.Second {
		t.Fatalf("unset: testscale.Scaled(8s) = %v; want 8s", got)
	}
	t.Setenv("PEAKLINE_TEST_TIME_SCALE", "2.5")
	if got := testscale.Scaled(t, 8*time.Second); got != 20*time.Second {
		t.Fatalf("2.5: testscale.Scaled(8s) = %v; want 20s", got)
	}
}
