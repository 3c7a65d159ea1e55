package live

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/cgroup"
)

// requireCgroups fails the test, saying why, when this host does not let
// the collector make cgroups; under -short it skips instead.
func requireCgroups(t *testing.T) {
	t.Helper()
	l, err := cgroup.Detect("/")
	var c *cgroup.Cgroup
	if err == nil {
		c, err = l.Create(fmt.Sprintf("peakline-probe-%d", os.Getpid()))
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("cannot make cgroups here: %v", err)
		}
		t.Fatalf("cannot make cgroups here, so the live collector cannot be tested "+
			"(run as root on cgroup v2 with memory+pids or v1 cpuacct+memory+pids, or pass -short): %v", err)
	}
	if err := c.Remove(); err != nil {
		t.Fatalf("cannot remove a probe cgroup: %v", err)
	}
}

// TestCollectRealCommand runs a real job under Collect on this machine:
// python allocating 100 MiB and burning a CPU for a second, five forked
// sleeps, exit status 3.
func TestCollectRealCommand(t *testing.T) {
	requireCgroups(t)
	srv := newIngestServer(t)
	const allocBytes = 100 << 20
	// Two burners of 1s of CPU time each (not wall time: the host may be
	// busy), one holding 100 MiB.
	script := fmt.Sprintf(`echo "cgroup=$%s job=$%s start=$(date +%%s%%3N)"
burn='
import time, sys
b = b"x" * int(sys.argv[1])
while time.process_time() < 1.0:
    pass
'
python3 -c "$burn" %d &
python3 -c "$burn" 0 &
for i in 1 2 3 4 5; do sleep 1.5 & done
wait
times
exit 3`, EnvCgroup, EnvJobID, allocBytes)
	var stdout bytes.Buffer
	cfg := LiveConfig{
		Server:       srv.url(),
		JobID:        "real-1",
		Template:     "7",
		TemplateName: "deploy-web",
		SpoolDir:     t.TempDir(),
		Command:      []string{"sh", "-c", script},
		Stdout:       &stdout,
		Stderr:       os.Stderr,
		Logger:       testLogger(t),
	}
	code, err := collectLive(context.Background(), cfg, testTuning())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if code != 3 {
		t.Fatalf("exit code %d, want the command's 3", code)
	}
	// The template goes with the first batch (running) and the last
	// (failed: the command's exit code is not 0), not with every batch;
	// both say the job was measured in its own cgroup.
	srv.mu.Lock()
	infos := strings.Join(srv.infos, " ")
	srv.mu.Unlock()
	if infos != "7/deploy-web/running/cgroup 7/deploy-web/failed/cgroup" {
		t.Errorf("job info sent %q, want 7/deploy-web/running/cgroup then 7/deploy-web/failed/cgroup", infos)
	}

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	cg, job, _ := strings.Cut(strings.TrimPrefix(lines[0], "cgroup="), " job=")
	job, started, _ := strings.Cut(job, " start=")
	startMs, err := strconv.ParseInt(started, 10, 64)
	if err != nil {
		t.Fatalf("command printed %q, want its start time in unix ms", lines[0])
	}
	// The shell's `times`, last: the user and system CPU time of its
	// children, what the cgroup counts (python's own process_time leaves
	// out part of the kernel's work for the 100 MiB, which varies by host).
	burnt := childrenCPU(t, lines[len(lines)-1])
	if job != "real-1" || cg == "" {
		t.Fatalf("command saw %q, want its cgroup and job id real-1", lines[0])
	}
	if _, err := os.Stat(cg); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s still there after Collect: %v", cg, err)
	}

	peak := map[string]float64{}
	n := map[string]int{}
	got := srv.got()
	cpuSec := cpuSeconds(got, startMs, func(gotSample) bool { return true })
	for _, s := range got {
		peak[s.resource] = max(peak[s.resource], s.v)
		n[s.resource]++
		if s.counter != 0 || s.job != "real-1" {
			t.Fatalf("sample %+v: want job real-1, counter 0 (no job events)", s)
		}
	}
	t.Logf("samples %v; peaks: cpu %.1f%%, memory %.1f MiB, pids %.0f; CPU time from the samples %.2fs",
		n, peak["cpu"], peak["memory"]/(1<<20), peak["pids"], cpuSec)
	if peak["memory"] < allocBytes {
		t.Errorf("memory peak %.0f bytes, want ≥ the %d allocated", peak["memory"], allocBytes)
	}
	if peak["cpu"] <= 50 {
		load, _ := os.ReadFile("/proc/loadavg")
		t.Errorf("cpu peak %.1f%%, want > 50 while two pythons burn (load average %s)", peak["cpu"], bytes.TrimSpace(load))
	}
	if cpuSec < 0.9*burnt || cpuSec > 1.5*burnt {
		var pts []string
		for _, s := range got {
			if s.resource == ansible.ResourceCPU {
				pts = append(pts, fmt.Sprintf("+%dms %.1f%%", s.t-startMs, s.v))
			}
		}
		t.Errorf("the cpu samples add up to %.2fs of CPU, want about the %.2fs the command's processes used; cpu samples from the command's start: %s",
			cpuSec, burnt, strings.Join(pts, ", "))
	}
	if peak["pids"] < 8 {
		t.Errorf("pids peak %.0f, want ≥ 8 (sh, 2 pythons, 5 sleeps)", peak["pids"])
	}
	for _, r := range []string{"cpu", "memory", "pids"} {
		if n[r] < 4 {
			t.Errorf("%d %s samples in ~1.5s at 4 Hz, want ≥ 4", n[r], r)
		}
	}
}

