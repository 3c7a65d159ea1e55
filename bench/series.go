package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type seriesFlags struct {
	ingestFlags
	samplesPerTask int
	settle         time.Duration
	dayJobs        int
	headHours      float64
}

func seriesCommand() *cobra.Command {
	var f seriesFlags
	cmd := &cobra.Command{
		Use:   "series",
		Short: "Series churn: head memory and RSS per active series vs Prometheus and VictoriaMetrics",
		Long: `series sends --jobs jobs of --tasks tasks each (every task of every job is
new series: one per resource plus its task record) with --samples-per-task
samples per resource, by remote write, to a fresh peakline serve, a
Prometheus server and VictoriaMetrics, and reads from each what holding
those series costs: head series (prometheus_tsdb_head_series; VictoriaMetrics:
vm_new_timeseries_created_total), Go heap in use (go_memstats_heap_inuse_bytes
from /metrics) and RSS (/proc/PID/status) after the data, less the same
read before it, per series. It then extrapolates to a day of --day-jobs
jobs of the same shape: series per day, and head memory if the head holds
--head-hours of them (a Prometheus head keeps about 2-3 h of series
between compactions) or all of them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSeries(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.IntVar(&f.jobs, "jobs", 1000, "jobs, each with its own series")
	fl.IntVar(&f.tasks, "tasks", 50, "tasks per job")
	fl.IntVar(&f.samplesPerTask, "samples-per-task", 40, "samples per resource per task")
	fl.IntVar(&f.batch, "batch", 10_000, "samples per request")
	fl.IntVar(&f.shards, "shards", 2, "concurrent senders per server")
	fl.StringVar(&f.peers, "peers", "prometheus,victoriametrics", "peer servers to run")
	fl.BoolVar(&f.requirePeers, "require-peers", false, "fail when a peer binary is missing instead of leaving it out")
	fl.DurationVar(&f.settle, "settle", 5*time.Second, "wait after the last request before reading memory")
	fl.IntVar(&f.dayJobs, "day-jobs", 10_000, "jobs per day for the extrapolation")
	fl.Float64Var(&f.headHours, "head-hours", 3, "hours of series a head holds, for the extrapolation")
	return cmd
}

// memReading is what a server holds after a series workload.
type memReading struct {
	series         float64
	heapPerSeries  float64
	rssPerSeries   float64
	heapBase, heap float64
	rssBase, rss   float64
}

func runSeries(cmd *cobra.Command, f *seriesFlags) error {
	started := time.Now()
	ctx := cmd.Context()
	if f.quick {
		for flag, v := range map[string]string{"jobs": "20", "tasks": "10", "samples-per-task": "8", "settle": "1s"} {
			if !cmd.Flags().Changed(flag) {
				_ = cmd.Flags().Set(flag, v)
			}
		}
	}
	if f.jobs < 1 || f.tasks < 1 || f.samplesPerTask < 1 || f.batch < 1 || f.shards < 1 {
		return usagef("--jobs, --tasks, --samples-per-task, --batch and --shards: must be at least 1")
	}
	if err := f.resolvePeers(); err != nil {
		return err
	}
	spec := ingestSpec{jobs: f.jobs, samplesPerJob: f.tasks * f.samplesPerTask, tasks: f.tasks, batch: f.batch, shards: f.shards,
		endMs: time.Now().Add(-time.Minute).UnixMilli(), seed: f.seed}
	set, err := buildIngestSet(spec)
	if err != nil {
		return err
	}
	type server struct {
		name, seriesMetric string
		start              func(ctx context.Context, dir string) (*proc, error)
	}
	servers := []server{{"peakline", "prometheus_tsdb_head_series", func(ctx context.Context, dir string) (*proc, error) { return startPeakline(ctx, dir) }}}
	if f.enabled["prometheus"] {
		servers = append(servers, server{"prometheus", "prometheus_tsdb_head_series", func(ctx context.Context, dir string) (*proc, error) {
			return startPrometheus(ctx, f.prometheusBin, dir)
		}})
	}
	if f.enabled["victoriametrics"] {
		servers = append(servers, server{"victoriametrics", "vm_new_timeseries_created_total", func(ctx context.Context, dir string) (*proc, error) {
			return startVM(ctx, f.victoriaBin, dir)
		}})
	}
	bar := f.bar(cmd, len(servers), "series")
	got := map[string]memReading{}
	for _, sv := range servers {
		bar.Describe("series: " + sv.name)
		m, err := f.measureSeries(ctx, sv.name, sv.seriesMetric, sv.start, set)
		if err != nil {
			return fmt.Errorf("%s: %w", sv.name, err)
		}
		got[sv.name] = m
		bar.Add(1)
	}
	bar.Finish()
	return f.seriesReport(cmd, started, set, got)
}

// measureSeries starts a fresh server, reads its memory, sends the set by
// remote write, waits, and reads again.
func (f *seriesFlags) measureSeries(ctx context.Context, name, seriesMetric string, start func(context.Context, string) (*proc, error), set *ingestSet) (memReading, error) {
	dir, err := os.MkdirTemp("", "peakline-bench-series-")
	if err != nil {
		return memReading{}, err
	}
	defer os.RemoveAll(dir)
	p, err := start(ctx, dir)
	if err != nil {
		return memReading{}, err
	}
	defer p.stop()
	time.Sleep(f.settle / 2)
	read := func() (heap, rss float64, m map[string]float64, err error) {
		m, err = scrape(ctx, p.url+"/metrics", "go_memstats_heap_inuse_bytes", seriesMetric)
		if err != nil {
			return 0, 0, nil, err
		}
		st, err := readProc(p.pid())
		if err != nil {
			return 0, 0, nil, err
		}
		return m["go_memstats_heap_inuse_bytes"], float64(st.rss), m, nil
	}
	var r memReading
	if r.heapBase, r.rssBase, _, err = read(); err != nil {
		return r, err
	}
	if _, failed, firstErr := sendShards(ctx, p.url+"/api/v1/write", rwHeaders, set.rw); failed > 0 {
		return r, fmt.Errorf("%d requests failed, the first: %w\n%s", failed, firstErr, p.logs)
	}
	if name == "victoriametrics" {
		if err := vmSettle(ctx, p, set.samples); err != nil {
			return r, err
		}
	}
	time.Sleep(f.settle)
	var m map[string]float64
	if r.heap, r.rss, m, err = read(); err != nil {
		return r, err
	}
	r.series = m[seriesMetric]
	if r.series > 0 {
		r.heapPerSeries = (r.heap - r.heapBase) / r.series
		r.rssPerSeries = (r.rss - r.rssBase) / r.series
	}
	return r, nil
}

func (f *seriesFlags) seriesReport(cmd *cobra.Command, started time.Time, set *ingestSet, got map[string]memReading) error {
	w := fmt.Sprintf("%d jobs x %d tasks", f.jobs, f.tasks)
	seriesPerJob := float64(f.tasks*4 + 1)
	r := &Report{Title: fmt.Sprintf("series: %d jobs x %d tasks, up to %.0f new series (%d samples), by remote write", f.jobs, f.tasks, seriesPerJob*float64(f.jobs), set.samples)}
	pl := got["peakline"]
	if pl.series > 0 {
		// Tasks too short to have samples make no resource series.
		seriesPerJob = pl.series / float64(f.jobs)
	}
	dayAll := seriesPerJob * float64(f.dayJobs)
	dayHead := dayAll * math.Min(f.headHours/24, 1)
	dw := fmt.Sprintf("day of %d jobs x %d tasks", f.dayJobs, f.tasks)
	for _, peer := range []string{"prometheus", "victoriametrics"} {
		pv, ok := got[peer]
		if !ok {
			pv = memReading{series: math.NaN(), heapPerSeries: math.NaN(), rssPerSeries: math.NaN()}
			peer += " (not run)"
		}
		r.Add(cost(w, "peakline", peer, "series held", "series", pl.series, pv.series),
			cost(w, "peakline", peer, "Go heap per series", "bytes, lower is better", pl.heapPerSeries, pv.heapPerSeries),
			cost(w, "peakline", peer, "RSS per series", "bytes, lower is better", pl.rssPerSeries, pv.rssPerSeries),
			cost(dw, "peakline", peer, fmt.Sprintf("head RSS, %.0f h of series (%.0f)", f.headHours, dayHead), "MiB, lower is better", pl.rssPerSeries*dayHead/(1<<20), pv.rssPerSeries*dayHead/(1<<20)),
			cost(dw, "peakline", peer, fmt.Sprintf("head RSS, the whole day's series (%.0f)", dayAll), "MiB, lower is better", pl.rssPerSeries*dayAll/(1<<20), pv.rssPerSeries*dayAll/(1<<20)))
	}
	var lines []string
	for _, n := range []string{"peakline", "prometheus", "victoriametrics"} {
		if m, ok := got[n]; ok {
			lines = append(lines, fmt.Sprintf("%s heap %.0f -> %.0f MiB, RSS %.0f -> %.0f MiB, %.0f series",
				n, m.heapBase/(1<<20), m.heap/(1<<20), m.rssBase/(1<<20), m.rss/(1<<20), m.series))
		}
	}
	for _, n := range f.missingPeerNote {
		r.Note("%s", n)
	}
	r.Note("before -> after: %s.", strings.Join(lines, "; "))
	r.Note("every job makes up to %d tasks x (3 resources + 1 task record) + 1 last-event series (%.1f on average here: short tasks may have no samples); Peakline and Prometheus count head series, VictoriaMetrics series created.", f.tasks, seriesPerJob)
	r.Note("per-series figures are (after - before) / series, read %s after the last request without forcing a GC: they include buffers not yet freed, alike for all three.", f.settle)
	r.Note("the day's extrapolation multiplies RSS per series; a head compacts every 2 h and drops series without new samples, so %.0f h of series (%.0f) is what stays in memory, not the whole day's.", f.headHours, dayHead)
	var names []string
	var heap, rss []float64
	for _, n := range []string{"peakline", "prometheus", "victoriametrics"} {
		if m, ok := got[n]; ok {
			names = append(names, n)
			heap = append(heap, m.heapPerSeries)
			rss = append(rss, m.rssPerSeries)
		}
	}
	r.Charts = []Chart{{Title: "memory per active series", YLabel: "bytes per series", Categories: names,
		Lines: []Line{{Name: "Go heap in use", Y: heap}, {Name: "RSS", Y: rss}}}}
	return f.finish(cmd, r, started)
}
