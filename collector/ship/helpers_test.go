package ship

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// realTree is a tree written by the real tools, in the testdata shared by
// the repository's tests.
func realTree(name string) string { return filepath.Join("..", "..", "testdata", "ansible", name) }

// readOne reads the one job at path.
func readOne(t *testing.T, path string) *ansible.Job {
	t.Helper()
	jobs, err := ansible.Read(path, ansible.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("got %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}

// rawPoint is one sample with the task it is attributed to.
type rawPoint struct {
	resource string
	counter  int64
	ms       int64
	value    float64 // stored unit
}

// jobPoints lists job's samples in series order.
func jobPoints(job *ansible.Job) []rawPoint {
	var out []rawPoint
	for _, s := range job.Series {
		for i := range s.Ts {
			out = append(out, rawPoint{s.Resource, s.Counter, s.Ts[i], s.Vs[i]})
		}
	}
	return out
}

// spooled lists the spool's batch files.
func spooled(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+spoolExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFor polls cond until it holds, failing after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