// TestCollectAttach samples a cgroup somebody else made until its last
// process exits, and leaves the cgroup in place.
func TestCollectAttach(t *testing.T) {
	requireCgroups(t)
	l, err := cgroup.Detect("/")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := l.Create(fmt.Sprintf("peakline-attach-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	// The shell forks only once it is in the cgroup and reads a line.
	cmd := exec.Command("sh", "-c", "read go; sleep 1 & sleep 1; wait")
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cg.AddProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	_, _ = gate.Write([]byte("go\n"))
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()

	srv := newIngestServer(t)
	cfg := LiveConfig{Server: srv.url(), Attach: cg.Path(), JobID: "attached", SpoolDir: t.TempDir(), Logger: testLogger(t)}
	code, err := collectLive(context.Background(), cfg, testTuning())
	if code != 0 || err != nil {
		t.Fatalf("Collect --attach = %d, %v", code, err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Collect --attach returned while the cgroup still had processes")
	}
	if _, err := os.Stat(cg.Path()); err != nil {
		t.Fatalf("the attached cgroup was removed: %v", err)
	}
	maxPids := 0.0
	for _, s := range srv.got() {
		if s.resource == ansible.ResourcePids {
			maxPids = max(maxPids, s.v)
		}
	}
	if maxPids < 2 {
		t.Fatalf("pids peak %v, want ≥ 2 (sh and a sleep)", maxPids)
	}
	// An attached job has no status to tell, only how it was measured.
	srv.mu.Lock()
	infos := strings.Join(srv.infos, " ")
	srv.mu.Unlock()
	if infos != "///cgroup" {
		t.Errorf("job info sent %q, want one batch with measured cgroup only", infos)
	}
}

// cpuSeconds adds up the CPU time the cpu samples that keep stand for: each
// covers the time since the previous cpu sample.
// childrenCPU parses the second line of sh's `times` ("0m1.39s 0m1.73s":
// the children's user and system time) into seconds.
func childrenCPU(t *testing.T, line string) float64 {
	t.Helper()
	total := 0.0
	fields := strings.Fields(line)
	for _, f := range fields {
		m, sec, ok := strings.Cut(strings.TrimSuffix(f, "s"), "m")
		mins, err1 := strconv.ParseFloat(m, 64)
		secs, err2 := strconv.ParseFloat(sec, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("times printed %q, want the children's user and system time", line)
		}
		total += mins*60 + secs
	}
	if len(fields) != 2 || total < 1.8 {
		t.Fatalf("times printed %q: want two times adding up to at least the 2s burnt", line)
	}
	return total
}

// cpuSeconds adds up the CPU time of the kept CPU samples, each over the
// time since the previous one; the first sample's interval starts at
// firstFromMs (when the command started; 0: one 250 ms poll interval).
func cpuSeconds(samples []gotSample, firstFromMs int64, keep func(gotSample) bool) float64 {
	var cpu []gotSample
	for _, s := range samples {
		if s.resource == ansible.ResourceCPU {
			cpu = append(cpu, s)
		}
	}
	slices.SortFunc(cpu, func(a, b gotSample) int { return cmp.Compare(a.t, b.t) })
	sum := 0.0
	for i := range cpu {
		if !keep(cpu[i]) {
			continue
		}
		// The first sample covers the time from the command's start
		// (the sampler's baseline is read just before it), the others
		// the time since the last.
		intervalMs := 250.0
		if i == 0 && firstFromMs > 0 {
			intervalMs = float64(cpu[0].t - firstFromMs)
		}
		if i > 0 {
			intervalMs = float64(cpu[i].t - cpu[i-1].t)
		}
		sum += cpu[i].v / 100 * intervalMs / 1000
	}
	return sum
}

func TestCollectPolicyOffRunsUntouched(t *testing.T) {
	f := func(settings string, templates map[string]string, template string, wantCollect bool) {
		t.Helper()
		srv := newIngestServer(t)
		srv.settings = settings
		srv.template = templates
		var stdout bytes.Buffer
		cfg := LiveConfig{
			Server: srv.url(), JobID: "p", Template: template, SpoolDir: t.TempDir(),
			Command: []string{"sh", "-c", "echo \"[$" + EnvCgroup + "]\"; exit 7"},
			Stdout:  &stdout, Logger: testLogger(t),
		}
		tune := testTuning()
		tune.cgroupRoot = fakeV1Root(t)
		code, err := collectLive(context.Background(), cfg, tune)
		if code != 7 {
			t.Fatalf("settings %q template %q: exit %d, %v; want 7", settings, template, code, err)
		}
		collected := stdout.String() != "[]\n"
		if collected != wantCollect {
			t.Fatalf("settings %q template %q: collected %v (output %q), want %v", settings, template, collected, stdout.String(), wantCollect)
		}
		if !wantCollect && len(srv.got()) != 0 {
			t.Fatalf("settings %q template %q: samples sent while collection is off", settings, template)
		}
	}
	f("off", nil, "", false)
	f("off", map[string]string{"7": "on"}, "7", false)
	f("all", nil, "", true)
	f("all", map[string]string{"7": "off"}, "7", false)
	f("opt-in", nil, "7", false)
	f("opt-in", map[string]string{"7": "on"}, "7", true)
	f("", nil, "", true) // no policy endpoint: collect and spool
}

func TestDecideCollection(t *testing.T) {
	f := func(system, template string, want bool) {
		t.Helper()
		if got, reason := (Policy{System: system, Template: template}).Decide(); got != want {
			t.Fatalf("Policy{%q, %q}.Decide() = %v (%s), want %v", system, template, got, reason, want)
		}
	}
	f("off", "on", false)
	f("off", "default", false)
	f("all", "default", true)
	f("all", "on", true)
	f("all", "off", false)
	f("opt-in", "default", false)
	f("opt-in", "off", false)
	f("opt-in", "on", true)
	f("surprise", "default", true)
}

func TestCollectKeepsExitCodeWithoutCgroups(t *testing.T) {
	srv := newIngestServer(t)
	tune := testTuning()
	tune.cgroupRoot = t.TempDir() // no mount table: no cgroups
	cfg := LiveConfig{Server: srv.url(), SpoolDir: t.TempDir(), Command: []string{"sh", "-c", "exit 5"}, Logger: testLogger(t)}
	code, err := collectLive(context.Background(), cfg, tune)
	if code != 5 || err == nil {
		t.Fatalf("Collect = %d, %v; want 5 and the cgroup error", code, err)
	}
	cfg.Command = []string{"/nonexistent/command"}
	if code, err := collectLive(context.Background(), cfg, tune); code != 127 || err == nil {
		t.Fatalf("missing command: %d, %v; want 127 and an error", code, err)
	}
	cfg.Command = nil
	if _, err := collectLive(context.Background(), cfg, tune); !errors.Is(err, ErrNoCommand) {
		t.Fatalf("no command: %v, want ErrNoCommand", err)
	}
}

// fakeV1Root lays out a fake v1 host whose cgroups accept anything: the
// command runs through the gate and the sampler reads zeros.
func fakeV1Root(t *testing.T) string {
	root := t.TempDir()
	write := func(rel, content string) {
		p := root + "/" + rel
		if err := os.MkdirAll(p[:strings.LastIndex(p, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/mountinfo", `1 0 0:1 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
2 0 0:2 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
3 0 0:3 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
`)
	write("proc/self/cgroup", "3:pids:/\n2:memory:/\n1:cpuacct:/\n")
	for _, d := range []string{"cpuacct", "memory", "pids"} {
		write("sys/fs/cgroup/"+d+"/cgroup.procs", "")
	}
	return root
}

func TestStaleCgroup(t *testing.T) {
	f := func(name string, want bool) {
		t.Helper()
		if got := staleCgroup(name); got != want {
			t.Fatalf("staleCgroup(%q) = %v, want %v", name, got, want)
		}
	}
	f(fmt.Sprintf("peakline-%d-1796013164799", os.Getpid()), false) // alive
	f("peakline-1-1796013164799", false)                            // init is alive
	f("peakline-2147483647-1796013164799", true)                    // no such process
	f("peakline-attach-12", false)
	f("system.slice", false)
}

// stepScheduleClock is the process's clocks with the wall clock stepped
// at set monotonic times after the first reading: off(mono) is added to
// the wall clock.
type stepScheduleClock struct {
	mu    sync.Mutex
	start time.Time // the first reading; zero before it
	off   func(mono time.Duration) time.Duration
}

func (c *stepScheduleClock) Read() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() {
		c.start = time.Now()
	}
	mono := time.Since(c.start)
	return c.start.Add(mono + c.off(mono)).Round(0), mono
}

// TestCollectClockSteps runs a real command under Collect while the wall
// clock steps forward an hour 1s in, back 30 minutes 2s in and forward an
// hour 3s in. The timeline re-anchors at the forward steps and keeps its
// spacing across the backward one, so every sample of a series is at
// start + monotonic time + 0, 1h, then 1h30m from the step at 3s on
// (exact milliseconds: nothing restamped or squashed), each stretch holds
// samples, and no two samples of a series share or invert a time.
func TestCollectClockSteps(t *testing.T) {
	requireCgroups(t)
	srv := newIngestServer(t)
	const s1, s2, s3 = time.Second, 2 * time.Second, 3 * time.Second
	clock := &stepScheduleClock{off: func(mono time.Duration) time.Duration {
		switch {
		case mono < s1:
			return 0
		case mono < s2:
			return time.Hour
		case mono < s3:
			return 30 * time.Minute
		}
		return 90 * time.Minute
	}}
	tune := testTuning()
	tune.clock = clock
	cfg := LiveConfig{
		Server: srv.url(), JobID: "steps-1", SpoolDir: t.TempDir(),
		Command: []string{"sleep", "4.5"}, Stdout: io.Discard, Stderr: os.Stderr, Logger: testLogger(t),
	}
	if code, err := collectLive(context.Background(), cfg, tune); err != nil || code != 0 {
		t.Fatalf("Collect: exit %d, %v", code, err)
	}
	clock.mu.Lock()
	startMs := clock.start.UnixMilli()
	clock.mu.Unlock()
	// The stretches by their offset from start + monotonic time, and the
	// monotonic times each covers (its first sample may come a poll
	// later: a sample at mono m ≥ 1s is stamped with the hour).
	stretches := []struct {
		off      time.Duration
		from, to time.Duration
	}{{0, 0, s1}, {time.Hour, s1, s3}, {90 * time.Minute, s3, time.Hour}}
	byRes := map[string][]int64{}
	for _, s := range srv.got() {
		byRes[s.resource] = append(byRes[s.resource], s.t)
	}
	for _, res := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
		ts := byRes[res]
		per := make([]int, len(stretches))
		for i, at := range ts {
			if i > 0 && at <= ts[i-1] {
				t.Fatalf("%s: sample %d at +%dms does not follow +%dms", res, i, at-startMs, ts[i-1]-startMs)
			}
			rel := time.Duration(at-startMs) * time.Millisecond
			k := -1
			for j, st := range stretches {
				if mono := rel - st.off; mono >= st.from && mono < st.to {
					k = j
				}
			}
			if k < 0 {
				t.Fatalf("%s: sample %d at +%v is on no stretch (start + monotonic time + 0, 1h or 1h30m); all: %v", res, i, rel, offsets(ts, startMs))
			}
			per[k]++
		}
		for j, n := range per {
			if n == 0 {
				t.Errorf("%s: no sample in stretch %d (offset %v); all: %v", res, j, stretches[j].off, offsets(ts, startMs))
			}
		}
	}
}
