package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/discover"
	"github.com/peakline/peakline/collector/ship"
)

// syncBuffer is a log the agent's goroutines write into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ingestSink is a Peakline server's ingest endpoint that keeps what it gets.
type ingestSink struct {
	mu      sync.Mutex
	samples map[string]map[string]int // job → resource → samples
	infos   map[string][]ship.JobInfo
}

func (s *ingestSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var b ship.Batch
	if err := json.NewDecoder(zr).Decode(&b); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples[b.JobID] == nil {
		s.samples[b.JobID] = map[string]int{}
	}
	for _, sr := range b.Series {
		s.samples[b.JobID][sr.Resource] += len(sr.Ts)
	}
	if b.JobInfo != (ship.JobInfo{}) {
		s.infos[b.JobID] = append(s.infos[b.JobID], b.JobInfo)
	}
	_, _ = w.Write([]byte("{}"))
}

func (s *ingestSink) resources(job string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.samples[job] {
		out[k] = v
	}
	return out
}

// TestRunSamplesAJob runs the agent in this process on a real cgroup laid
// out as podman's, holding a process named ansible-playbook with AWX's
// JOB_ID, against the fake AWX and an ingest sink: the job is sampled from
// its cgroup, sent with its AWX template and status and measured=cgroup,
// and done once its process is gone and AWX says it finished.
func TestRunSamplesAJob(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err != nil {
		t.Skip("needs the cgroup v1 memory, pids and cpuacct hierarchies at /sys/fs/cgroup (a v1/hybrid host)")
	}
	parent := fmt.Sprintf("peakline-agent-run-%d", os.Getpid())
	rel := "machine.slice/libpod-" + randomHex(32) + ".scope/container"
	var procs []string
	for _, c := range []string{"cpuacct", "memory", "pids"} {
		dir := filepath.Join("/sys/fs/cgroup", c, parent, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			if os.IsPermission(err) && testing.Short() {
				t.Skipf("cannot make cgroups here: %v", err)
			}
			t.Fatalf("make the job's cgroup (run as root, or pass -short to skip): %v", err)
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	t.Cleanup(func() {
		for _, c := range []string{"cpuacct", "memory", "pids"} {
			d := filepath.Join("/sys/fs/cgroup", c, parent, rel)
			for d != filepath.Join("/sys/fs/cgroup", c) {
				_ = os.Remove(d)
				d = filepath.Dir(d)
			}
		}
	})

	// A copy of sleep named ansible-playbook: discovery trusts its comm.
	dir := t.TempDir()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	playbook := filepath.Join(dir, "ansible-playbook")
	if err := os.WriteFile(playbook, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	const jobID = 4242
	fake := awxtest.NewServer(awxtest.Options{Token: "t0ken"})
	defer fake.Close()
	meta := awxtest.Job{ID: jobID, Name: "run test", Status: "running", TemplateID: 7, TemplateName: "run test", Playbook: "site.yml"}
	fake.AddJob(meta, "")
	// The first request fails: the follower logs it, in the job's words.
	fake.FailRequests(awxtest.Fault{Status: http.StatusServiceUnavailable}, 1)
	tokenFile := filepath.Join(dir, "awx-token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := &ingestSink{samples: map[string]map[string]int{}, infos: map[string][]ship.JobInfo{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()

	rules := discover.DefaultRules()
	rules.Scopes = []discover.ScopeRule{{Kind: discover.KindPodman, Top: parent, Name: `^libpod-([0-9a-f]{64})\.scope$`}}
	rules.ProcessTree = false
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() {
		runErr <- Run(ctx, Config{Server: srv.URL, AWXURL: fake.URL, AWXTokenFile: tokenFile, SpoolDir: t.TempDir(),
			PollInterval: 50 * time.Millisecond, AWXPollInterval: 100 * time.Millisecond, AWXSettle: time.Second,
			Rules: rules, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 15s; agent log:\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the agent started", func() bool { return strings.Contains(logs.String(), `msg="agent started"`) })
	cmd := exec.Command("sh", append([]string{"-c", `for f in "$@"; do echo $$ > "$f" || exit 97; done; exec "$PLAYBOOK" 30`, "job"}, procs...)...)
	cmd.Env = append(os.Environ(), "PLAYBOOK="+playbook, fmt.Sprintf("JOB_ID=%d", jobID), "AWX_HOST=https://awx.example.com")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	defer func() { _ = cmd.Process.Kill(); <-waited }()

	id := fmt.Sprint(jobID)
	waitFor("samples of every resource", func() bool {
		r := sink.resources(id)
		return r["cpu"] > 0 && r["memory"] > 0 && r["pids"] > 0
	})
	_ = cmd.Process.Kill()
	<-waited
	meta.Status, meta.Finished, meta.EventProcessingFinished = "successful", time.Now(), true
	fake.SetJob(meta)
	waitFor("the job done", func() bool { return strings.Contains(logs.String(), `msg="job done"`) })
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}

	sink.mu.Lock()
	infos := slices.Clone(sink.infos[id])
	sink.mu.Unlock()
	want := ship.JobInfo{TemplateID: "7", TemplateName: "run test", Status: "successful", Playbook: "site.yml", Measured: ansible.MeasuredCgroup, Forks: ansible.DefaultForks}
	if len(infos) == 0 || infos[len(infos)-1] != want {
		t.Errorf("job infos sent %+v, want the last %+v", infos, want)
	}
	if got := sink.resources(id)["pids"]; got < 2 {
		t.Errorf("%d pids samples, want several", got)
	}
	// Each line names its job once: a key twice is ambiguous to log
	// pipelines (which one wins differs by tool).
	sawFailure := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Count(line, " job=") > 1 {
			t.Errorf("a log line names the job twice: %s", line)
		}
		sawFailure = sawFailure || strings.Contains(line, "awx: requests fail")
	}
	if !sawFailure {
		t.Errorf("the failed AWX request was not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "before the agent started") {
		t.Errorf("a job started after the agent was said to predate it:\n%s", logs.String())
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
