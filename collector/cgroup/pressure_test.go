package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePSI(t *testing.T) {
	f := func(in string, want PSI) {
		t.Helper()
		got, err := ParsePSI([]byte(in))
		if err != nil {
			t.Fatalf("ParsePSI(%q): %v", in, err)
		}
		if got != want {
			t.Fatalf("ParsePSI(%q) = %+v, want %+v", in, got, want)
		}
	}
	// cgroup cpu.pressure of a 6.x kernel.
	f("some avg10=0.00 avg60=0.00 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=678\n",
		PSI{Some: 12345 * time.Microsecond, Full: 678 * time.Microsecond, HasFull: true})
	// /proc/pressure/cpu before 5.13: no full line.
	f("some avg10=96.10 avg60=93.52 avg300=88.51 total=1227256153\n", PSI{Some: 1227256153 * time.Microsecond})
	// Largest total a u64 of µs holds in a Duration is far beyond; a big real one.
	f("some avg10=1.00 avg60=2.00 avg300=3.00 total=9000000000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0",
		PSI{Some: 9000000000000 * time.Microsecond, HasFull: true})

	bad := func(in, wantMsg string) {
		t.Helper()
		_, err := ParsePSI([]byte(in))
		if err == nil || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("ParsePSI(%q) error = %v, want one containing %q", in, err, wantMsg)
		}
	}
	bad("", `no "some" line`)
	bad("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", `no "some" line`)
	bad("some avg10=0.00 avg60=0.00 avg300=0.00\n", "no total=")
	bad("some avg10=0.00 avg60=0.00 avg300=0.00 total=-3\n", "invalid syntax")
}

