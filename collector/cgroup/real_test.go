package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRealHost creates a cgroup on this machine, moves a process in, reads
// its counters and removes it. It fails (never skips silently) when the host
// does not allow that, except under -short.
func TestRealHost(t *testing.T) {
	l, err := Detect("/")
	if err == nil {
		_, err = l.Mode()
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("no usable cgroups here: %v", err)
		}
		t.Fatalf("this host has no usable cgroups (need root and cgroup v2 with memory+pids, or v1 cpuacct+memory+pids): %v", err)
	}
	c, err := l.Create(fmt.Sprintf("peakline-test-%d", os.Getpid()))
	if err != nil {
		if testing.Short() {
			t.Skipf("cannot create a cgroup: %v", err)
		}
		t.Fatalf("cannot create a cgroup (run the tests as root): %v", err)
	}
	defer c.Remove()

	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	procs, err := c.Procs()
	if err != nil || len(procs) != 1 || procs[0] != cmd.Process.Pid {
		t.Fatalf("Procs() = %v, %v; want [%d]", procs, err, cmd.Process.Pid)
	}
	if p, err := c.Populated(); !p || err != nil {
		t.Fatalf("Populated() = %v, %v", p, err)
	}
	if _, err := c.CPU(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := c.PIDs(); n != 1 || err != nil {
		t.Fatalf("PIDs() = %d, %v", n, err)
	}
	if _, _, err := c.Memory(); err != nil {
		t.Fatal(err)
	}
	self, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cgroup"))
	if !strings.Contains(string(self), filepath.Base(c.Path())) {
		t.Fatalf("/proc/PID/cgroup does not name the new cgroup:\n%s", self)
	}

	// Remove with the process still inside moves it home.
	dirs := c.Dirs()
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists: %v", d, err)
		}
	}
}
