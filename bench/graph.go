package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

type graphFlags struct {
	common
	sizes      string
	tasks      int
	points     int
	warm, cold int
	process    bool
	remote     bool
	dir        string
	budget     time.Duration
}

func graphCommand() *cobra.Command {
	var f graphFlags
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "The graph endpoint vs the promql engine's query_range on the same store, per job size",
		Long: `graph stores one finished synthetic job per size (--sizes samples per
resource, --tasks tasks, compacted into blocks) and asks for its whole
graph at --points points, next to the equivalent PromQL range query on the
same store:

  label_replace(max_over_time(peakline_cpu_percent{job_id="X"}[STEP]), "resource", "cpu", "", "")
  or (the same for peakline_memory_bytes and peakline_pids)

(the form max_over_time({__name__=~"peakline_(cpu_percent|memory_bytes|pids)",
job_id="X"}[STEP]) fails in PromQL: max_over_time drops the metric name and
the three series of a task collide)

from the job's start to its end at the step giving the same number of
points, evaluated by the Prometheus promql engine (NewEngine, 50M sample
limit, 2m timeout) over store.Queryable(). Variants, each with its peer:

  in-process cached    server handler + httptest recorder; warm reads hit
                       Peakline's decoded-job cache (tsdb/cache.go)
  in-process uncached  the same with the job cache off: the job is decoded
                       from the TSDB on every request, as promql must
  HTTP gzip            over loopback with Accept-Encoding: gzip; the peer is
                       the server's /prometheus/api/v1/query_range (MetricsQL
                       front over the same engine); bytes are bytes on the wire
  cold open            the first request after opening the store afresh
  cold process         a fresh peakline process (bench graph-once) per request

p50/p99 over --warm (or --cold) requests. The OS page cache stays warm in
every variant: nothing here drops it.

With --remote the store is VictoriaMetrics single-node instead (./bin or
PATH): each job is written through a stateless peakline serve
(--remote-write-url, --remote-query-url) and its graph, over loopback HTTP
with gzip, is timed against the engine's own raw read of the same job in
the same run: the instant query {job_id="X"}[span] and /api/v1/export.
Variants: a replica with its cache, one without (--remote-cache-ttl 1ns),
and the first request of a freshly started replica.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGraph(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.sizes, "sizes", "1e3,1e4,1e5,1e6", "job sizes: samples per resource")
	fl.IntVar(&f.tasks, "tasks", 200, "tasks per job")
	fl.IntVar(&f.points, "points", 1000, "points per graph (and per promql series)")
	fl.IntVar(&f.warm, "warm", 40, "warm requests per variant")
	fl.IntVar(&f.cold, "cold", 6, "cold requests per variant")
	fl.BoolVar(&f.process, "process", true, "also measure a fresh process per request")
	fl.DurationVar(&f.budget, "budget", 30*time.Second, "after 5 requests, stop a variant once its peer's requests took this long")
	fl.StringVar(&f.dir, "dir", "", "keep the stores under DIR (default: a temp dir, removed)")
	fl.BoolVar(&f.remote, "remote", false, "instead: the graph through a stateless peakline serve over VictoriaMetrics vs the engine's raw read of the job (graph_remote.go)")
	return cmd
}

// graphJob is one stored job and the two equivalent requests for it.
type graphJob struct {
	dir, id             string
	samples             int // per resource
	firstMs, lastMs     int64
	stepMs              int64
	graphPath, promPath string
	promQL              string
}

func newGraphJob(dir string, samples, tasks, points int, seed int64) (*graphJob, *workload.Stream) {
	id := "graph-" + workload.SizeName(samples)
	st := workload.NewStream(id, workload.JobSpec{Tasks: tasks, SamplesPerResource: samples, StartMs: workload.Start}, seed)
	g := &graphJob{dir: dir, id: id, samples: samples, firstMs: st.Tasks[0].StartMs, lastMs: st.LastEventMs}
	g.stepMs = max((g.lastMs-g.firstMs)/int64(points-1), 1)
	g.promQL = promQLFor(id, g.stepMs)
	g.graphPath = fmt.Sprintf("/api/v1/jobs/%s/graph?points=%d", url.PathEscape(id), points)
	q := url.Values{"query": {g.promQL}, "start": {msParam(g.firstMs)}, "end": {msParam(g.lastMs)}, "step": {msParam(g.stepMs)}}
	g.promPath = "/prometheus/api/v1/query_range?" + q.Encode()
	return g, st
}

// promQLFor is the PromQL equivalent of a job's graph: the max of each
// series over every step. The three metrics are selected separately and
// tagged with a resource label, because max_over_time drops __name__ and
// one regex selector over all three would make series of the same task
// collide ("vector cannot contain metrics with the same labelset").
func promQLFor(jobID string, stepMs int64) string {
	var parts []string
	for _, r := range tsdb.GraphedResources() {
		parts = append(parts, fmt.Sprintf(`label_replace(max_over_time(%s{job_id=%q}[%dms]), "resource", %q, "", "")`, r.Metric, jobID, stepMs, r.Name))
	}
	return strings.Join(parts, " or ")
}

// msParam writes unix ms as the seconds the Prometheus API takes.
func msParam(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

func runGraph(cmd *cobra.Command, f *graphFlags) error {
	started := time.Now()
	ctx := cmd.Context()
	if f.quick {
		if !cmd.Flags().Changed("sizes") {
			f.sizes = "1e3,1e4"
		}
		if !cmd.Flags().Changed("warm") {
			f.warm = 8
		}
		if !cmd.Flags().Changed("cold") {
			f.cold = 2
		}
	}
	sizes, err := parseSizes("sizes", f.sizes)
	if err != nil {
		return err
	}
	if f.points < 2 || f.points > 10000 {
		return usagef("--points: must be between 2 and 10000, got %d", f.points)
	}
	if f.warm < 1 || f.cold < 1 {
		return usagef("--warm and --cold: must be at least 1")
	}
	if f.remote {
		return runGraphRemote(cmd, f, sizes, started)
	}
	root := f.dir
	if root == "" {
		if root, err = os.MkdirTemp("", "peakline-bench-graph-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	r := &Report{Title: fmt.Sprintf("graph: whole-job graph at %d points vs promql query_range, same store", f.points)}
	curves := map[string][]float64{}
	steps := len(sizes) * (2*f.warm*3 + 2*f.cold + 1)
	if f.process {
		steps += len(sizes) * 2 * f.cold
	}
	bar := f.bar(cmd, steps, "graph")
	for _, size := range sizes {
		g, st := newGraphJob(filepath.Join(root, workload.SizeName(size)), size, f.tasks, f.points, f.seed)
		bar.Describe("graph: storing " + workload.JobName(size, f.tasks))
		if err := storeJob(ctx, g.dir, st); err != nil {
			return err
		}
		bar.Add(1)
		bar.Describe("graph: " + workload.JobName(size, f.tasks))
		if err := graphSize(ctx, f, g, r, curves, func() { bar.Add(1) }); err != nil {
			return fmt.Errorf("job of %s samples: %w", workload.SizeName(size), err)
		}
	}
	bar.Finish()
	xs := make([]float64, len(sizes))
	for i, s := range sizes {
		xs[i] = float64(s)
	}
	lat := Chart{Title: "graph p50 latency vs job size", XLabel: "samples per resource", YLabel: "ms (log)", LogX: true, LogY: true}
	for _, k := range []string{"graph cached", "graph uncached", "promql in-process", "graph cold open", "promql cold open"} {
		lat.Lines = append(lat.Lines, Line{Name: k, X: xs, Y: curves[k], Marks: true, Dashed: k[:6] == "promql"})
	}
	wire := Chart{Title: "response size on the wire (gzip)", XLabel: "samples per resource", YLabel: "bytes (log)", LogX: true, LogY: true,
		Lines: []Line{{Name: "graph", X: xs, Y: curves["graph wire"], Marks: true}, {Name: "promql query_range", X: xs, Y: curves["promql wire"], Marks: true, Dashed: true}}}
	r.Charts = []Chart{lat, wire}
	r.Note("speedup = promql's latency / the graph's on the same store in the same run; both read the same compacted blocks, with the OS page cache warm.")
	r.Note("'cached' reads hit Peakline's decoded-job cache (tsdb/cache.go, 20M samples by default); 'uncached' turns it off, so each request decodes the job from the TSDB like promql does.")
	r.Note("the HTTP peer is Peakline's own /prometheus/api/v1/query_range (MetricsQL parsed, then the same promql engine); its payload is the Prometheus JSON matrix, one series per task and resource.")
	return f.finish(cmd, r, started)
}

// storeJob writes a stream into a fresh store at dir and compacts it: a
// finished job in blocks. The store's clock stands at the job's last
// event: the synthetic job lies at a fixed time (workload.Start) that a
// long job stretches past the wall clock, beyond the admission window.
func storeJob(ctx context.Context, dir string, st *workload.Stream) error {
	jobEnd := time.UnixMilli(st.LastEventMs)
	store, err := tsdb.Open(dir, tsdb.Options{CacheSamples: -1, Now: func() time.Time { return jobEnd }}, nil, nil)
	if err != nil {
		return err
	}
	if err := appendStream(ctx, store, st, 200_000); err != nil {
		store.Close()
		return err
	}
	if err := store.Compact(ctx); err != nil {
		store.Close()
		return err
	}
	return store.Close()
}

// appendStream appends a whole stream to a store in batches of about
// maxSamples samples, task records with the batch of their first samples
// and the last event with the last batch.
func appendStream(ctx context.Context, store *tsdb.Store, st *workload.Stream, maxSamples int) error {
	st.Reset()
	var c workload.Chunk
	b := &tsdb.Batch{JobID: st.ID}
	n, nextTask := 0, 0
	flush := func(last bool) error {
		if last {
			for ; nextTask < len(st.Tasks); nextTask++ {
				b.Tasks = append(b.Tasks, storeTask(st.Tasks[nextTask]))
			}
			b.LastEvent = &tsdb.Event{Counter: st.LastCounter, TimeMs: st.LastEventMs}
		}
		if _, err := store.Append(ctx, b); err != nil {
			return fmt.Errorf("store job %s: %w", st.ID, err)
		}
		b = &tsdb.Batch{JobID: st.ID}
		n = 0
		return nil
	}
	for st.Next(&c, maxSamples/len(workload.TaskKinds)) {
		for ; nextTask <= c.Task; nextTask++ {
			b.Tasks = append(b.Tasks, storeTask(st.Tasks[nextTask]))
		}
		tk := st.Tasks[c.Task]
		for r, res := range c.Resources {
			b.Series = append(b.Series, tsdb.SeriesData{Resource: res, Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name,
				Ts: append([]int64(nil), c.Ts...), Vs: append([]float64(nil), c.Vs[r]...)})
		}
		if n += c.Samples(); n >= maxSamples {
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

func storeTask(t workload.Task) tsdb.Task {
	return tsdb.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.StartMs}
}

// timed is a series of request latencies and the size of the last answer.
type timed struct {
	d     []time.Duration
	bytes int64
}

func (t *timed) p(q float64) float64 { return percentile(durationsMs(t.d), q) }

// graphSize measures every variant for one stored job.
func graphSize(ctx context.Context, f *graphFlags, g *graphJob, r *Report, curves map[string][]float64, step func()) error {
	name := workload.JobName(g.samples, f.tasks)
	add := func(subject, peer string, a, b *timed, bytesMetric string) {
		r.Add(cost(name, subject, peer, "p50 latency", "ms, lower is better", a.p(50), b.p(50)),
			cost(name, subject, peer, "p99 latency", "ms, lower is better", a.p(99), b.p(99)))
		if bytesMetric != "" {
			r.Add(cost(name, subject, peer, bytesMetric, "bytes, lower is better", float64(a.bytes), float64(b.bytes)))
		}
	}
	// Warm, in process: uncached first, then cached, each against promql.
	for _, cached := range []bool{false, true} {
		opts := tsdb.Options{CacheSamples: -1}
		if cached {
			opts.CacheSamples = 0
		}
		store, err := tsdb.Open(g.dir, opts, nil, nil)
		if err != nil {
			return err
		}
		h, eng, err := graphHandlers(store)
		if err != nil {
			store.Close()
			return err
		}
		var gt, pt timed
		// One untimed request each first: the cached variant's first
		// request fills the cache, and promql's first loads postings.
		var warmup timed
		if err := warmup.graphInProcess(h, g); err != nil {
			store.Close()
			return err
		}
		if err := warmup.promqlInProcess(ctx, eng, store, g); err != nil {
			store.Close()
			return err
		}
		for i := 0; i < f.warm && !f.overBudget(i, &pt); i++ {
			if err := gt.graphInProcess(h, g); err != nil {
				store.Close()
				return err
			}
			if err := pt.promqlInProcess(ctx, eng, store, g); err != nil {
				store.Close()
				return err
			}
			step()
		}
		subject := "graph in-process uncached"
		if cached {
			subject = "graph in-process cached"
			curves["graph cached"] = append(curves["graph cached"], gt.p(50))
		} else {
			curves["graph uncached"] = append(curves["graph uncached"], gt.p(50))
			curves["promql in-process"] = append(curves["promql in-process"], pt.p(50))
		}
		add(subject, "promql engine in-process", &gt, &pt, "response bytes (JSON)")
		if cached {
			// Over loopback HTTP with gzip, the peer being the server's
			// own Prometheus query_range.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				store.Close()
				return err
			}
			hs := &http.Server{Handler: h}
			go func() { _ = hs.Serve(ln) }()
			base := "http://" + ln.Addr().String()
			var gw, pw timed
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			for i := 0; i < f.warm && !f.overBudget(i, &pw); i++ {
				if err := gw.getGzip(ctx, client, base+g.graphPath); err != nil {
					hs.Close()
					store.Close()
					return err
				}
				if err := pw.getGzip(ctx, client, base+g.promPath); err != nil {
					hs.Close()
					store.Close()
					return err
				}
				step()
			}
			hs.Close()
			add("graph HTTP gzip cached", "promql query_range HTTP gzip", &gw, &pw, "bytes on the wire (gzip)")
			curves["graph wire"] = append(curves["graph wire"], float64(gw.bytes))
			curves["promql wire"] = append(curves["promql wire"], float64(pw.bytes))
		}
		if err := store.Close(); err != nil {
			return err
		}
	}
	// Cold: a fresh store handle per request, in this process.
	var gc, pc timed
	for i := 0; i < f.cold && !f.overBudget(i, &pc); i++ {
		for _, promql := range []bool{false, true} {
			store, err := tsdb.Open(g.dir, tsdb.Options{}, nil, nil)
			if err != nil {
				return err
			}
			h, eng, err := graphHandlers(store)
			if err == nil {
				if promql {
					err = pc.promqlInProcess(ctx, eng, store, g)
				} else {
					err = gc.graphInProcess(h, g)
				}
			}
			if cerr := store.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			step()
		}
	}
	add("graph cold store open", "promql cold store open", &gc, &pc, "")
	curves["graph cold open"] = append(curves["graph cold open"], gc.p(50))
	curves["promql cold open"] = append(curves["promql cold open"], pc.p(50))
	if f.process {
		var gp, pp timed
		for i := 0; i < f.cold && !f.overBudget(i, &pp); i++ {
			for _, subject := range []string{"peakline", "promql"} {
				res, err := runGraphOnce(ctx, g, subject, f.points)
				if err != nil {
					return err
				}
				if subject == "promql" {
					pp.d = append(pp.d, res.Query)
				} else {
					gp.d = append(gp.d, res.Query)
				}
				step()
			}
		}
		add("graph cold process", "promql cold process", &gp, &pp, "")
	}
	return nil
}

// overBudget reports whether a variant has run long enough: at least
// minRequests requests, then until the peer's requests add up to --budget.
func (f *graphFlags) overBudget(done int, peer *timed) bool {
	const minRequests = 5
	if done < minRequests {
		return false
	}
	var sum time.Duration
	for _, d := range peer.d {
		sum += d
	}
	return sum > f.budget
}

// graphInProcess times one graph request through the handler.
func (t *timed) graphInProcess(h http.Handler, g *graphJob) error {
	req := httptest.NewRequest(http.MethodGet, g.graphPath, nil)
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	t.d = append(t.d, time.Since(start))
	if rec.Code != http.StatusOK || rec.Body.Len() < 100 {
		return fmt.Errorf("graph %s: status %d, %d bytes: %.200s", g.graphPath, rec.Code, rec.Body.Len(), rec.Body.String())
	}
	t.bytes = int64(rec.Body.Len())
	return nil
}

// getGzip times one GET asking for gzip and counts the bytes as sent.
func (t *timed) getGzip(ctx context.Context, client *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.d = append(t.d, time.Since(start))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n < 50 {
		return fmt.Errorf("GET %s: status %d, %d bytes", u, resp.StatusCode, n)
	}
	t.bytes = n
	return nil
}

// graphHandlers builds the server and a promql engine over one store.
func graphHandlers(store *tsdb.Store) (http.Handler, *promEngine, error) {
	srv, err := server.New(server.Config{}, store, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	return srv.Handler(), newPromEngine(), nil
}