func TestReadPSIMissing(t *testing.T) {
	_, err := ReadPSI(filepath.Join(t.TempDir(), "cpu.pressure"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadPSI of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestReadThrottled(t *testing.T) {
	dir := t.TempDir()
	f := func(content string, want time.Duration, wantOK bool) {
		t.Helper()
		file := filepath.Join(dir, "cpu.stat")
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReadThrottled(file)
		if err != nil || got != want || ok != wantOK {
			t.Fatalf("ReadThrottled(%q) = %v, %v, %v; want %v, %v", content, got, ok, err, want, wantOK)
		}
	}
	// v2 cpu.stat with the cpu controller enabled.
	f("usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 10\nnr_throttled 3\nthrottled_usec 2500\nnr_bursts 0\nburst_usec 0\n",
		2500*time.Microsecond, true)
	// v1 cpu.stat: throttled_time in ns.
	f("nr_periods 10\nnr_throttled 3\nthrottled_time 7000000\n", 7*time.Millisecond, true)
	// v2 cpu.stat without the cpu controller: usage only.
	f("usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\n", 0, false)

	if _, ok, err := ReadThrottled(filepath.Join(dir, "none", "cpu.stat")); ok || err != nil {
		t.Fatalf("ReadThrottled of a missing file = %v, %v; want absent, no error", ok, err)
	}
}

func TestReadLoadPerCPU(t *testing.T) {
	file := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(file, []byte("12.13 10.30 7.11 8/207 1485\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLoadPerCPU(file, 2)
	if err != nil || got != 12.13/2 {
		t.Fatalf("ReadLoadPerCPU = %v, %v; want %v", got, err, 12.13/2)
	}
}

// TestPressureV2 reads a v2 job cgroup laid out with real-format files.
func TestPressureV2(t *testing.T) {
	h := newV2(t, "cpuset cpu io memory pids", "/")
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Create("job")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	// A kernel without PSI (or psi=0) has no pressure files: nothing
	// but the node's load is read.
	h.write("proc/loadavg", "3.00 2.00 1.00 1/100 42\n")
	p, err := c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	if p.HasCPUStall || p.HasMemoryStall || p.HasThrottled || p.HasNodeCPUStall || !p.HasNodeLoad {
		t.Fatalf("without PSI files: %+v", p)
	}

	h.write("sys/fs/cgroup/job/cpu.pressure", "some avg10=1.00 avg60=0.50 avg300=0.10 total=250000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=100000\n")
	h.write("sys/fs/cgroup/job/memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=4000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n")
	h.write("sys/fs/cgroup/job/cpu.stat", "usage_usec 900000\nnr_periods 4\nnr_throttled 2\nthrottled_usec 30000\n")
	h.write("proc/pressure/cpu", "some avg10=5.00 avg60=4.00 avg300=3.00 total=7000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	p, err = c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	want := Pressure{CPUStall: 250 * time.Millisecond, HasCPUStall: true, MemoryStall: 4 * time.Millisecond, HasMemoryStall: true,
		Throttled: 30 * time.Millisecond, HasThrottled: true, NodeCPUStall: 7 * time.Second, HasNodeCPUStall: true}
	if p != want {
		t.Fatalf("Pressure() = %+v\nwant %+v", p, want)
	}

	h.write("sys/fs/cgroup/job/cpu.pressure", "some avg10=1.00 total=oops\n")
	if _, err := c.Pressure(); err == nil || !strings.Contains(err.Error(), "cpu.pressure") {
		t.Fatalf("a bad cpu.pressure: err = %v, want one naming the file", err)
	}
}

// TestPressureV1 sums the run-queue waits of the job's threads and reads
// throttling from the creator's cpu cgroup.
func TestPressureV1(t *testing.T) {
	h := newHybrid(t)
	l, err := Detect(h.root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Create("job")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	h.write("sys/fs/cgroup/cpuacct/job/tasks", "100\n101\n")
	h.write("proc/100/schedstat", "5000000 2000000 10\n")
	h.write("proc/101/schedstat", "1000000 500000 3\n")
	h.write("sys/fs/cgroup/cpu/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 1500\n")
	h.write("proc/loadavg", "4.00 2.00 1.00 1/100 42\n")
	p, err := c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	if p.CPUStall != 2500*time.Microsecond || !p.HasCPUStall || p.CPURun != 6*time.Millisecond || !p.HasCPURun || p.HasMemoryStall || p.Throttled != 1500 || !p.HasThrottled {
		t.Fatalf("first read: %+v", p)
	}
	if p.HasNodeCPUStall || !p.HasNodeLoad || p.NodeLoad <= 0 {
		t.Fatalf("no /proc/pressure/cpu: want the load average, got %+v", p)
	}
	// 100 waited 1 ms more, 101 exited, 102 was born having waited 3 ms.
	h.write("sys/fs/cgroup/cpuacct/job/tasks", "100\n101\n102\n")
	h.write("proc/100/schedstat", "6000000 3000000 12\n")
	if err := os.Remove(h.path("proc/101/schedstat")); err != nil {
		t.Fatal(err)
	}
	h.write("proc/102/schedstat", "100 3000000 1\n")
	p, err = c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	if want := 2500*time.Microsecond + time.Millisecond + 3*time.Millisecond; p.CPUStall != want {
		t.Fatalf("second read: CPUStall = %v, want %v", p.CPUStall, want)
	}
	if want := 6*time.Millisecond + time.Millisecond + 100; p.CPURun != want {
		t.Fatalf("second read: CPURun = %v, want %v", p.CPURun, want)
	}

	// An opened cgroup's first read is a baseline: its threads' old waits
	// are not the job's.
	h.write("sys/fs/cgroup/cpuacct/job/cgroup.procs", "100\n")
	h.write("proc/100/cgroup", "8:pids:/job\n4:memory:/sandbox/s1/job\n2:cpuacct:/job\n1:cpu:/\n0::/\n")
	o, err := l.Open(h.path("sys/fs/cgroup/cpuacct/job"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := o.Pressure(); err != nil || p.CPUStall != 0 || !p.HasCPUStall {
		t.Fatalf("opened, first read: %+v, %v; want 0 stall", p, err)
	}
	h.write("proc/100/schedstat", "6000000 3500000 12\n")
	if p, err := o.Pressure(); err != nil || p.CPUStall != 500*time.Microsecond {
		t.Fatalf("opened, second read: %+v, %v; want 500µs", p, err)
	}
}

// TestRealNodePressure reads this host's /proc/pressure/cpu where the
// kernel has PSI, and checks the counter moves with time spent waiting.
func TestRealNodePressure(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/cpu"); err != nil {
		t.Skipf("this kernel has no PSI (%v); the load average is read instead", err)
	}
	a, err := ReadPSI("/proc/pressure/cpu")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadPSI("/proc/pressure/cpu")
	if err != nil {
		t.Fatal(err)
	}
	if b.Some < a.Some || a.Some <= 0 {
		t.Fatalf("/proc/pressure/cpu some total went %v → %v: want a positive counter that never goes back", a.Some, b.Some)
	}
	m, err := ReadPSI("/proc/pressure/memory")
	if err != nil || !m.HasFull {
		t.Fatalf("/proc/pressure/memory: %+v, %v; want some and full", m, err)
	}
}

// TestRealPressure creates a cgroup on this machine, runs two busy loops
// in it pinned to one CPU (so each waits while the other runs) and checks
// the job's CPU stall grows by about the time they waited. It fails
// (never skips silently) when the host allows no cgroups, except under
// -short.
func TestRealPressure(t *testing.T) {
	l, err := Detect("/")
	if err == nil {
		_, err = l.Mode()
	}
	var c *Cgroup
	if err == nil {
		c, err = l.Create(fmt.Sprintf("peakline-pressure-%d", os.Getpid()))
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("no cgroup to create here: %v", err)
		}
		t.Fatalf("cannot create a cgroup (run the tests as root): %v", err)
	}
	defer c.Remove()
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset (util-linux) is needed to make two loops share one CPU")
	}
	before, err := c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	if !before.HasCPUStall {
		t.Fatalf("Pressure() has no CPU stall on a %v host: %+v", c.Mode(), before)
	}
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && !before.HasNodeCPUStall {
		t.Fatalf("/proc/pressure/cpu exists but Pressure() has no node figure: %+v", before)
	}
	for range 2 {
		cmd := exec.Command(taskset, "-c", "0", "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		if err := c.AddProc(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Pressure(); err != nil { // v1: the threads' baseline
		t.Fatal(err)
	}
	start := time.Now()
	time.Sleep(time.Second)
	after, err := c.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	// Two loops on one CPU: at any moment one waits, so the job was
	// stalled nearly all the time (v2 some), or the waits sum to about
	// the wall time (v1). Other load on the host only adds waiting.
	got := after.CPUStall - before.CPUStall
	t.Logf("%v host: CPU stall grew %v in %v of wall time", c.Mode(), got, wall)
	if got < wall/3 {
		t.Errorf("two loops sharing one CPU for %v: CPU stall grew %v, want at least a third of that", wall, got)
	}
	if after.HasCPURun && after.CPURun-before.CPURun <= 0 {
		t.Errorf("v1: the loops' run time did not grow: %v → %v", before.CPURun, after.CPURun)
	}
}
