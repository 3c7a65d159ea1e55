package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/peakline/peakline/bench"
)

// TestCrashCycles kills the real peakline binary with SIGKILL ten times
// under JSON and remote-write ingest from four writers, restarts it on the
// same data dir, and requires every acknowledged sample back exactly once
// with its value, through the Prometheus API and the tasks API. The long
// run is `peakline bench crash --cycles 100` (docs/BENCHMARKS.md).
func TestCrashCycles(t *testing.T) {
	cycles := 10
	if testing.Short() {
		cycles = 3
	}
	res, err := bench.RunCrash(context.Background(), bench.CrashConfig{
		Binary: peaklineBin(t), DataDir: t.TempDir(), Cycles: cycles,
		JSONWriters: 2, RemoteWriters: 2, Seed: 1,
		MinUptime: 200 * time.Millisecond, MaxUptime: 800 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycles %d, acknowledged %d, in doubt stored %d / dropped %d, restart p50 %s max %s",
		res.Cycles, res.Acked, res.InDoubtStored, res.InDoubtDropped, res.RestartPercentile(0.5), res.RestartPercentile(1))
	if !res.OK() {
		t.Fatalf("lost %d, duplicated %d, wrong %d, never sent %d, tasks API mismatches %d:\n%v",
			res.Lost, res.Duplicated, res.WrongValues, res.Phantoms, res.TaskMismatches, res.Problems)
	}
	if res.Cycles != cycles || len(res.Restarts) != cycles {
		t.Fatalf("ran %d cycles with %d restarts, want %d", res.Cycles, len(res.Restarts), cycles)
	}
	if res.Acked == 0 {
		t.Fatal("no sample was acknowledged")
	}
}
