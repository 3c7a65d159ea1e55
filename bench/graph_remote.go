package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/workload"
)

// graph --remote: the graph of a job through a stateless peakline serve
// over VictoriaMetrics single-node, against VictoriaMetrics' own raw read
// of the same job in the same run. The graph needs every raw sample of the
// job (it is exact: peak, per-task max and mean), so the engine's raw read
// is the floor the stateless server stands on; the ratio says what Peakline
// adds on top of it (transfer and decoding of the raw samples, downsampling,
// the payload), and whether its read (export where available) is the fast
// way to pull them.

// remoteGraphJob is one job written through the stateless server and the
// three requests timed against it.
type remoteGraphJob struct {
	id              string
	samples         int // per resource
	stored          int // every sample of the job: resources, task records, last event
	firstMs, lastMs int64
	graphPath       string // on peakline
	queryPath       string // on the engine: {job_id="X"}[span] at the last event
	exportPath      string // on the engine: /api/v1/export of the same samples
}

func newRemoteGraphJob(st *workload.Stream, samples, stored, points int) *remoteGraphJob {
	g := &remoteGraphJob{id: st.ID, samples: samples, stored: stored, firstMs: st.Tasks[0].StartMs, lastMs: st.LastEventMs}
	g.graphPath = fmt.Sprintf("/api/v1/jobs/%s/graph?points=%d", url.PathEscape(g.id), points)
	// A range selector leaves out its left edge: ask from 1 ms before the
	// first sample.
	sel := fmt.Sprintf(`{job_id=%q}`, g.id)
	q := url.Values{"query": {fmt.Sprintf("%s[%dms]", sel, g.lastMs-g.firstMs+1)}, "time": {msParam(g.lastMs)}}
	g.queryPath = "/api/v1/query?" + q.Encode()
	e := url.Values{"match[]": {sel}, "start": {msParam(g.firstMs - 1)}, "end": {msParam(g.lastMs)}}
	g.exportPath = "/api/v1/export?" + e.Encode()
	return g
}

// startVMForRemote runs VictoriaMetrics single-node as a Peakline engine:
// no query latency offset (a sample is readable once flushed) and no
// rollup cache, so every read, Peakline's and the bench's own, reads
// storage.
func startVMForRemote(ctx context.Context, bin, dir string) (*proc, error) {
	return startProc(ctx, "victoriametrics", dir, bin, nil, func(addr string) []string {
		return []string{"-storageDataPath=" + dir, "-httpListenAddr=" + addr, "-retentionPeriod=100y", "-loggerLevel=WARN",
			"-search.latencyOffset=0s", "-search.disableCache"}
	}, "/health")
}

// startStatelessPeakline runs `peakline serve` without a store of its own
// over the engine: writes go to writeURL, reads to queryBase's
// Prometheus API; dir holds only the collection policy file replicas
// share (settings.json).
func startStatelessPeakline(ctx context.Context, dir, writeURL, queryBase string, extra ...string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startProc(ctx, "peakline", dir, exe, nil, func(addr string) []string {
		return append([]string{"serve", "--remote-write-url", writeURL, "--remote-query-url", queryBase,
			"--settings", filepath.Join(dir, "settings.json"), "--listen", addr, "--log-level", "warn"}, extra...)
	}, "/healthz")
}

