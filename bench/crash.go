package bench

// The crash harness: `peakline serve` is killed with SIGKILL at seeded
// random moments under continuous ingest from concurrent writers (JSON
// batches and Prometheus remote write), restarted on the same data dir,
// and after every restart every acknowledged sample must read back exactly
// once with its exact value.
//
// Bookkeeping is exact and small because every writer owns one job and
// sends its samples in order, retrying a batch whose outcome it did not
// hear until the server acknowledges it. So the acknowledged samples of a
// writer are always a prefix [0, acked) of its sample sequence, and at
// most one batch [acked, acked+pending) is in doubt: those samples may or
// may not be stored, and either is correct.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/spf13/cobra"

	"github.com/peakline/peakline/collector/progress"
	"github.com/peakline/peakline/tsdb"
)

// CrashConfig configures RunCrash. Zero values take the defaults.
type CrashConfig struct {
	// Binary is the peakline executable to run as `serve`.
	Binary string
	// DataDir is the store directory, reused across restarts.
	DataDir string
	// Cycles is the number of kill -9 and restart cycles.
	Cycles int
	// JSONWriters and RemoteWriters are the concurrent writers of each
	// protocol; each owns one job (crash-json-N, crash-rw-N).
	JSONWriters, RemoteWriters int
	// BatchSamples is the samples per resource in one batch.
	BatchSamples int
	// TaskSamples is the samples per resource of one task (a multiple
	// of BatchSamples): each task is a new set of series.
	TaskSamples int
	// Interval is the pause of each writer between two batches.
	Interval time.Duration
	// MinUptime and MaxUptime bound the seeded random time the server
	// runs under load before it is killed.
	MinUptime, MaxUptime time.Duration
	// Seed seeds the kill moments.
	Seed int64
	// Now is the clock that places the samples (nil = time.Now): they
	// start one hour before it, 1 ms apart.
	Now func() time.Time
	// BeforeRestart, if set, runs while the server is down after each
	// kill (tests use it to damage the store and prove the checks fail).
	BeforeRestart func(cycle int, dataDir string) error
	// Progress, if set, is called after each verified cycle.
	Progress func(cycle int, r *CrashResult)
}

