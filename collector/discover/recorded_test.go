package discover

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/cgroup"
)

// The trees under testdata/v2-real were recorded on a real cgroup v2 kernel
// (make record-v2; testdata/README.md): at its top, a podman-like and a
// Kubernetes-like job cgroup made with mkdir, a real job in each, the
// kernel's cgroup files of the whole path and the job processes' /proc
// files copied as they were; below it, the node shapes (podman,
// kubernetes, receptor) the scan and process-tree tests read.
const (
	realTree   = "testdata/v2-real"
	realPod    = "9544e7d455d3a931d58642f6c3581a3ac2ac888a33f0c13f9c9506f96d7758a3" // sha256 of "recorded-podman"
	realWorker = "a4e37b742dfe146af4f403403755c01f9a4deffb1e7e28b80123b74756362e56" // sha256 of "recorded-worker"
	realPodUID = "7d1c9a3e_5b2f_4e6a_9c8d_1f2e3a4b5c6d"
)

var (
	realPodScope = "/machine.slice/libpod-" + realPod + ".scope"
	realK8sScope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + realPodUID + ".slice/cri-containerd-" + realWorker + ".scope"
)

// recordedProcs reads a recorded cgroup.procs: the kernel's own list of
// the cgroup's processes, sorted.
func recordedProcs(t *testing.T, rel string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realTree, "cgroup", rel, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s/cgroup.procs: %v", rel, err)
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// TestScanRecordedV2 finds both recorded jobs: the podman one in crun's
// "container" sub-group of its scope, the Kubernetes one in its
// cri-containerd scope, each told by the JOB_ID of its shell, whose
// kernel comm is "ansible-playboo" (15 bytes), with every process the
// kernel lists in the cgroup.
func TestScanRecordedV2(t *testing.T) {
	pod, k8s := recordedProcs(t, realPodScope+"/container"), recordedProcs(t, realK8sScope)
	if len(pod) < 3 || len(k8s) < 3 {
		t.Fatalf("recorded processes %v and %v; want the shell, python3 and sleeps in each", pod, k8s)
	}
	checkJobs(t, scanTree(t, realTree, DefaultRules()), []Job{
		{ID: 301, Kind: KindPodman, Cgroup: realPodScope, ContainerID: realPod, PIDs: pod, Via: ViaEnviron},
		{ID: 302, Kind: KindKubernetes, Cgroup: realK8sScope, ContainerID: realWorker, PIDs: k8s, Via: ViaEnviron},
	})
}

// TestScanRecordedOpens opens each found job with collector/cgroup on the
// recorded tree and reads the kernel's counters through it: the values
// are the recorded files' own.
func TestScanRecordedOpens(t *testing.T) {
	root, err := filepath.Abs(filepath.Join(realTree, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := cgroup.DetectAt(root, filepath.Join(realTree, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(); m != cgroup.ModeV2 || err != nil {
		t.Fatalf("Mode() = %v, %v; want v2", m, err)
	}
	for _, j := range scanTree(t, realTree, DefaultRules()) {
		c, err := l.Open(j.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		cpu, err := c.CPU()
		if err != nil {
			t.Fatal(err)
		}
		if want := recordedKey(t, realTree, j.Cgroup, "cpu.stat", "usage_usec"); uint64(cpu.Microseconds()) != want {
			t.Errorf("job %d: CPU() = %v; want cpu.stat's usage_usec %d µs", j.ID, cpu, want)
		}
		cur, _, err := c.Memory()
		if want := recordedValue(t, realTree, j.Cgroup, "memory.current"); cur != want || err != nil {
			t.Errorf("job %d: Memory() current = %d, %v; want memory.current %d", j.ID, cur, err, want)
		}
		n, _, err := c.PIDs()
		if want := recordedValue(t, realTree, j.Cgroup, "pids.current"); n != want || err != nil {
			t.Errorf("job %d: PIDs() = %d, %v; want pids.current %d", j.ID, n, err, want)
		}
		if p, err := c.Populated(); !p || err != nil {
			t.Errorf("job %d: Populated() = %v, %v; want true", j.ID, p, err)
		}
	}
}

// recordedValue is a recorded single-number cgroup file of tree.
func recordedValue(t *testing.T, tree, cg, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tree, "cgroup", cg, name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s/%s: %v", cg, name, err)
	}
	return v
}

// recordedKey is key's value in a recorded flat-keyed cgroup file of tree.
func recordedKey(t *testing.T, tree, cg, name, key string) uint64 {
	t.Helper()
	for k, v := range recordedKeys(t, filepath.Join(tree, "cgroup", cg, name)) {
		if k == key {
			return v
		}
	}
	t.Fatalf("no %s in %s/%s", key, cg, name)
	return 0
}

// recordedKeys reads a flat-keyed file ("key value" lines) in its order.
func recordedKeys(t *testing.T, file string) func(func(string, uint64) bool) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return func(yield func(string, uint64) bool) {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, ok := strings.Cut(line, " ")
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || err != nil {
				t.Fatalf("%s: line %q is not \"key value\"", file, line)
			}
			if !yield(k, n) {
				return
			}
		}
	}
}

// shape is one recorded node shape, testdata/v2-real/<name> (make
// record-v2's shapes.py): its cgroup and proc trees and the pid the guest
// gave each of its processes, by role (its roles file).
type shape struct {
	t     *testing.T
	dir   string
	roles map[string]int
}

func loadShape(t *testing.T, name string) shape {
	t.Helper()
	dir := filepath.Join(realTree, name)
	b, err := os.ReadFile(filepath.Join(dir, "roles"))
	if err != nil {
		t.Fatal(err)
	}
	sh := shape{t: t, dir: dir, roles: map[string]int{}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		role, v, ok := strings.Cut(line, " ")
		pid, err := strconv.Atoi(v)
		if !ok || err != nil || pid <= 1 {
			t.Fatalf("%s/roles: line %q is not \"role pid\"", dir, line)
		}
		sh.roles[role] = pid
	}
	return sh
}

// pid is role's pid.
func (s shape) pid(role string) int {
	s.t.Helper()
	pid, ok := s.roles[role]
	if !ok {
		s.t.Fatalf("%s/roles has no %q", s.dir, role)
	}
	return pid
}

// pids are the roles' pids, ascending.
func (s shape) pids(roles ...string) []int {
	s.t.Helper()
	pids := []int{}
	for _, r := range roles {
		pids = append(pids, s.pid(r))
	}
	slices.Sort(pids)
	return pids
}

// digest is a recorded container's id: the sha256 of its label.
func digest(label string) string {
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:])
}

// TestShapesRecorded checks each recorded shape against itself: every
// process the kernel lists in a cgroup below the root is one the roles file
// names, each named process is listed exactly once, its /proc/PID/cgroup
// is the cgroup that lists it, and its proc files are there.
func TestShapesRecorded(t *testing.T) {
	for _, name := range []string{"podman", "kubernetes", "receptor"} {
		sh := loadShape(t, name)
		byPid := map[int]string{}
		for role, pid := range sh.roles {
			if other, ok := byPid[pid]; ok {
				t.Errorf("%s: roles %s and %s share pid %d", name, role, other, pid)
			}
			byPid[pid] = role
		}
		listed := map[int]string{}
		root := filepath.Join(sh.dir, "cgroup")
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" || filepath.Dir(p) == root {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			cg := "/" + filepath.ToSlash(must(filepath.Rel(root, filepath.Dir(p))))
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					return err
				}
				if _, ok := byPid[pid]; !ok {
					t.Errorf("%s: %s lists pid %d, which no role names", name, cg, pid)
				}
				if prev, ok := listed[pid]; ok {
					t.Errorf("%s: pid %d is in %s and %s", name, pid, prev, cg)
				}
				listed[pid] = cg
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for pid, role := range byPid {
			cg, ok := listed[pid]
			if !ok {
				t.Errorf("%s: %s (pid %d) is in no recorded cgroup", name, role, pid)
				continue
			}
			b, err := os.ReadFile(filepath.Join(sh.dir, "proc", strconv.Itoa(pid), "cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != "0::"+cg+"\n" {
				t.Errorf("%s: %s's /proc/%d/cgroup = %q; want 0::%s", name, role, pid, got, cg)
			}
			for _, f := range []string{"comm", "cmdline", "environ", "stat"} {
				if _, err := os.Stat(filepath.Join(sh.dir, "proc", strconv.Itoa(pid), f)); err != nil {
					t.Errorf("%s: %s: %v", name, role, err)
				}
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
