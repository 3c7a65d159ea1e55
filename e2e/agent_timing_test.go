package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/awx/awxtest"
)

// BenchmarkAgentIdleJobs measures what `peakline agent` costs per job: it
// runs the agent binary at 4 Hz (--poll-interval 250ms, discovery every
// 250ms, AWX asked about each job at most once a second) against n idle
// AWX jobs, each a process named ansible-playbook with JOB_ID in its
// environment, asleep in a cgroup laid out as podman's
// (machine.slice/libpod-<id>.scope/container), for a fixed time, and
// reports the agent process's own CPU time (utime+stime from
// /proc/<pid>/stat) per job-hour. The AWX API is the fake of
// collector/awx/awxtest (running jobs, no events) and the server an
// ingest sink in this process, so neither counts; the samples, having no
// events to wait for, are sent after 5s (--awx-settle), so batching and
// sending count.
//
//	go test -run '^$' -bench BenchmarkAgentIdleJobs -benchtime 1x .
//
// PEAKLINE_AGENT_BENCH_SECONDS sets the time per run (default 30).
func BenchmarkAgentIdleJobs(b *testing.B) {
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		b.Skip("lays out cgroup v1 hierarchies; this host has none at /sys/fs/cgroup/memory")
	}
	secs := 30
	if v := os.Getenv("PEAKLINE_AGENT_BENCH_SECONDS"); v != "" {
		var err error
		if secs, err = strconv.Atoi(v); err != nil || secs <= 0 {
			b.Fatalf("PEAKLINE_AGENT_BENCH_SECONDS=%q: want a positive number of seconds", v)
		}
	}
	for _, jobs := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("jobs=%d/poll=250ms", jobs), func(b *testing.B) {
			for range b.N {
				cpu, batches := runIdleAgent(b, jobs, time.Duration(secs)*time.Second)
				if batches == 0 {
					b.Fatal("the agent sent no batch: it sampled nothing")
				}
				perJobHour := cpu.Seconds() / float64(jobs) / (float64(secs) / 3600)
				b.ReportMetric(perJobHour, "cpu-s/job-hour")
				b.ReportMetric(cpu.Seconds()/float64(secs)*100, "agent-cpu-%")
			}
		})
	}
}

var benchSeq atomic.Int64

// runIdleAgent runs the agent for d against jobs idle jobs and returns its
// CPU time and the batches the sink took.
func runIdleAgent(b *testing.B, jobs int, d time.Duration) (time.Duration, int64) {
	b.Helper()
	var batches atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/api/v1/ingest" {
			batches.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	}))
	defer sink.Close()
	fake := awxtest.NewServer(awxtest.Options{Token: awxToken})
	defer fake.Close()
	dir := b.TempDir()
	tokenFile := filepath.Join(dir, "awx-token")
	must2(b, os.WriteFile(tokenFile, []byte(awxToken), 0o600))
	sleeper := idleSleeper(b, dir)

	parent := fmt.Sprintf("peakline-agent-bench-%d-%d", os.Getpid(), benchSeq.Add(1))
	hier := e2eHierarchies()
	defer removeCgroupTree(hier, parent)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := range jobs {
		id := int64(500_000 + i)
		fake.AddJob(awxtest.Job{ID: id, Name: "idle", Status: "running", TemplateID: 1, TemplateName: "idle"}, "")
		rel := "machine.slice/libpod-" + randomHex(32) + ".scope/container"
		cmd := idleCommand(sleeper, id, 3600, makeJobCgroup(b, hier, parent, rel))
		must2(b, cmd.Start())
		procs = append(procs, cmd)
	}

	agent := exec.Command(peaklineBin(b), "agent", "--server", sink.URL, "--awx-url", fake.URL, "--awx-token-file", tokenFile,
		"--spool-dir", filepath.Join(dir, "spool"), "--poll-interval", "250ms", "--awx-poll-interval", "1s",
		// Idle jobs write no events: let their samples go after 5s, so
		// that sending them is counted too.
		"--awx-settle", "5s",
		"--scope", "podman:"+parent+`:^libpod-([0-9a-f]{64})\.scope$`)
	log := &lockedBuffer{}
	agent.Stdout, agent.Stderr = log, log
	must2(b, agent.Start())
	defer func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	}()
	// Measure from the moment every job is sampled.
	sampling := regexp.MustCompile(`msg="sampling job"`)
	deadline := time.Now().Add(30 * time.Second)
	for len(sampling.FindAllString(log.String(), -1)) < jobs {
		if time.Now().After(deadline) {
			b.Fatalf("the agent sampled %d of %d jobs after 30s:\n%s", len(sampling.FindAllString(log.String(), -1)), jobs, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	start, err := procCPU(agent.Process.Pid)
	must2(b, err)
	b.ResetTimer()
	time.Sleep(d)
	end, err := procCPU(agent.Process.Pid)
	must2(b, err)
	b.StopTimer()
	_ = agent.Process.Signal(syscall.SIGTERM)
	return end - start, batches.Load()
}

// procCPU is a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields after the comm: state is 0, utime 11, stime 12 (clock ticks).
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat: %q", pid, s)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func must2(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
