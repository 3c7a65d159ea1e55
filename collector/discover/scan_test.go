package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/cgroup"
)

// Container ids of the recorded shapes (scripts/v2vm/shapes.py).
var (
	podRootful  = digest("shape-podman-rootful")
	podRootless = digest("shape-podman-rootless")
	podWebapp   = digest("shape-podman-webapp")
	k8sWorker1  = digest("shape-k8s-worker-201")
	k8sWorker2  = digest("shape-k8s-worker-202")
	k8sWorker3  = digest("shape-k8s-worker-203")
)

func scanTree(t *testing.T, dir string, rules Rules) []Job {
	t.Helper()
	jobs, err := Scan(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), rules)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func checkJobs(t *testing.T, got, want []Job) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("found %d jobs, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Kind != w.Kind || g.Cgroup != w.Cgroup || g.ContainerID != w.ContainerID || g.Via != w.Via || !slices.Equal(g.PIDs, w.PIDs) {
			t.Errorf("job %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestScanPodmanV2(t *testing.T) {
	sh := loadShape(t, "podman")
	got := scanTree(t, sh.dir, DefaultRules())
	checkJobs(t, got, []Job{
		// Rootful, systemd manager: the processes are in crun's
		// "container" sub-group; conmon's world-readable --name names
		// the job before ansible-playbook's environment is read.
		{ID: 101, Kind: KindPodman, Cgroup: "/machine.slice/libpod-" + podRootful + ".scope", ContainerID: podRootful, PIDs: sh.pids("playbook101", "fork101", "ssh101"), Via: ViaConmon},
		// Rootless under user@1000.service, before ansible-playbook
		// starts: only conmon's --name says the job (dumb-init's JOB_ID
		// is not trusted).
		{ID: 102, Kind: KindPodman, Cgroup: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + podRootless + ".scope", ContainerID: podRootless, PIDs: sh.pids("dumbinit102", "entrypoint102"), Via: ViaConmon},
	})
}

func TestScanDir(t *testing.T) {
	sh := loadShape(t, "podman")
	for _, j := range scanTree(t, sh.dir, DefaultRules()) {
		if want := filepath.Join(sh.dir, "cgroup", j.Cgroup); j.Dir != want {
			t.Errorf("job %d: Dir = %q; want %q", j.ID, j.Dir, want)
		}
	}
	jobs, err := Scan("testdata/no-such-tree", filepath.Join(sh.dir, "proc"), DefaultRules())
	if err == nil {
		t.Fatalf("Scan of a missing tree = %+v; want an error", jobs)
	}
}

func TestScanKubernetesV2(t *testing.T) {
	sh := loadShape(t, "kubernetes")
	got := scanTree(t, sh.dir, DefaultRules())
	pod := func(qos, uid, id string) string {
		if qos == "" {
			return "/kubepods.slice/kubepods-pod" + uid + ".slice/cri-containerd-" + id + ".scope"
		}
		return "/kubepods.slice/kubepods-" + qos + ".slice/kubepods-" + qos + "-pod" + uid + ".slice/cri-containerd-" + id + ".scope"
	}
	checkJobs(t, got, []Job{
		{ID: 201, Kind: KindKubernetes, Cgroup: pod("burstable", "9b3f0c1e_4a3c_4d59_9d0e_6a1c1d2e3f41", k8sWorker1), ContainerID: k8sWorker1, PIDs: sh.pids("dumbinit201", "runner201", "playbook201", "ssh201"), Via: ViaEnviron},
		{ID: 202, Kind: KindKubernetes, Cgroup: pod("besteffort", "2c8a4e10_7f6b_4c3d_8e2f_1a2b3c4d5e6f", k8sWorker2), ContainerID: k8sWorker2, PIDs: sh.pids("playbook202"), Via: ViaEnviron},
		// ansible-runner worker has started, ansible-playbook not yet: the
		// pod name in HOSTNAME says the job.
		{ID: 203, Kind: KindKubernetes, Cgroup: pod("burstable", "5e6f7a8b_1c2d_4e3f_9a0b_c1d2e3f4a5b6", k8sWorker3), ContainerID: k8sWorker3, PIDs: sh.pids("dumbinit203", "runner203"), Via: ViaPodName},
	})

	// With the pod-name rule off, job 203 waits for ansible-playbook.
	r := DefaultRules()
	r.PodNameEnv = ""
	got = scanTree(t, sh.dir, r)
	if ids := jobIDs(got); !slices.Equal(ids, []int64{201, 202}) {
		t.Fatalf("without the pod-name rule found %v; want [201 202]", ids)
	}
}

// treeRules are the default rules with the process-tree fallback on.
func treeRules() Rules {
	r := DefaultRules()
	r.ProcessTree = true
	return r
}

func TestScanReceptorProcessTree(t *testing.T) {
	sh := loadShape(t, "receptor")
	got := scanTree(t, sh.dir, treeRules())
	checkJobs(t, got, []Job{
		// The conmons whose containers have no cgroup, by their
		// world-readable -n; the playbook and its fork by comm, the
		// version run as python3 running ansible-playbook; podman has
		// JOB_ID but is not trusted, nor are the shell and module the
		// fork runs; the ansible-runner worker and the playbook run by
		// hand are trusted but have no JOB_ID.
		{ID: 103, Kind: KindProcessTree, PIDs: sh.pids("conmon103", "playbook103", "fork103", "version103"), Via: ViaConmon},
		{ID: 104, Kind: KindProcessTree, PIDs: sh.pids("conmon104", "playbook104"), Via: ViaConmon},
	})
	// Without conmons (another container engine) the environment alone
	// tells.
	noConmon := t.TempDir()
	if err := os.CopyFS(noConmon, os.DirFS(sh.dir)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range sh.pids("conmon103", "conmon104") {
		if err := os.RemoveAll(filepath.Join(noConmon, "proc", strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
	}
	checkJobs(t, scanTree(t, noConmon, treeRules()), []Job{
		{ID: 103, Kind: KindProcessTree, PIDs: sh.pids("playbook103", "fork103", "version103"), Via: ViaEnviron},
		{ID: 104, Kind: KindProcessTree, PIDs: sh.pids("playbook104"), Via: ViaEnviron},
	})
	// A process whose own cgroup is a container's belongs to that
	// container's job, even before Scan looks into the container.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sh.dir)); err != nil {
		t.Fatal(err)
	}
	cg := "12:pids:/machine.slice/libpod-" + podRootful + ".scope/container\n0::/\n"
	if err := os.WriteFile(filepath.Join(dir, "proc", strconv.Itoa(sh.pid("playbook104")), "cgroup"), []byte(cg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "proc", strconv.Itoa(sh.pid("conmon104")))); err != nil { // it would tell 104
		t.Fatal(err)
	}
	if ids := jobIDs(scanTree(t, dir, treeRules())); !slices.Equal(ids, []int64{103}) {
		t.Fatalf("with job 104's playbook in a container cgroup found %v; want [103]", ids)
	}

	if got := scanTree(t, sh.dir, DefaultRules()); len(got) != 0 {
		t.Fatalf("with ProcessTree off (the default) found %+v; want none", got)
	}
}

func jobIDs(jobs []Job) []int64 {
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

func TestScanDepthLimit(t *testing.T) {
	// The rootless scope is 4 levels below user.slice.
	r := DefaultRules()
	r.MaxDepth = 3
	got := scanTree(t, loadShape(t, "podman").dir, r)
	if ids := jobIDs(got); !slices.Equal(ids, []int64{101}) {
		t.Fatalf("with depth 3 found %v; want [101]", ids)
	}
}

// TestScannerCache checks that a placed container is not looked up in
// /proc again, and is forgotten when its cgroup goes.
func TestScannerCache(t *testing.T) {
	sh := loadShape(t, "podman")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sh.dir)); err != nil {
		t.Fatal(err)
	}
	s, err := NewScanner(filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc"), DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(first); !slices.Equal(ids, []int64{101, 102}) {
		t.Fatalf("first scan found %v", ids)
	}
	// Make the environment and conmon unreadable: the cache answers.
	for _, pid := range sh.pids("playbook101", "fork101", "conmon102") {
		if err := os.RemoveAll(filepath.Join(dir, "proc", strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
	}
	second, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(second); !slices.Equal(ids, []int64{101, 102}) {
		t.Fatalf("second scan found %v; want the cached [101 102]", ids)
	}
	// The container ends: its cgroup goes, and so does its cache entry.
	if err := os.RemoveAll(filepath.Join(dir, "cgroup/machine.slice/libpod-"+podRootful+".scope")); err != nil {
		t.Fatal(err)
	}
	third, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(third); !slices.Equal(ids, []int64{102}) {
		t.Fatalf("third scan found %v; want [102]", ids)
	}
	if _, ok := s.containers[podRootful]; ok {
		t.Fatalf("the ended container is still cached")
	}
	// The webapp container is not a job and is looked at each time, but
	// its processes' comm did not change, so nothing is re-read.
	if c := s.containers[podWebapp]; c == nil || c.jobID != 0 || len(c.checked) != 2 {
		t.Fatalf("webapp container state = %+v; want unplaced with 2 checked processes", c)
	}
}

// TestScanCgroupOpens checks that a found Cgroup path is what
// collector/cgroup opens, and reads the recorded v2 files through it.
func TestScanCgroupOpens(t *testing.T) {
	sh := loadShape(t, "podman")
	tree, err := filepath.Abs(filepath.Join(sh.dir, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		writeUnder(t, root, rel, content)
	}
	write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n")
	write("proc/self/cgroup", "0::/system.slice/peakline-agent.service\n")
	if err := os.MkdirAll(filepath.Join(root, "sys/fs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tree, filepath.Join(root, "sys/fs/cgroup")); err != nil {
		t.Fatal(err)
	}

	jobs := scanTree(t, sh.dir, DefaultRules())
	l, err := cgroup.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(); m != cgroup.ModeV2 || err != nil {
		t.Fatalf("Mode() = %v, %v", m, err)
	}
	type reading struct {
		cpuUsec, mem, pids uint64
	}
	// The kernel's counters of each job's scope, as recorded; its task
	// count is its processes' (each a single thread).
	want := map[int64]reading{}
	for id, procs := range map[int64]int{101: 3, 102: 2} {
		cg := map[int64]string{101: "/machine.slice/libpod-" + podRootful + ".scope",
			102: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + podRootless + ".scope"}[id]
		want[id] = reading{recordedKey(t, sh.dir, cg, "cpu.stat", "usage_usec"), recordedValue(t, sh.dir, cg, "memory.current"), uint64(procs)}
		if want[id].cpuUsec == 0 || want[id].mem == 0 {
			t.Fatalf("job %d: recorded %+v; want CPU and memory used", id, want[id])
		}
	}
	if len(jobs) != 2 {
		t.Fatalf("found %d jobs; want 101 and 102", len(jobs))
	}
	for _, j := range jobs {
		c, err := l.Open(j.Cgroup)
		if err != nil {
			t.Fatalf("open job %d's cgroup %q: %v", j.ID, j.Cgroup, err)
		}
		cpu, err := c.CPU()
		if err != nil {
			t.Fatal(err)
		}
		mem, _, err := c.Memory()
		if err != nil {
			t.Fatal(err)
		}
		pids, _, err := c.PIDs()
		if err != nil {
			t.Fatal(err)
		}
		if got := (reading{uint64(cpu.Microseconds()), mem, pids}); got != want[j.ID] {
			t.Errorf("job %d: read %+v; want %+v", j.ID, got, want[j.ID])
		}
		if p, err := c.Populated(); !p || err != nil {
			t.Errorf("job %d: Populated() = %v, %v", j.ID, p, err)
		}
		if !strings.HasPrefix(c.Path(), root) {
			t.Errorf("job %d: opened %q, outside the fake host", j.ID, c.Path())
		}
		_ = c.Remove()
	}
}

// TestScanV1CgroupfsDrivers lays out a v1 host whose kubelet and podman
// use the cgroupfs driver/manager (kubepods/<qos>/pod<uid>/<id>,
// /libpod_parent/libpod-<id>), with the hierarchies under one root as on
// /sys/fs/cgroup: Scan walks the memory hierarchy.
func TestScanV1CgroupfsDrivers(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		writeUnder(t, root, rel, content)
	}
	const (
		k8s    = "5b1d7f0c3a9e8d2b4c6a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c"
		pause  = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
		podman = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
		uid    = "pod3c2b1a09-8f7e-4d6c-b5a4-392817160504"
	)
	for _, h := range []string{"memory", "pids", "cpuacct"} {
		write("cgroup/"+h+"/cgroup.procs", "1\n")
		write("cgroup/"+h+"/kubepods/burstable/"+uid+"/"+pause+"/cgroup.procs", "3001\n")
		write("cgroup/"+h+"/kubepods/burstable/"+uid+"/"+k8s+"/cgroup.procs", "3010\n")
		write("cgroup/"+h+"/libpod_parent/conmon/cgroup.procs", "3090\n")
		write("cgroup/"+h+"/libpod_parent/libpod-"+podman+"/cgroup.procs", "3101\n")
	}
	proc := func(pid int, comm, cmdline, environ string) {
		write(fmt.Sprintf("proc/%d/comm", pid), comm+"\n")
		write(fmt.Sprintf("proc/%d/cmdline", pid), cmdline)
		write(fmt.Sprintf("proc/%d/environ", pid), environ)
	}
	proc(1, "systemd", "/sbin/init\x00", "")
	proc(3001, "pause", "/pause\x00", "HOSTNAME=automation-job-77-abcde\x00")
	proc(3010, "ansible-runner", "/usr/bin/python3\x00/usr/local/bin/ansible-runner\x00worker\x00", "HOSTNAME=automation-job-77-abcde\x00")
	proc(3090, "conmon", "conmon\x00-c\x00"+podman+"\x00-n\x00ansible_runner_78\x00", "")
	proc(3101, "ansible-playboo", "/usr/bin/python3\x00/usr/local/bin/ansible-playbook\x00", "AWX_TOKEN=x\x00JOB_ID=78\x00")

	got := scanTree(t, root, DefaultRules())
	checkJobs(t, got, []Job{
		{ID: 77, Kind: KindKubernetes, Cgroup: "/kubepods/burstable/" + uid + "/" + k8s, ContainerID: k8s, PIDs: []int{3010}, Via: ViaPodName},
		{ID: 78, Kind: KindPodman, Cgroup: "/libpod_parent/libpod-" + podman, ContainerID: podman, PIDs: []int{3101}, Via: ViaConmon},
	})
}

func TestScanNoHierarchy(t *testing.T) {
	_, err := Scan(t.TempDir(), "/proc", DefaultRules())
	if err == nil || !strings.Contains(err.Error(), "no cgroup.procs") {
		t.Fatalf("Scan of an empty directory: %v; want an error naming the missing hierarchy", err)
	}
}

// writeUnder writes content to the file rel below root, making its
// parent dirs.
func writeUnder(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