func (c *CrashConfig) setDefaults() {
	if c.Cycles <= 0 {
		c.Cycles = 10
	}
	if c.JSONWriters <= 0 && c.RemoteWriters <= 0 {
		c.JSONWriters, c.RemoteWriters = 2, 2
	}
	if c.BatchSamples <= 0 {
		c.BatchSamples = 10
	}
	if c.TaskSamples <= 0 || c.TaskSamples%c.BatchSamples != 0 {
		c.TaskSamples = 50 * c.BatchSamples
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Millisecond
	}
	if c.MinUptime <= 0 {
		c.MinUptime = 200 * time.Millisecond
	}
	if c.MaxUptime < c.MinUptime {
		c.MaxUptime = c.MinUptime + 1500*time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// CrashResult is what a crash run found. Lost, Duplicated, WrongValues,
// Phantoms and TaskMismatches are all zero when the store kept every
// acknowledged sample exactly once.
type CrashResult struct {
	Cycles int
	// Acked is the samples acknowledged (2xx) by the server.
	Acked int
	// InDoubtStored and InDoubtDropped split the samples of batches cut
	// off by a kill (no answer heard) into those found stored and not.
	InDoubtStored, InDoubtDropped int
	// Lost counts acknowledged samples missing after a restart, summed
	// over cycles (a sample lost once is counted in every later cycle).
	Lost int
	// Duplicated counts samples read back more than once.
	Duplicated int
	// WrongValues counts samples read back with another value.
	WrongValues int
	// Phantoms counts samples read back that were never sent.
	Phantoms int
	// TaskMismatches counts per-task sample counts of the tasks API that
	// differ from what was stored.
	TaskMismatches int
	// Restarts holds the time from process start to /healthz ok of each
	// restart.
	Restarts []time.Duration
	// Problems describes the first few discrepancies.
	Problems []string
}

// OK reports whether no acknowledged sample was lost, doubled or changed.
func (r *CrashResult) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.WrongValues == 0 && r.Phantoms == 0 && r.TaskMismatches == 0
}

func (r *CrashResult) problem(format string, args ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// RestartPercentile returns the p-th percentile (0..1) of restart times.
func (r *CrashResult) RestartPercentile(p float64) time.Duration {
	if len(r.Restarts) == 0 {
		return 0
	}
	s := slices.Clone(r.Restarts)
	slices.Sort(s)
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

// RunCrash runs the crash cycles. It returns an error when the harness
// itself cannot go on (the server does not start, answers a batch with an
// error status, or a read fails); lost or doubled samples are findings in
// the result, not errors.
func RunCrash(ctx context.Context, cfg CrashConfig) (*CrashResult, error) {
	cfg.setDefaults()
	baseMs := cfg.Now().Add(-time.Hour).UnixMilli()
	var writers []*crashWriter
	for i := range cfg.JSONWriters {
		writers = append(writers, &crashWriter{job: fmt.Sprintf("crash-json-%d", i), baseMs: baseMs, cfg: &cfg})
	}
	for i := range cfg.RemoteWriters {
		writers = append(writers, &crashWriter{job: fmt.Sprintf("crash-rw-%d", i), remote: true, baseMs: baseMs, cfg: &cfg})
	}
	res := &CrashResult{}
	rng := rand.New(rand.NewSource(cfg.Seed))
	client := &http.Client{Timeout: 30 * time.Second}

	srv, _, err := startCrashServer(ctx, cfg.Binary, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer srv.kill()
	g := newGate(srv.url, len(writers))
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errc := make(chan error, len(writers))
	for _, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer g.leave()
			if err := w.run(wctx, client, g); err != nil {
				errc <- err
				stopWriters()
			}
		}()
	}
	defer func() { stopWriters(); g.open(""); wg.Wait() }()

	verified := make([]int, len(writers)) // per writer: index below which samples were read raw
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		up := cfg.MinUptime + time.Duration(rng.Int63n(int64(cfg.MaxUptime-cfg.MinUptime)+1))
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-errc:
			return res, fmt.Errorf("cycle %d: %w\nserver log:\n%s", cycle, err, srv.logs)
		case <-time.After(up):
		}
		g.close()
		srv.kill()
		if err := g.waitParked(ctx); err != nil {
			return res, err
		}
		select {
		case err := <-errc:
			return res, fmt.Errorf("cycle %d: %w\nserver log:\n%s", cycle, err, srv.logs)
		default:
		}
		if cfg.BeforeRestart != nil {
			if err := cfg.BeforeRestart(cycle, cfg.DataDir); err != nil {
				return res, fmt.Errorf("cycle %d: before restart: %w", cycle, err)
			}
		}
		var took time.Duration
		srv, took, err = startCrashServer(ctx, cfg.Binary, cfg.DataDir)
		if err != nil {
			return res, fmt.Errorf("cycle %d: restart: %w", cycle, err)
		}
		res.Restarts = append(res.Restarts, took)
		full := cycle == cfg.Cycles
		if err := verifyCrash(ctx, client, srv.url, writers, verified, full, res); err != nil {
			return res, fmt.Errorf("cycle %d: verify: %w\nserver log:\n%s", cycle, err, srv.logs)
		}
		res.Cycles = cycle
		if cfg.Progress != nil {
			cfg.Progress(cycle, res)
		}
		g.open(srv.url)
	}
	return res, nil
}

// crashServer is one `peakline serve` process.
type crashServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	logs *tailBuffer
}

// startCrashServer starts `serve` on a fresh loopback port and returns
// once /healthz answers 200, with the time from process start to then.
func startCrashServer(ctx context.Context, bin, dir string) (*crashServer, time.Duration, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, 0, err
	}
	s := &crashServer{url: "http://" + addr, done: make(chan struct{}), logs: &tailBuffer{max: 16 << 10}}
	s.cmd = exec.Command(bin, "serve", "--data", dir, "--listen", addr, "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, s.logs
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s serve: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	probe := &http.Client{Timeout: time.Second}
	deadline := start.Add(2 * time.Minute)
	for {
		resp, err := probe.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, time.Since(start), nil
			}
		}
		select {
		case <-s.done:
			return nil, 0, fmt.Errorf("serve exited before /healthz answered: %s", s.logs)
		case <-ctx.Done():
			s.kill()
			return nil, 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, 0, fmt.Errorf("serve: /healthz not ok 2 minutes after start: %s", s.logs)
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *crashServer) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// gate holds the writers while the server is down and tells the harness
// when all of them are parked, so their bookkeeping can be read.
type gate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	up      bool
	url     string
	gen     int
	parked  int
	writers int
}

