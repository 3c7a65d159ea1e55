package discover

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/cgroup"
)

// The tree under testdata/v2-real was recorded on a real cgroup v2 kernel
// (make record-v2; testdata/README.md): a podman-like and a Kubernetes-like
// job cgroup made with mkdir, a real job in each, the kernel's cgroup files
// of the whole path and the job processes' /proc files copied as they were.
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
		if want := recordedKey(t, j.Cgroup, "cpu.stat", "usage_usec"); uint64(cpu.Microseconds()) != want {
			t.Errorf("job %d: CPU() = %v; want cpu.stat's usage_usec %d µs", j.ID, cpu, want)
		}
		cur, _, err := c.Memory()
		if want := recordedValue(t, j.Cgroup, "memory.current"); cur != want || err != nil {
			t.Errorf("job %d: Memory() current = %d, %v; want memory.current %d", j.ID, cur, err, want)
		}
		n, _, err := c.PIDs()
		if want := recordedValue(t, j.Cgroup, "pids.current"); n != want || err != nil {
			t.Errorf("job %d: PIDs() = %d, %v; want pids.current %d", j.ID, n, err, want)
		}
		if p, err := c.Populated(); !p || err != nil {
			t.Errorf("job %d: Populated() = %v, %v; want true", j.ID, p, err)
		}
	}
}

// recordedValue is a recorded single-number cgroup file.
func recordedValue(t *testing.T, cg, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realTree, "cgroup", cg, name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s/%s: %v", cg, name, err)
	}
	return v
}

// recordedKey is key's value in a recorded flat-keyed cgroup file.
func recordedKey(t *testing.T, cg, name, key string) uint64 {
	t.Helper()
	for k, v := range recordedKeys(t, filepath.Join(realTree, "cgroup", cg, name)) {
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

// TestHandMadeTreesMatchRecordedFormats checks the hand-laid v2 trees,
// which hold the node shapes no recording has (rootless podman, conmon,
// several pods, receptor), against the recorded kernel's formats: each of
// their cpu.stat, memory.stat and memory.events has only keys the kernel
// writes, in the kernel's order, and each single-number file parses.
func TestHandMadeTreesMatchRecordedFormats(t *testing.T) {
	leaf := filepath.Join(realTree, "cgroup", realK8sScope)
	order := map[string]map[string]int{}
	for _, name := range []string{"cpu.stat", "memory.stat", "memory.events"} {
		order[name] = map[string]int{}
		i := 0
		for k := range recordedKeys(t, filepath.Join(leaf, name)) {
			order[name][k] = i
			i++
		}
	}
	checked := 0
	for _, tree := range []string{"testdata/podman-v2", "testdata/kubernetes-v2", "testdata/receptor-v2"} {
		err := filepath.WalkDir(filepath.Join(tree, "cgroup"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch name := d.Name(); name {
			case "cpu.stat", "memory.stat", "memory.events":
				last := -1
				for k := range recordedKeys(t, p) {
					i, ok := order[name][k]
					if !ok {
						t.Errorf("%s: key %q is not in the kernel's %s", p, k, name)
					} else if i < last {
						t.Errorf("%s: key %q is out of the kernel's order", p, k)
					}
					last = max(last, i)
				}
				checked++
			case "memory.current", "memory.peak", "pids.current", "pids.peak":
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if _, err := strconv.ParseUint(strings.TrimSuffix(string(b), "\n"), 10, 64); err != nil || !strings.HasSuffix(string(b), "\n") {
					t.Errorf("%s = %q; want a number and a newline, as the kernel writes", p, b)
				}
				checked++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no cgroup files found in the hand-laid trees")
	}
}
