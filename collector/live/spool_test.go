package live

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// spooled lists the spool's batch files.
func spooled(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runPipeline starts a live pipeline over fake stats, sampling every 10ms.
func runPipeline(t *testing.T, srv *ingestServer, spoolDir, job string, maxQueue int) *livePipeline {
	cfg := &LiveConfig{
		Server: srv.url(), SpoolDir: spoolDir, MaxQueueSamples: maxQueue,
		CPUInterval: 10 * time.Millisecond, MemoryInterval: 10 * time.Millisecond, PIDsInterval: 10 * time.Millisecond,
	}
	tune := testTuning()
	tune.flushEvery = 20 * time.Millisecond
	stats := &fakeStats{start: time.Now(), cpuShare: 0.5, mem: 1 << 20, pids: 2}
	p := newLivePipeline(cfg, tune, stats, nil, &liveJobID{id: job}, testLogger(t))
	p.start()
	return p
}

// TestSpoolServerDownAndBack takes the server through 503s and refused
// connections while a job runs, and down again at its end; a second run
// (a restart) resends the spool. Every sample must arrive exactly once.
func TestSpoolServerDownAndBack(t *testing.T) {
	srv := newIngestServer(t)
	dir := t.TempDir()
	p := runPipeline(t, srv, dir, "job-a", 30)
	nGot := func() int { return len(srv.got()) }

	waitFor(t, "samples while the server is up", func() bool { return nGot() >= 30 })
	srv.setState("503")
	waitFor(t, "503 answers", func() bool { return srv.answered("503") >= 3 })
	// A 503 was answered, so every earlier POST got its answer: going down
	// now cannot lose an acknowledgement.
	srv.setState("down")
	waitFor(t, "batches spooled to disk while the server is down", func() bool { return len(spooled(t, dir)) >= 3 })
	srv.setState("up")
	waitFor(t, "the backlog to drain", func() bool { return len(spooled(t, dir)) == 0 && p.session.PendingSamples() < 10 })
	srv.setState("503")
	waitFor(t, "503 answers", func() bool { return srv.answered("503") >= 6 })
	srv.setState("down")
	p.stop()
	takenA := p.session.Samples()
	if len(spooled(t, dir)) == 0 {
		t.Fatal("nothing spooled although the server was down at the end")
	}
	if got := nGot(); got >= takenA {
		t.Fatalf("server has %d of %d samples although it was down at the end", got, takenA)
	}

	// The restart: the next collection resends the spool first.
	srv.setState("up")
	p2 := runPipeline(t, srv, dir, "job-b", 30)
	waitFor(t, "the spool to be resent", func() bool { return len(spooled(t, dir)) == 0 })
	p2.stop()
	takenB := p2.session.Samples()

	got := srv.got()
	type key struct {
		job, resource string
		t             int64
	}
	distinct := map[key]int{}
	perJob := map[string]int{}
	for _, s := range got {
		distinct[key{s.job, s.resource, s.t}]++
		perJob[s.job]++
	}
	for k, n := range distinct {
		if n != 1 {
			t.Errorf("sample %+v arrived %d times", k, n)
		}
	}
	t.Logf("job-a: %d taken, %d arrived; job-b: %d taken, %d arrived; %d distinct; answers %v",
		takenA, perJob["job-a"], takenB, perJob["job-b"], len(distinct), srv.posts)
	if perJob["job-a"] != takenA || perJob["job-b"] != takenB || len(got) != takenA+takenB || len(distinct) != len(got) {
		t.Fatalf("arrived job-a %d/%d, job-b %d/%d, total %d, distinct %d; want every sample exactly once",
			perJob["job-a"], takenA, perJob["job-b"], takenB, len(got), len(distinct))
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("spool not empty after the resend: %v", left)
	}
}