func newGate(url string, writers int) *gate {
	g := &gate{up: true, url: url, gen: 1, writers: writers}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// enter waits until the server is up in a generation after failedGen and
// returns its URL and generation.
func (g *gate) enter(ctx context.Context, failedGen int) (string, int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for !g.up || g.gen <= failedGen {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		g.parked++
		g.cond.Broadcast()
		g.cond.Wait()
		g.parked--
	}
	return g.url, g.gen, nil
}

func (g *gate) close() {
	g.mu.Lock()
	g.up = false
	g.mu.Unlock()
}

// open lets the writers go on against url (a new generation).
func (g *gate) open(url string) {
	g.mu.Lock()
	g.up, g.url = true, url
	g.gen++
	g.cond.Broadcast()
	g.mu.Unlock()
}

// leave tells the gate that a writer has stopped for good.
func (g *gate) leave() {
	g.mu.Lock()
	g.writers--
	g.cond.Broadcast()
	g.mu.Unlock()
}

// waitParked waits until every writer still running waits in enter.
func (g *gate) waitParked(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.parked < g.writers {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.cond.Wait()
	}
	return nil
}

// crashWriter sends the samples of one job in order. Sample i of each
// resource is at baseMs+i with a value derived from i (exact in float64),
// in task i/TaskSamples.
type crashWriter struct {
	job    string
	remote bool
	baseMs int64
	cfg    *CrashConfig
	// acked samples per resource are [0, acked); [acked, acked+pending)
	// were sent without an answer. Read only while the writer is parked.
	acked, pending int
}

func crashValue(resource string, i int) float64 {
	switch resource {
	case "cpu":
		return float64(i % 1000)
	case "memory":
		return float64(int64(i) * 4096)
	}
	return float64(i % 97)
}

// crashTask is the counter, uuid and name of sample i's task.
func (w *crashWriter) crashTask(i int) (int64, string, string) {
	n := i / w.cfg.TaskSamples
	return int64(n + 1), fmt.Sprintf("%s-task-%04d", w.job, n), fmt.Sprintf("task %d", n)
}

func (w *crashWriter) run(ctx context.Context, client *http.Client, g *gate) error {
	failedGen := 0
	for {
		url, gen, err := g.enter(ctx, failedGen)
		if err != nil {
			return nil
		}
		endpoint, headers, body, err := w.batch(url)
		if err != nil {
			return err
		}
		w.pending = w.cfg.BatchSamples
		status, msg, err := send(ctx, client, endpoint, headers, body)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failedGen = gen // killed: retry the batch once the server is back
			continue
		case status/100 != 2:
			return fmt.Errorf("%s: POST %s: %d: %s", w.job, endpoint, status, msg)
		}
		w.acked += w.cfg.BatchSamples
		w.pending = 0
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.cfg.Interval):
		}
	}
}

// batch encodes the next batch: samples [acked, acked+BatchSamples).
func (w *crashWriter) batch(base string) (string, map[string]string, []byte, error) {
	from, n := w.acked, w.cfg.BatchSamples
	counter, uuid, name := w.crashTask(from)
	ts := make([]int64, n)
	for k := range n {
		ts[k] = w.baseMs + int64(from+k)
	}
	values := func(resource string) []float64 {
		vs := make([]float64, n)
		for k := range n {
			vs[k] = crashValue(resource, from+k)
		}
		return vs
	}
	if !w.remote {
		b := map[string]any{"job_id": w.job,
			"tasks": []map[string]any{{"counter": counter, "uuid": uuid, "name": name, "start": w.baseMs + int64(from-from%w.cfg.TaskSamples)}}}
		var series []map[string]any
		for _, r := range tsdb.GraphedResources() {
			series = append(series, map[string]any{"resource": r.Name, "counter": counter, "uuid": uuid, "task": name, "t": ts, "v": values(r.Name)})
		}
		b["series"] = series
		body, err := json.Marshal(b)
		return base + "/api/v1/ingest", map[string]string{"Content-Type": "application/json"}, body, err
	}
	var req prompb.WriteRequest
	for _, r := range tsdb.GraphedResources() {
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: r.Metric},
			{Name: tsdb.LabelCounter, Value: strconv.FormatInt(counter, 10)}, {Name: tsdb.LabelJob, Value: w.job},
			{Name: tsdb.LabelTask, Value: name}, {Name: tsdb.LabelTaskUUID, Value: uuid}}}
		for k, v := range values(r.Name) {
			s.Samples = append(s.Samples, prompb.Sample{Timestamp: ts[k], Value: v})
		}
		req.Timeseries = append(req.Timeseries, s)
	}
	raw, err := req.Marshal()
	return base + "/api/v1/write", rwHeaders, snappy.Encode(nil, raw), err
}