func runGraphRemote(cmd *cobra.Command, f *graphFlags, sizes []int, started time.Time) error {
	ctx := cmd.Context()
	vmBin, err := FindTool(toolVM)
	if err != nil {
		return fmt.Errorf("--remote: %w", err)
	}
	root := f.dir
	if root == "" {
		if root, err = os.MkdirTemp("", "peakline-bench-graph-remote-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	r := &Report{Title: fmt.Sprintf("graph --remote: whole-job graph at %d points through a stateless peakline over VictoriaMetrics vs the engine's raw read, same run", f.points)}
	curves := map[string][]float64{}
	bar := f.bar(cmd, len(sizes)*(1+f.warm+f.cold), "graph --remote")
	for _, size := range sizes {
		bar.Describe("graph --remote: " + workload.JobName(size, f.tasks))
		if err := graphRemoteSize(ctx, f, vmBin, root, size, r, curves, func() { bar.Add(1) }); err != nil {
			return fmt.Errorf("job of %s samples: %w", workload.SizeName(size), err)
		}
	}
	bar.Finish()
	xs := make([]float64, len(sizes))
	for i, s := range sizes {
		xs[i] = float64(s)
	}
	lat := Chart{Title: "p50 latency vs job size, stateless peakline over VictoriaMetrics", XLabel: "samples per resource", YLabel: "ms (log)", LogX: true, LogY: true}
	for _, k := range []string{"graph cached", "graph uncached", "graph fresh replica", "engine query", "engine export"} {
		lat.Lines = append(lat.Lines, Line{Name: k, X: xs, Y: curves[k], Marks: true, Dashed: strings.HasPrefix(k, "engine")})
	}
	r.Charts = []Chart{lat}
	r.Note("speedup = the engine's raw read latency / the graph's, in the same run, interleaved; both over loopback HTTP asking for gzip. Above 1: the graph through Peakline answers faster than the engine hands out the job's raw samples.")
	r.Note("the engine is VictoriaMetrics single-node (-search.latencyOffset=0s -search.disableCache: no rollup cache on either side); the job was written through the stateless peakline's remote write (it forwards to the engine's /api/v1/write), then flushed.")
	r.Note("engine query = GET /api/v1/query?query={job_id=\"X\"}[span+1ms]&time=<last event> (every raw sample of the job as a Prometheus matrix); engine export = GET /api/v1/export?match[]={job_id=\"X\"} (JSON lines), what a Prometheus-compatible client reads to draw the job exactly.")
	r.Note("'cached' repeats the request on one stateless replica (--remote-cache-ttl 24h: after the first request the job comes from its decoded-job cache); 'uncached' on a replica with --remote-cache-ttl 1ns (every request reads the job from the engine); 'fresh replica' is the first graph request of a newly started stateless serve (nothing cached, no connection to the engine yet, the process already listening).")
	return f.finish(cmd, r, started)
}

// graphRemoteSize writes one job through a fresh stateless peakline into a
// fresh VictoriaMetrics and times the graph against the engine's raw reads.
func graphRemoteSize(ctx context.Context, f *graphFlags, vmBin, root string, size int, r *Report, curves map[string][]float64, step func()) error {
	dir, err := os.MkdirTemp(root, workload.SizeName(size)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spec := ingestSpec{jobs: 1, samplesPerJob: size, tasks: f.tasks, batch: 10_000, shards: 2,
		endMs: time.Now().Add(-time.Minute).UnixMilli(), seed: f.seed}
	set, err := buildIngestSet(spec)
	if err != nil {
		return err
	}
	g := newRemoteGraphJob(spec.jobStreams()[0], size, set.samples, f.points)
	vm, err := startVMForRemote(ctx, vmBin, dir+"/vm")
	if err != nil {
		return err
	}
	defer vm.stop()
	writeURL, queryBase := vm.url+"/api/v1/write", vm.url
	// The cached replica keeps its entries for the whole run: nothing is
	// written while the graphs are timed, and the rounds of a large job
	// take longer than the default --remote-cache-ttl.
	pl, err := startStatelessPeakline(ctx, dir+"/peakline", writeURL, queryBase, "--remote-cache-ttl", "24h")
	if err != nil {
		return err
	}
	defer pl.stop()
	// A second replica whose cache entries expire at once: every graph
	// reads the job from the engine.
	nc, err := startStatelessPeakline(ctx, dir+"/peakline", writeURL, queryBase, "--remote-cache-ttl", "1ns")
	if err != nil {
		return err
	}
	defer nc.stop()
	if _, failed, firstErr := sendShards(ctx, pl.url+"/api/v1/write", rwHeaders, set.rw); failed > 0 {
		return fmt.Errorf("write through the stateless peakline: %d requests failed, the first: %w\n%s", failed, firstErr, pl.logs)
	}
	if err := vmSettle(ctx, vm, set.samples); err != nil {
		return err
	}
	step()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 5 * time.Minute}
	defer client.CloseIdleConnections()
	// Untimed, checked once: the graph counts every raw sample, the
	// engine's answers hold every stored sample of the job.
	for _, p := range []*proc{pl, nc} {
		if err := checkRemoteGraph(ctx, client, p.url+g.graphPath, g.samples); err != nil {
			return err
		}
	}
	if n, err := countQuerySamples(ctx, client, vm.url+g.queryPath); err != nil || n != g.stored {
		return fmt.Errorf("engine query %s: %d samples, want %d: %v", g.queryPath, n, g.stored, err)
	}
	if n, err := countExportSamples(ctx, client, vm.url+g.exportPath); err != nil || n != g.stored {
		return fmt.Errorf("engine export %s: %d samples, want %d: %v", g.exportPath, n, g.stored, err)
	}
	var gw, gu, eq, ex timed
	for i := 0; i < f.warm && !f.overBudget(i, &eq); i++ {
		if err := gw.getGzip(ctx, client, pl.url+g.graphPath); err != nil {
			return err
		}
		if err := gu.getGzip(ctx, client, nc.url+g.graphPath); err != nil {
			return err
		}
		if err := eq.getGzip(ctx, client, vm.url+g.queryPath); err != nil {
			return err
		}
		if err := ex.getGzip(ctx, client, vm.url+g.exportPath); err != nil {
			return err
		}
		step()
	}
	for _, p := range []*proc{pl, nc} {
		if err := p.stop(); err != nil {
			return err
		}
	}
	// A fresh replica per request: nothing cached, the engine unchanged.
	var gf, eqf timed
	for i := 0; i < f.cold && !f.overBudget(i, &eqf); i++ {
		fresh, err := startStatelessPeakline(ctx, dir+"/peakline", writeURL, queryBase)
		if err != nil {
			return err
		}
		err = gf.getGzip(ctx, client, fresh.url+g.graphPath)
		if serr := fresh.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		if err := eqf.getGzip(ctx, client, vm.url+g.queryPath); err != nil {
			return err
		}
		step()
	}
	name := workload.JobName(size, f.tasks)
	const (
		subjWarm  = "graph via stateless peakline, cached"
		subjCold  = "graph via stateless peakline, uncached"
		subjFresh = "graph via stateless peakline, fresh replica"
		peerQuery = "victoriametrics raw read: query {job_id}[span]"
		peerExp   = "victoriametrics raw read: /api/v1/export"
	)
	for _, c := range []struct {
		subject, peer string
		a, b          *timed
	}{{subjWarm, peerQuery, &gw, &eq}, {subjWarm, peerExp, &gw, &ex}, {subjCold, peerQuery, &gu, &eq}, {subjCold, peerExp, &gu, &ex},
		{subjFresh, peerQuery, &gf, &eqf}} {
		r.Add(cost(name, c.subject, c.peer, "p50 latency", "ms, lower is better", c.a.p(50), c.b.p(50)),
			cost(name, c.subject, c.peer, "p99 latency", "ms, lower is better", c.a.p(99), c.b.p(99)))
	}
	r.Add(cost(name, subjWarm, peerQuery, "bytes on the wire (gzip)", "bytes, lower is better", float64(gw.bytes), float64(eq.bytes)),
		cost(name, subjWarm, peerExp, "bytes on the wire (gzip)", "bytes, lower is better", float64(gw.bytes), float64(ex.bytes)))
	curves["graph cached"] = append(curves["graph cached"], gw.p(50))
	curves["graph uncached"] = append(curves["graph uncached"], gu.p(50))
	curves["graph fresh replica"] = append(curves["graph fresh replica"], gf.p(50))
	curves["engine query"] = append(curves["engine query"], eq.p(50))
	curves["engine export"] = append(curves["engine export"], ex.p(50))
	return nil
}

// checkRemoteGraph fetches a graph and checks that every resource counts
// want raw samples.
func checkRemoteGraph(ctx context.Context, client *http.Client, u string, want int) error {
	var doc struct {
		Series []struct {
			Resource   string `json:"resource"`
			RawSamples int    `json:"raw_samples"`
		} `json:"series"`
	}
	if err := getJSON(ctx, client, u, &doc); err != nil {
		return fmt.Errorf("graph: %w", err)
	}
	if len(doc.Series) != 3 {
		return fmt.Errorf("graph %s: %d resources, want 3", u, len(doc.Series))
	}
	for _, s := range doc.Series {
		if s.RawSamples != want {
			return fmt.Errorf("graph %s: %s counts %d raw samples, want %d", u, s.Resource, s.RawSamples, want)
		}
	}
	return nil
}

// countQuerySamples counts the samples of a Prometheus matrix answer.
func countQuerySamples(ctx context.Context, client *http.Client, u string) (int, error) {
	var doc struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Values [][2]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, client, u, &doc); err != nil {
		return 0, err
	}
	if doc.Status != "success" || doc.Data.ResultType != "matrix" {
		return 0, fmt.Errorf("status %q, result type %q, want success and matrix", doc.Status, doc.Data.ResultType)
	}
	n := 0
	for _, s := range doc.Data.Result {
		n += len(s.Values)
	}
	return n, nil
}

// countExportSamples counts the samples of VictoriaMetrics' JSON-lines
// export.
func countExportSamples(ctx context.Context, client *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("GET %s: %d: %s", u, resp.StatusCode, msg)
	}
	dec := json.NewDecoder(resp.Body)
	n := 0
	for lines := 1; ; lines++ {
		var line struct {
			Timestamps []int64 `json:"timestamps"`
		}
		err := dec.Decode(&line)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("decode export line %d: %w", lines, err)
		}
		n += len(line.Timestamps)
	}
}
