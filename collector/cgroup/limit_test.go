package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// On the v2 tree recorded on a real kernel, the container's memory.max
// (512 MiB) is its limit, the pod above says max, and memory.events has
// no kill; a kill written there is read back.
func TestMemoryLimitV2Recorded(t *testing.T) {
	src, err := filepath.Abs("../discover/testdata/v2-real/cgroup")
	must(t, err)
	root := t.TempDir()
	must(t, os.CopyFS(root, os.DirFS(src)))
	job := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d1c9a3e_5b2f_4e6a_9c8d_1f2e3a4b5c6d.slice/" +
		"cri-containerd-a4e37b742dfe146af4f403403755c01f9a4deffb1e7e28b80123b74756362e56.scope"
	l, err := DetectAt(root, "/proc")
	must(t, err)
	cg, err := l.Open("/" + job)
	must(t, err)
	if lim, err := cg.MemoryLimit(); lim != 512<<20 || err != nil {
		t.Errorf("MemoryLimit() = %d, %v; want %d", lim, err, 512<<20)
	}
	if n, ok, err := cg.OOMKills(); n != 0 || !ok || err != nil {
		t.Errorf("OOMKills() = %d, %v, %v; want 0, true", n, ok, err)
	}
	// A lower limit above the container wins; a kill is counted.
	must(t, os.WriteFile(filepath.Join(root, filepath.Dir(job), "memory.max"), []byte("268435456\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, job, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644))
	if lim, err := cg.MemoryLimit(); lim != 256<<20 || err != nil {
		t.Errorf("MemoryLimit() = %d, %v; want %d", lim, err, 256<<20)
	}
	if n, ok, err := cg.OOMKills(); n != 2 || !ok || err != nil {
		t.Errorf("OOMKills() = %d, %v, %v; want 2, true", n, ok, err)
	}
	must(t, os.WriteFile(filepath.Join(root, job, "memory.events"), []byte("oom_kill x\n"), 0o644))
	if _, _, err := cg.OOMKills(); err == nil {
		t.Error("a bad oom_kill parsed")
	}
}

// On this machine: a cgroup limited to 64 MiB reports the limit, and a
// process that touches 256 MiB in it is killed and counted.
func TestOOMKillReal(t *testing.T) {
	l, err := Detect("/")
	if err == nil {
		_, err = l.Mode()
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("no usable cgroups here: %v", err)
		}
		t.Fatalf("this host has no usable cgroups: %v", err)
	}
	c, err := l.Create(fmt.Sprintf("peakline-oom-test-%d", os.Getpid()))
	if err != nil {
		if testing.Short() {
			t.Skipf("cannot create a cgroup: %v", err)
		}
		t.Fatalf("cannot create a cgroup (run the tests as root): %v", err)
	}
	defer c.Remove()
	must(t, c.SetMemoryLimit(64<<20))
	if lim, err := c.MemoryLimit(); lim != 64<<20 || err != nil {
		t.Fatalf("MemoryLimit() = %d, %v; want %d", lim, err, 64<<20)
	}
	if n, ok, err := c.OOMKills(); n != 0 || !ok || err != nil {
		t.Fatalf("OOMKills() before = %d, %v, %v", n, ok, err)
	}
	// The shell joins the cgroup, then execs python.
	cmd := exec.Command("sh", "-c", `echo $$ >"$1"; exec python3 -c 'import time; b = bytearray(256 << 20); time.sleep(5)'`, "sh", filepath.Join(c.Path(), "cgroup.procs"))
	runErr := cmd.Run()
	if runErr == nil {
		t.Fatal("the process outgrew the limit and lived")
	}
	if n, ok, err := c.OOMKills(); n != 1 || !ok || err != nil {
		t.Errorf("OOMKills() = %d, %v, %v; want 1, true (the process ended with %v)", n, ok, err, runErr)
	}
}

// On v1 a kill counts in the cgroup of the process killed: a job found
// at its scope sums the kills of the container cgroups below it.
func TestOOMKillsV1Below(t *testing.T) {
	root := t.TempDir()
	job := "machine.slice/libpod-1.scope"
	for _, d := range []string{"memory", "pids", "cpuacct", "memory/" + job, "memory/" + job + "/container", "pids/" + job, "cpuacct/" + job} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		must(t, os.WriteFile(filepath.Join(root, d, "cgroup.procs"), nil, 0o644))
	}
	ctl := func(dir string, kills int) {
		must(t, os.WriteFile(filepath.Join(root, "memory", dir, "memory.oom_control"), []byte(fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", kills)), 0o644))
	}
	ctl(job, 1)
	ctl(job+"/container", 2)
	must(t, os.WriteFile(filepath.Join(root, "memory", job, "memory.limit_in_bytes"), []byte("9223372036854771712\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "memory", "machine.slice", "memory.limit_in_bytes"), []byte("1073741824\n"), 0o644))
	l, err := DetectAt(root, "/proc")
	must(t, err)
	cg, err := l.Open("/" + job)
	must(t, err)
	if n, ok, err := cg.OOMKills(); n != 3 || !ok || err != nil {
		t.Errorf("OOMKills() = %d, %v, %v; want 3 (1 here, 2 below)", n, ok, err)
	}
	// No limit of its own ("none" is a huge number on v1): the slice's.
	if lim, err := cg.MemoryLimit(); lim != 1<<30 || err != nil {
		t.Errorf("MemoryLimit() = %d, %v; want the slice's %d", lim, err, 1<<30)
	}
}