// send posts one body; err is set only when no answer was heard.
func send(ctx context.Context, client *http.Client, url string, headers map[string]string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, strings.TrimSpace(string(msg)), nil
}

// CrashCommand is `peakline bench crash`.
func CrashCommand() *cobra.Command {
	var (
		cfg     CrashConfig
		dataDir string
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:   "crash",
		Short: "Kill -9 peakline serve under ingest, restart it, and check every acknowledged sample",
		Long: `crash runs this binary as 'peakline serve' on a data dir, sends continuous
JSON ingest and Prometheus remote write from concurrent writers (one job each),
kills the server with SIGKILL at seeded random moments, restarts it on the same
dir, and after every restart reads every acknowledged sample back through the
Prometheus API and the tasks API. It prints the cycles, the acknowledged, lost
and duplicated samples, and the restart time (process start to /healthz ok),
and exits 1 if any acknowledged sample was lost, doubled or changed.`,
		Example: "  peakline bench crash --cycles 100",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			started := time.Now()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Binary = exe
			if dataDir == "" {
				tmp, err := os.MkdirTemp("", "peakline-crash")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dataDir = tmp
			}
			cfg.DataDir = dataDir
			var w io.Writer = cmd.ErrOrStderr()
			if quiet {
				w = io.Discard
			}
			bar := progress.New(w, cfg.Cycles, "crash cycles", progress.Options{Unit: "cycles"})
			cfg.Progress = func(cycle int, _ *CrashResult) { bar.Set(cycle) }
			res, err := RunCrash(cmd.Context(), cfg)
			bar.Finish()
			if res != nil {
				writeCrashReport(cmd.OutOrStdout(), res, time.Since(started))
			}
			if err != nil {
				return err
			}
			if !res.OK() {
				return errors.New("crash: acknowledged samples were lost, doubled or changed (see above)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Cycles, "cycles", 100, "kill -9 and restart cycles")
	f.IntVar(&cfg.JSONWriters, "json-writers", 2, "concurrent JSON ingest writers (one job each)")
	f.IntVar(&cfg.RemoteWriters, "remote-writers", 2, "concurrent remote-write writers (one job each)")
	f.IntVar(&cfg.BatchSamples, "batch-samples", 10, "samples per resource in one batch")
	f.DurationVar(&cfg.Interval, "interval", 10*time.Millisecond, "pause of each writer between batches")
	f.DurationVar(&cfg.MinUptime, "min-uptime", 200*time.Millisecond, "shortest run under load before a kill")
	f.DurationVar(&cfg.MaxUptime, "max-uptime", 1700*time.Millisecond, "longest run under load before a kill")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the kill moments")
	f.StringVar(&dataDir, "data", "", "store directory to use (default: a temporary one, removed after)")
	f.BoolVar(&quiet, "no-progress", false, "do not draw the progress bar")
	return cmd
}

// writeCrashReport prints a crash run's figures.
func writeCrashReport(w io.Writer, r *CrashResult, took time.Duration) {
	fmt.Fprintf(w, "# peakline bench crash\n# machine: %s\n# took %s\n\n", Machine(), took.Round(time.Second))
	fmt.Fprintf(w, "cycles                 %d\n", r.Cycles)
	fmt.Fprintf(w, "acknowledged samples   %d\n", r.Acked)
	fmt.Fprintf(w, "in-doubt samples       %d stored, %d not stored (batches cut off by a kill, no answer sent)\n", r.InDoubtStored, r.InDoubtDropped)
	fmt.Fprintf(w, "lost samples           %d\n", r.Lost)
	fmt.Fprintf(w, "duplicated samples     %d\n", r.Duplicated)
	fmt.Fprintf(w, "wrong values           %d\n", r.WrongValues)
	fmt.Fprintf(w, "never-sent samples     %d\n", r.Phantoms)
	fmt.Fprintf(w, "tasks API mismatches   %d\n", r.TaskMismatches)
	fmt.Fprintf(w, "restart time p50       %s\n", r.RestartPercentile(0.5).Round(time.Millisecond))
	fmt.Fprintf(w, "restart time max       %s\n", r.RestartPercentile(1).Round(time.Millisecond))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}
