package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashConfig is a short run of the test binary acting as peakline serve
// (see main_test.go).
func crashConfig(t *testing.T, cycles int) CrashConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return CrashConfig{Binary: exe, DataDir: t.TempDir(), Cycles: cycles, JSONWriters: 1, RemoteWriters: 1,
		MinUptime: 150 * time.Millisecond, MaxUptime: 400 * time.Millisecond, Seed: 7}
}

// TestCrashKeepsAcknowledgedSamples: two kill -9 cycles lose, double and
// change nothing that was acknowledged.
func TestCrashKeepsAcknowledgedSamples(t *testing.T) {
	cfg := crashConfig(t, 2)
	res, err := RunCrash(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("acknowledged samples damaged: %+v", res)
	}
	if res.Cycles != 2 || len(res.Restarts) != 2 {
		t.Fatalf("ran %d cycles with %d restarts, want 2 and 2", res.Cycles, len(res.Restarts))
	}
	if res.Acked == 0 || res.Acked%3 != 0 {
		t.Fatalf("acknowledged %d samples, want a positive multiple of 3 resources", res.Acked)
	}
}

// TestCrashDetectsLoss: the harness's checks can fail. Removing the WAL
// while the server is down (nothing is compacted yet) loses every
// acknowledged sample, and the harness must count exactly those.
func TestCrashDetectsLoss(t *testing.T) {
	cfg := crashConfig(t, 1)
	cfg.BeforeRestart = func(_ int, dir string) error { return os.RemoveAll(filepath.Join(dir, "wal")) }
	res, err := RunCrash(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}
	if res.Lost != res.Acked || res.Duplicated != 0 || res.WrongValues != 0 || res.Phantoms != 0 {
		t.Fatalf("lost %d of %d acknowledged samples (duplicated %d, wrong %d, phantoms %d), want all lost and nothing else",
			res.Lost, res.Acked, res.Duplicated, res.WrongValues, res.Phantoms)
	}
	if res.TaskMismatches == 0 {
		t.Fatal("the tasks API check saw no difference after the WAL was removed")
	}
}

// TestCrashCommand: `bench crash` prints the figures of its run and exits
// 0 when nothing acknowledged was lost.
func TestCrashCommand(t *testing.T) {
	cmd := CrashCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--cycles", "1", "--json-writers", "1", "--remote-writers", "1", "--min-uptime", "150ms",
		"--max-uptime", "300ms", "--data", t.TempDir(), "--no-progress"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench crash: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	var acked int
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "acknowledged samples"); ok {
			acked, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if acked <= 0 || acked%3 != 0 {
		t.Fatalf("acknowledged samples %d, want a positive multiple of 3:\n%s", acked, out.String())
	}
	for _, want := range []string{"\ncycles                 1\n", "\nlost samples           0\n", "\nduplicated samples     0\n", "\nrestart time p50 ", "\nrestart time max "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
