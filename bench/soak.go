package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/collector/ship"
)

type soakFlags struct {
	common
	jobs          int
	duration      time.Duration
	jobLength     time.Duration
	tasks         int
	flush         time.Duration
	graphWorkers  int
	graphPause    time.Duration
	idleRequests  int
	statsInterval time.Duration
}

func soakCommand() *cobra.Command {
	var f soakFlags
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Many live jobs over HTTP JSON ingest for minutes, with graph requests: lag, latency under load, RSS, lost samples",
		Long: `soak runs a peakline serve subprocess and keeps --jobs jobs live at once
for --duration: each samples cpu, memory and pids at 4 Hz (bench/workload
streams, in wall-clock time) and posts what it has every --flush through
the real JSON ingest path (gzip, as the collector's client does); a job
ends after --job-length and another takes its slot. Meanwhile
--graph-workers ask for graphs: of random live jobs, and (every other
request) of reference jobs stored before the load, each after re-sending
its last event so that it is decoded again.

Reported: ingest request latency and lag (age of a batch's oldest sample
when the server acknowledged it, batching wait included), graph p50/p99
of the reference jobs under load against the same requests when idle
(half before the load, half after, pooled), the live jobs' graph latency,
the server's RSS and CPU from /proc/PID, and the count check: every
sample sent is stored exactly once (/api/v1/jobs sample counts against
what was sent, duplicates and conflicts from the ingest answers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSoak(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.IntVar(&f.jobs, "jobs", 50, "jobs live at once")
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "how long jobs keep streaming")
	fl.DurationVar(&f.jobLength, "job-length", 3*time.Minute, "how long one job runs before another takes its slot")
	fl.IntVar(&f.tasks, "tasks", 30, "tasks per job")
	fl.DurationVar(&f.flush, "flush", time.Second, "how often a job posts its new samples")
	fl.IntVar(&f.graphWorkers, "graph-workers", 2, "concurrent graph requesters")
	fl.DurationVar(&f.graphPause, "graph-pause", 100*time.Millisecond, "pause between one requester's graph requests")
	fl.IntVar(&f.idleRequests, "idle-requests", 400, "graph requests when idle, half before the load and half after")
	fl.DurationVar(&f.statsInterval, "stats-interval", 2*time.Second, "how often the server's RSS and CPU are read")
	return cmd
}

// soakJob is one finished or running job: what was sent of it.
type soakJob struct {
	id         string
	sent       map[string]int // samples per resource
	lastEvent  ship.Event
	duplicates int
	conflicts  int
	acked      int // samples the server said it stored
}

// soakRun is the shared state of a soak.
type soakRun struct {
	f      *soakFlags
	base   string
	client *http.Client

	mu       sync.Mutex
	live     []*soakJob // have at least one acknowledged batch
	finished []*soakJob
	ingestMs []float64  // request latency
	lagMs    []float64  // oldest sample age at ack
	refs     []*soakJob // finished before the load, asked for under load and idle
	loadMs   []float64  // graph of a reference job under load
	loadAt   []float64  // seconds since start, per loadMs
	liveMs   []float64  // graph of a live job under load
	liveAt   []float64

	idleBefore, idleAfter []float64 // the idle windows before and after the load
	loadBefore, loadAfter float64   // the machine's 1-minute load average then
	errs                  []error
}

func runSoak(cmd *cobra.Command, f *soakFlags) error {
	started := time.Now()
	ctx := cmd.Context()
	if f.quick {
		for flag, v := range map[string]string{"jobs": "4", "duration": "6s", "job-length": "4s", "tasks": "5", "idle-requests": "10", "stats-interval": "500ms"} {
			if !cmd.Flags().Changed(flag) {
				_ = cmd.Flags().Set(flag, v)
			}
		}
	}
	if f.jobs < 1 || f.tasks < 1 || f.graphWorkers < 0 || f.duration <= 0 || f.jobLength <= 0 || f.flush <= 0 {
		return usagef("--jobs, --tasks, --duration, --job-length and --flush: must be positive")
	}
	dir, err := os.MkdirTemp("", "peakline-bench-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := startPeakline(ctx, dir)
	if err != nil {
		return err
	}
	defer p.stop()
	s := &soakRun{f: f, base: p.url, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.jobs + f.graphWorkers, DisableCompression: true}, Timeout: time.Minute}}

	if err := s.storeRefs(ctx, max(f.graphWorkers*5, 5)); err != nil {
		return err
	}
	// Idle before and after the load, pooled: on a shared machine one
	// short idle window can land on someone else's burst.
	s.loadBefore = loadAverage()
	before, beforeCached, err := s.idlePhase(ctx, cmd, f.idleRequests/2, "idle before")
	if err != nil {
		return err
	}
	s.idleBefore, s.idleAfter = before, nil
	bar := f.bar(cmd, int(f.duration/time.Second), "soak: load")
	loadCtx, stopLoad := context.WithTimeout(ctx, f.duration)
	defer stopLoad()
	var stats []procSample
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		stats = sampleProc(loadCtx, p.pid(), f.statsInterval, func() { bar.Set(int(time.Since(started) / time.Second)) })
	}()
	var wg sync.WaitGroup
	for slot := range f.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stagger the slots so batches do not all arrive at once.
			time.Sleep(time.Duration(slot) * f.flush / time.Duration(f.jobs))
			for gen := 0; loadCtx.Err() == nil; gen++ {
				if err := s.runJob(loadCtx, fmt.Sprintf("soak-%d-%d", slot, gen), f.seed+int64(slot*1000+gen)); err != nil {
					s.fail(err)
					return
				}
			}
		}()
	}
	for w := range f.graphWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(f.seed), uint64(w)))
			for i := 0; loadCtx.Err() == nil; i++ {
				// Alternate a live job and a reference job: the reference
				// jobs are the same requests as in the idle phase.
				s.mu.Lock()
				var live *soakJob
				if len(s.live) > 0 {
					live = s.live[rng.IntN(len(s.live))]
				}
				s.mu.Unlock()
				var err error
				if i%2 == 0 && live != nil {
					var d float64
					if d, err = s.graph(ctx, live.id); err == nil {
						s.mu.Lock()
						s.liveMs = append(s.liveMs, d)
						s.liveAt = append(s.liveAt, time.Since(started).Seconds())
						s.mu.Unlock()
					}
				} else {
					var d float64
					if d, err = s.refGraph(ctx, s.refs[rng.IntN(len(s.refs))]); err == nil {
						s.mu.Lock()
						s.loadMs = append(s.loadMs, d)
						s.loadAt = append(s.loadAt, time.Since(started).Seconds())
						s.mu.Unlock()
					}
				}
				if err != nil {
					s.fail(err)
					return
				}
				select {
				case <-loadCtx.Done():
				case <-time.After(f.graphPause):
				}
			}
		}()
	}
	wg.Wait()
	<-statsDone
	bar.Finish()
	if len(s.errs) > 0 {
		return fmt.Errorf("soak: %d errors, the first: %w\n%s", len(s.errs), s.errs[0], p.logs)
	}
	after, afterCached, err := s.idlePhase(ctx, cmd, f.idleRequests-f.idleRequests/2, "idle after")
	if err != nil {
		return err
	}
	s.loadAfter, s.idleAfter = loadAverage(), after
	idle := append(append([]float64(nil), before...), after...)
	idleCached := append(beforeCached, afterCached...)
	check, err := s.countCheck(ctx)
	if err != nil {
		return err
	}
	return f.soakReport(cmd, started, s, stats, idle, idleCached, check)
}

func (s *soakRun) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// runJob streams one job in wall-clock time until it ends or ctx is done,
// then posts its last event.
func (s *soakRun) runJob(ctx context.Context, id string, seed int64) error {
	startMs := time.Now().UnixMilli()
	samples := int(s.f.jobLength / (time.Duration(workload.Interval) * time.Millisecond))
	st := workload.NewStream(id, workload.JobSpec{Tasks: s.f.tasks, SamplesPerResource: samples, StartMs: startMs}, seed)
	job := &soakJob{id: id, sent: map[string]int{}, lastEvent: ship.Event{Counter: st.LastCounter, TimeMs: st.LastEventMs}}
	tick := time.NewTicker(s.f.flush)
	defer tick.Stop()
	nextTask, listed := 0, false
	var c workload.Chunk
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		now := time.Now().UnixMilli()
		b := ship.Batch{JobID: id}
		for ; nextTask < len(st.Tasks) && st.Tasks[nextTask].StartMs <= now; nextTask++ {
			t := st.Tasks[nextTask]
			b.Tasks = append(b.Tasks, ship.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs})
		}
		oldest := int64(-1)
		for st.NextUntil(&c, 0, now) {
			t := st.Tasks[c.Task]
			for r, res := range c.Resources {
				b.Series = append(b.Series, ship.Series{Resource: res, Counter: t.Counter, UUID: t.UUID, Task: t.Name,
					Ts: append([]int64(nil), c.Ts...), Vs: append([]float64(nil), c.Vs[r]...)})
			}
			if oldest < 0 {
				oldest = c.Ts[0]
			}
		}
		if st.Produced() == samples || done {
			done = true
			b.LastEvent = &job.lastEvent
			// A job stopped early ends at its last sample.
			if now < job.lastEvent.TimeMs {
				job.lastEvent.TimeMs = now
			}
		}
		if len(b.Tasks) == 0 && len(b.Series) == 0 && b.LastEvent == nil {
			continue
		}
		for _, sr := range b.Series {
			job.sent[sr.Resource] += len(sr.Ts)
		}
		start := time.Now()
		ans, err := s.send(context.WithoutCancel(ctx), &b)
		if err != nil {
			return err
		}
		el := time.Since(start)
		job.duplicates += ans.Duplicates
		job.conflicts += ans.Conflicts
		job.acked += ans.Samples
		s.mu.Lock()
		s.ingestMs = append(s.ingestMs, float64(el)/1e6)
		if oldest >= 0 {
			s.lagMs = append(s.lagMs, float64(time.Now().UnixMilli()-oldest))
		}
		if !listed && len(b.Series) > 0 {
			s.live = append(s.live, job)
			listed = true
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.finished = append(s.finished, job)
	for i, l := range s.live {
		if l == job {
			s.live = append(s.live[:i], s.live[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return nil
}

// storeRefs stores n finished jobs of full length before the load: the
// graph requests compared between load and idle.
func (s *soakRun) storeRefs(ctx context.Context, n int) error {
	samples := int(s.f.jobLength / (time.Duration(workload.Interval) * time.Millisecond))
	for i := range n {
		id := fmt.Sprintf("soak-ref-%d", i)
		start := time.Now().Add(-s.f.jobLength - time.Minute).UnixMilli()
		st := workload.NewStream(id, workload.JobSpec{Tasks: s.f.tasks, SamplesPerResource: samples, StartMs: start}, s.f.seed-int64(i)-1)
		j := st.Job()
		job := &soakJob{id: id, sent: map[string]int{}, lastEvent: ship.Event{Counter: j.LastCounter, TimeMs: j.LastEventMs}}
		b := ship.Batch{JobID: id, LastEvent: &job.lastEvent}
		for _, t := range j.Tasks {
			b.Tasks = append(b.Tasks, ship.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs})
		}
		for _, sr := range j.Series {
			t := j.Tasks[sr.Task]
			b.Series = append(b.Series, ship.Series{Resource: sr.Resource, Counter: t.Counter, UUID: t.UUID, Task: t.Name, Ts: sr.Ts, Vs: sr.Vs})
			job.sent[sr.Resource] += len(sr.Ts)
		}
		ans, err := s.send(ctx, &b)
		if err != nil {
			return err
		}
		job.acked, job.duplicates, job.conflicts = ans.Samples, ans.Duplicates, ans.Conflicts
		s.refs = append(s.refs, job)
		s.finished = append(s.finished, job)
	}
	return nil
}

// refGraph re-sends a finished job's last event (untimed), which drops
// the job from the decoded-job cache as a live job's batches do, then
// times its graph.
func (s *soakRun) refGraph(ctx context.Context, j *soakJob) (float64, error) {
	if _, err := s.send(ctx, &ship.Batch{JobID: j.id, LastEvent: &j.lastEvent}); err != nil {
		return 0, err
	}
	return s.graph(ctx, j.id)
}

// ingestAnswer is the server's answer to a batch.
type ingestAnswer struct {
	Samples    int `json:"samples"`
	Duplicates int `json:"duplicates"`
	Conflicts  int `json:"conflicts"`
}

// send posts a batch as the collector's client does (gzip JSON) and
// reads the answer, which the client discards.
func (s *soakRun) send(ctx context.Context, b *ship.Batch) (ingestAnswer, error) {
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return ingestAnswer{}, err
	}
	if err := zw.Close(); err != nil {
		return ingestAnswer{}, err
	}
	// A server serving its --max-concurrent-ingest requests answers 429
	// with Retry-After; the collector waits and resends, and so does this.
	var (
		resp *http.Response
		data []byte
	)
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+ship.IngestPath, bytes.NewReader(body.Bytes()))
		if err != nil {
			return ingestAnswer{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err = s.client.Do(req)
		if err != nil {
			return ingestAnswer{}, fmt.Errorf("ingest batch of %s: %w", b.JobID, err)
		}
		data, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || try == 30 {
			break
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		select {
		case <-ctx.Done():
			return ingestAnswer{}, ctx.Err()
		case <-time.After(time.Duration(max(wait, 1)) * time.Second):
		}
	}
	if resp.StatusCode != http.StatusOK {
		return ingestAnswer{}, fmt.Errorf("ingest batch of %s: %d: %s", b.JobID, resp.StatusCode, data)
	}
	var ans ingestAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return ingestAnswer{}, fmt.Errorf("ingest answer for %s: %w", b.JobID, err)
	}
	return ans, nil
}

// graph times one gzip graph request of a job, in ms.
func (s *soakRun) graph(ctx context.Context, id string) (float64, error) {
	var t timed
	if err := t.getGzip(ctx, s.client, s.base+"/api/v1/jobs/"+url.PathEscape(id)+"/graph?points=1000"); err != nil {
		return 0, err
	}
	return t.p(50), nil
}

// idlePhase asks for the reference jobs' graphs with no other load, as
// under load (uncached, from as many requesters at the same pace), then
// again at once (cached).
func (s *soakRun) idlePhase(ctx context.Context, cmd *cobra.Command, n int, what string) (idle, cached []float64, err error) {
	bar := s.f.bar(cmd, n, "soak: "+what)
	defer bar.Finish()
	workers := max(s.f.graphWorkers, 1)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s.f.seed), 99+uint64(w)))
			for i := w; i < n; i += workers {
				j := s.refs[rng.IntN(len(s.refs))]
				d, err := s.refGraph(ctx, j)
				var dc float64
				if err == nil {
					dc, err = s.graph(ctx, j.id)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				idle, cached = append(idle, d), append(cached, dc)
				mu.Unlock()
				bar.Add(1)
				time.Sleep(s.f.graphPause)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, errs[0]
	}
	return idle, cached, nil
}

// countResult compares what was sent with what the server holds.
type countResult struct {
	jobs                  int
	sent, stored, acked   int
	lost, extra           int
	duplicates, conflicts int
}

// countCheck reads every page of /api/v1/jobs and compares each job's
// sample counts with what was sent.
func (s *soakRun) countCheck(ctx context.Context) (countResult, error) {
	stored := map[string]map[string]int{}
	for cursor := ""; ; {
		u := s.base + "/api/v1/jobs?limit=5000&cursor=" + url.QueryEscape(cursor)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return countResult{}, err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return countResult{}, err
		}
		var doc struct {
			Jobs []struct {
				JobID   string         `json:"job_id"`
				Samples map[string]int `json:"samples"`
			} `json:"jobs"`
			Next string `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			return countResult{}, fmt.Errorf("read /api/v1/jobs: %w", err)
		}
		for _, j := range doc.Jobs {
			stored[j.JobID] = j.Samples
		}
		if cursor = doc.Next; cursor == "" {
			break
		}
	}
	var c countResult
	for _, j := range s.finished {
		c.jobs++
		c.duplicates += j.duplicates
		c.conflicts += j.conflicts
		c.acked += j.acked
		for _, r := range []string{"cpu", "memory", "pids"} {
			sent, got := j.sent[r], stored[j.id][r]
			c.sent += sent
			c.stored += got
			if got < sent {
				c.lost += sent - got
			} else {
				c.extra += got - sent
			}
		}
	}
	return c, nil
}
