package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// DetectAt reads the hierarchies from a directory, not from the mount
// table: a v1 tree (memory, pids, cpuacct) laid out here and a v2 one
// recorded on a real kernel, each with a cgroup that Open finds by its
// cgroup path.
func TestDetectAt(t *testing.T) {
	mk := func(t *testing.T, dirs ...string) string {
		t.Helper()
		root := t.TempDir()
		for _, d := range dirs {
			must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
			must(t, os.WriteFile(filepath.Join(root, d, "cgroup.procs"), nil, 0o644))
		}
		return root
	}
	t.Run("v1", func(t *testing.T) {
		job := "machine.slice/libpod-1.scope"
		root := mk(t, "memory", "pids", "cpuacct", "memory/"+job, "pids/"+job, "cpuacct/"+job)
		l, err := DetectAt(root, "/proc")
		must(t, err)
		if m, err := l.Mode(); m != ModeV1 || err != nil {
			t.Fatalf("mode %v %v, want v1", m, err)
		}
		cg, err := l.Open("/" + job)
		must(t, err)
		want := []string{filepath.Join(root, "memory", job), filepath.Join(root, "pids", job), filepath.Join(root, "cpuacct", job)}
		if got := cg.Dirs(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("dirs %v, want %v", got, want)
		}
		if _, err := l.Open("/machine.slice/libpod-2.scope"); err == nil {
			t.Fatal("opened a cgroup that does not exist")
		}
	})
	t.Run("v2", func(t *testing.T) {
		// The tree recorded on a real v2 kernel (make record-v2).
		root, err := filepath.Abs("../discover/testdata/v2-real/cgroup")
		must(t, err)
		job := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d1c9a3e_5b2f_4e6a_9c8d_1f2e3a4b5c6d.slice/" +
			"cri-containerd-a4e37b742dfe146af4f403403755c01f9a4deffb1e7e28b80123b74756362e56.scope"
		l, err := DetectAt(root, "/proc")
		must(t, err)
		if m, err := l.Mode(); m != ModeV2 || err != nil {
			t.Fatalf("mode %v %v, want v2", m, err)
		}
		cg, err := l.Open("/" + job)
		must(t, err)
		if got := cg.Dirs(); len(got) != 1 || got[0] != filepath.Join(root, job) {
			t.Fatalf("dirs %v", got)
		}
		if _, err := l.Open("/kubepods.slice/kubepods-burstable.slice/cri-containerd-0.scope"); err == nil {
			t.Fatal("opened a cgroup that does not exist")
		}
	})
	if _, err := DetectAt(t.TempDir(), "/proc"); err == nil {
		t.Fatal("an empty directory has a cgroup layout")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
