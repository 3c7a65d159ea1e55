package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/tsdb"
)

type ingestFlags struct {
	common
	jobs, tasks     int
	samples         string
	batch, shards   int
	rounds          int
	peers           string
	requirePeers    bool
	samplesPerJob   int
	enabled         map[string]bool
	prometheusBin   string
	victoriaBin     string
	missingPeerNote []string
}

func ingestCommand() *cobra.Command {
	var f ingestFlags
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "JSON ingest and remote write into Peakline vs a Prometheus server and VictoriaMetrics",
		Long: `ingest generates --jobs jobs running at once (each --samples samples per
resource over --tasks tasks, ending now) and sends the same samples, task
records and last events to each server from --shards concurrent senders
(series sharded like a Prometheus remote-write queue, so every series
arrives in order), over loopback, every server a fresh process with a
fresh temp dir:

  peakline JSON ingest          peakline serve, POST /api/v1/ingest (gzip JSON, the collector's batches)
  victoriametrics JSON import   POST /api/v1/import (gzip JSON lines), the JSON peer
  peakline remote write         peakline serve, POST /api/v1/write (snappy prompb)
  prometheus remote write       prometheus --web.enable-remote-write-receiver
  victoriametrics remote write  POST /api/v1/write

Bodies are encoded before the clock starts. Reported: samples/s from the
first request to the last answer, server CPU seconds per million samples
(/proc/PID/stat), and bytes per sample on disk after compaction (Peakline:
store.Compact, then its blocks; Prometheus: an admin snapshot with the
head; VictoriaMetrics: force_flush and force_merge, then data/ and
indexdb/). The best of --rounds rounds is kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runIngest(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.IntVar(&f.jobs, "jobs", 50, "jobs sending at once")
	fl.StringVar(&f.samples, "samples", "4e4", "samples per resource per job")
	fl.IntVar(&f.tasks, "tasks", 100, "tasks per job")
	fl.IntVar(&f.batch, "batch", 10_000, "samples per request")
	fl.IntVar(&f.shards, "shards", 2, "concurrent senders per server")
	fl.IntVar(&f.rounds, "rounds", 3, "rounds per server; the best is kept")
	fl.StringVar(&f.peers, "peers", "prometheus,victoriametrics", "peer servers to run")
	fl.BoolVar(&f.requirePeers, "require-peers", false, "fail when a peer binary is missing instead of leaving it out")
	return cmd
}

// ingestTarget is one server and endpoint to ingest into.
type ingestTarget struct {
	subject string
	start   func(ctx context.Context, dir string) (*proc, error)
	path    string
	headers map[string]string
	bodies  [][][]byte
	stored  string                                            // the /metrics counter of stored samples
	disk    func(ctx context.Context, p *proc) (int64, error) // bytes on disk after compaction; p is stopped after
}

var (
	jsonHeaders = map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}
	rwHeaders   = map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "0.1.0"}
)

// ingestResult is the best of a target's rounds.
type ingestResult struct {
	rate        float64 // samples/s
	cpuPerM     float64 // server CPU seconds per million samples
	diskPerS    float64 // bytes per sample on disk
	stored      float64 // as the server counts
	wireBytes   int64
	failedSends int
}

func (f *ingestFlags) resolvePeers() error {
	f.enabled = map[string]bool{}
	for _, p := range strings.Split(f.peers, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case "prometheus", "victoriametrics":
			f.enabled[p] = true
		default:
			return usagef("--peers: %q is not prometheus or victoriametrics", p)
		}
	}
	var err error
	if f.enabled["prometheus"] {
		if f.prometheusBin, err = FindTool(toolPrometheus); err != nil {
			if f.requirePeers {
				return err
			}
			f.enabled["prometheus"] = false
			f.missingPeerNote = append(f.missingPeerNote, "prometheus left out: "+err.Error())
		}
	}
	if f.enabled["victoriametrics"] {
		if f.victoriaBin, err = FindTool(toolVM); err != nil {
			if f.requirePeers {
				return err
			}
			f.enabled["victoriametrics"] = false
			f.missingPeerNote = append(f.missingPeerNote, "victoriametrics left out: "+err.Error())
		}
	}
	return nil
}

func runIngest(cmd *cobra.Command, f *ingestFlags) error {
	started := time.Now()
	ctx := cmd.Context()
	if f.quick {
		for flag, v := range map[string]string{"jobs": "4", "samples": "2e3", "tasks": "10", "rounds": "1", "batch": "2000"} {
			if !cmd.Flags().Changed(flag) {
				_ = cmd.Flags().Set(flag, v)
			}
		}
	}
	var err error
	if f.samplesPerJob, err = workload.ParseSize(f.samples); err != nil {
		return usagef("--samples: %w", err)
	}
	if f.jobs < 1 || f.tasks < 1 || f.batch < 1 || f.shards < 1 || f.rounds < 1 {
		return usagef("--jobs, --tasks, --batch, --shards and --rounds: must be at least 1")
	}
	if err := f.resolvePeers(); err != nil {
		return err
	}
	spec := ingestSpec{jobs: f.jobs, samplesPerJob: f.samplesPerJob, tasks: f.tasks, batch: f.batch, shards: f.shards,
		endMs: time.Now().Add(-time.Minute).UnixMilli(), seed: f.seed}
	set, err := buildIngestSet(spec)
	if err != nil {
		return err
	}
	targets := f.targets(set)
	bar := f.bar(cmd, len(targets)*f.rounds, "ingest")
	results := map[string]*ingestResult{}
	rounds := make([]map[string]*ingestResult, f.rounds)
	for round := range f.rounds {
		rounds[round] = map[string]*ingestResult{}
		for i := range targets {
			// Alternate the order between rounds so no server always
			// runs first on a machine that may be warming up.
			t := &targets[i]
			if round%2 == 1 {
				t = &targets[len(targets)-1-i]
			}
			bar.Describe("ingest: " + t.subject)
			res, err := runIngestTarget(ctx, t, set, round == f.rounds-1)
			if err != nil {
				return fmt.Errorf("%s: %w", t.subject, err)
			}
			r := *res
			rounds[round][t.subject] = &r
			if best := results[t.subject]; best == nil {
				results[t.subject] = res
			} else {
				best.rate = max(best.rate, res.rate)
				best.cpuPerM = min(best.cpuPerM, res.cpuPerM)
				if res.diskPerS > 0 {
					best.diskPerS, best.stored = res.diskPerS, res.stored
				}
				best.failedSends += res.failedSends
			}
			bar.Add(1)
		}
	}
	bar.Finish()
	asIs, onGrid, err := xorBreakdown(spec.jobStreams()[0])
	if err != nil {
		return err
	}
	return f.report(cmd, started, set, results, rounds, asIs, onGrid)
}

func (f *ingestFlags) targets(set *ingestSet) []ingestTarget {
	var ts []ingestTarget
	pl := func(ctx context.Context, dir string) (*proc, error) { return startPeakline(ctx, dir) }
	vm := func(ctx context.Context, dir string) (*proc, error) { return startVM(ctx, f.victoriaBin, dir) }
	prom := func(ctx context.Context, dir string) (*proc, error) {
		return startPrometheus(ctx, f.prometheusBin, dir)
	}
	ts = append(ts, ingestTarget{"peakline JSON ingest", pl, "/api/v1/ingest", jsonHeaders, set.plJSON, "peakline_ingested_samples_total", peaklineDisk})
	if f.enabled["victoriametrics"] {
		ts = append(ts, ingestTarget{"victoriametrics JSON import", vm, "/api/v1/import", map[string]string{"Content-Encoding": "gzip"}, set.vmJSON, "vm_rows_added_to_storage_total", vmDisk})
	}
	ts = append(ts, ingestTarget{"peakline remote write", pl, "/api/v1/write", rwHeaders, set.rw, "peakline_ingested_samples_total", peaklineDisk})
	if f.enabled["prometheus"] {
		ts = append(ts, ingestTarget{"prometheus remote write", prom, "/api/v1/write", rwHeaders, set.rw, "prometheus_tsdb_head_samples_appended_total", promDisk})
	}
	if f.enabled["victoriametrics"] {
		ts = append(ts, ingestTarget{"victoriametrics remote write", vm, "/api/v1/write", rwHeaders, set.rw, "vm_rows_added_to_storage_total", vmDisk})
	}
	return ts
}

// runIngestTarget starts a fresh server, sends every body and measures.
func runIngestTarget(ctx context.Context, t *ingestTarget, set *ingestSet, measureDisk bool) (*ingestResult, error) {
	dir, err := os.MkdirTemp("", "peakline-bench-ingest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p, err := t.start(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	before, err := readProc(p.pid())
	if err != nil {
		return nil, err
	}
	res := &ingestResult{wireBytes: bodyBytes(t.bodies)}
	el, failed, firstErr := sendShards(ctx, p.url+t.path, t.headers, t.bodies)
	res.failedSends = failed
	if failed > 0 {
		return nil, fmt.Errorf("%d of the requests failed, the first: %w\n%s", failed, firstErr, p.logs)
	}
	after, err := readProc(p.pid())
	if err != nil {
		return nil, err
	}
	res.rate = float64(set.samples) / el.Seconds()
	res.cpuPerM = (after.cpu - before.cpu).Seconds() / (float64(set.samples) / 1e6)
	if strings.HasPrefix(t.stored, "vm_") {
		if err := vmSettle(ctx, p, set.samples); err != nil {
			return nil, err
		}
	}
	if m, err := scrape(ctx, p.url+"/metrics", t.stored); err == nil {
		res.stored = m[t.stored]
	}
	if measureDisk {
		n, err := t.disk(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("measure disk: %w", err)
		}
		res.diskPerS = float64(n) / float64(set.samples)
	}
	return res, nil
}

// sendShards posts each shard's bodies in order, shards at once, and
// returns the wall time, the failed requests and the first error.
func sendShards(ctx context.Context, url string, headers map[string]string, shards [][][]byte) (time.Duration, int, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(shards) + 1, DisableCompression: true}, Timeout: 5 * time.Minute}
	defer client.CloseIdleConnections()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failed   int
		firstErr error
	)
	start := time.Now()
	for _, bodies := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bodies {
				if err := post(ctx, client, url, headers, b); err != nil {
					mu.Lock()
					failed++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), failed, firstErr
}

// peaklineDisk stops the server, opens its store, compacts the head into
// blocks and returns the blocks' size.
func peaklineDisk(ctx context.Context, p *proc) (int64, error) {
	if err := p.stop(); err != nil {
		return 0, err
	}
	store, err := tsdb.Open(p.dir, tsdb.Options{CacheSamples: -1}, nil, nil)
	if err != nil {
		return 0, err
	}
	if err := store.Compact(ctx); err != nil {
		store.Close()
		return 0, err
	}
	if err := store.Close(); err != nil {
		return 0, err
	}
	return dirSize(p.dir, blockFile), nil
}

func promDisk(ctx context.Context, p *proc) (int64, error) {
	snap, err := promSnapshot(ctx, p)
	if err != nil {
		return 0, err
	}
	return dirSize(snap, nil), nil
}

func vmDisk(ctx context.Context, p *proc) (int64, error) {
	if err := vmFlushMerge(ctx, p); err != nil {
		return 0, err
	}
	return dirSize(p.dir, vmStorageFile), nil
}

func (f *ingestFlags) report(cmd *cobra.Command, started time.Time, set *ingestSet, res map[string]*ingestResult, rounds []map[string]*ingestResult, asIs, onGrid map[string]float64) error {
	w := fmt.Sprintf("%d jobs x %s", f.jobs, workload.JobName(f.samplesPerJob, f.tasks))
	r := &Report{Title: fmt.Sprintf("ingest: %d samples (%s per request, %d senders) into Peakline vs its peers", set.samples, workload.SizeName(f.batch), f.shards)}
	pairs := [][2]string{
		{"peakline JSON ingest", "victoriametrics JSON import"},
		{"peakline remote write", "prometheus remote write"},
		{"peakline remote write", "victoriametrics remote write"},
	}
	nan := math.NaN()
	for _, pr := range pairs {
		a, b := res[pr[0]], res[pr[1]]
		if a == nil {
			continue
		}
		peer, bv := pr[1], &ingestResult{rate: nan, cpuPerM: nan, diskPerS: nan}
		if b == nil {
			peer = pr[1] + " (not run)"
		} else {
			bv = b
		}
		r.Add(gain(w, pr[0], peer, "ingest throughput", "samples/s, higher is better", a.rate, bv.rate),
			cost(w, pr[0], peer, "server CPU per million samples", "CPU seconds, lower is better", a.cpuPerM, bv.cpuPerM),
			cost(w, pr[0], peer, "disk after compaction", "bytes per sample, lower is better", a.diskPerS, bv.diskPerS))
	}
	for _, sub := range []string{"peakline JSON ingest", "victoriametrics JSON import", "peakline remote write"} {
		if x := res[sub]; x != nil && sub != "victoriametrics JSON import" {
			r.Add(alone(w, sub, "request bytes per sample", "bytes on the wire, compressed", float64(x.wireBytes)/float64(set.samples)))
		}
	}
	for _, rs := range []string{"cpu", "memory", "pids"} {
		r.Add(cost("one job's "+rs+" series", "XOR chunks as generated (±3 ms jitter)", "XOR chunks, timestamps on the 250 ms grid", "XOR chunk payload", "bytes per sample, lower is better", asIs[rs], onGrid[rs]))
	}
	var counts []string
	for _, sub := range []string{"peakline JSON ingest", "victoriametrics JSON import", "peakline remote write", "prometheus remote write", "victoriametrics remote write"} {
		if x := res[sub]; x != nil {
			counts = append(counts, fmt.Sprintf("%s %.0f", sub, x.stored))
		}
	}
	r.Note("sent %d samples (task records and last events included); stored as each server counts them: %s.", set.samples, strings.Join(counts, ", "))
	for i, rr := range rounds {
		r.Note("round %d: %s.", i+1, roundSummary(rr, pairs))
	}
	r.Note("throughput is wall time on the shared %s machine with the senders on the same cores; CPU seconds are the server process's alone (utime+stime from /proc).", Machine())
	r.Note("the data is realistic, not tuned: timestamps jitter by ±3 ms and cpu values carry 3 decimals. 'XOR chunk payload' encodes one job's series alone as the TSDB does (120-sample XOR chunks, no index): the jitter costs a Prometheus chunk 16 bits per timestamp (a non-zero delta-of-delta), a timestamp on the grid 1 bit.")
	for _, n := range f.missingPeerNote {
		r.Note("%s", n)
	}
	var names []string
	var rates, cpus []float64
	for _, sub := range []string{"peakline JSON ingest", "victoriametrics JSON import", "peakline remote write", "prometheus remote write", "victoriametrics remote write"} {
		if x := res[sub]; x != nil {
			names = append(names, sub)
			rates = append(rates, x.rate/1e6)
			cpus = append(cpus, x.cpuPerM)
		}
	}
	r.Charts = []Chart{
		{Title: "ingest throughput", YLabel: "million samples/s", Categories: names, Lines: []Line{{Name: "samples/s", Y: rates}}},
		{Title: "server CPU per million samples", YLabel: "CPU seconds", Categories: names, Lines: []Line{{Name: "CPU s / 1M samples", Y: cpus}}},
	}
	return f.finish(cmd, r, started)
}

// roundSummary tells one round's rates and CPU per million samples, with
// each pair's ratio of rates, in the order of pairs.
func roundSummary(rr map[string]*ingestResult, pairs [][2]string) string {
	var parts []string
	done := map[string]bool{}
	for _, pr := range pairs {
		for _, sub := range pr {
			if x := rr[sub]; x != nil && !done[sub] {
				done[sub] = true
				parts = append(parts, fmt.Sprintf("%s %.2fM/s at %.3f CPU s/M", sub, x.rate/1e6, x.cpuPerM))
			}
		}
	}
	for _, pr := range pairs {
		a, b := rr[pr[0]], rr[pr[1]]
		if a != nil && b != nil {
			parts = append(parts, fmt.Sprintf("%s / %s %.2fx", pr[0], pr[1], a.rate/b.rate))
		}
	}
	return strings.Join(parts, "; ")
}
