package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// procSample is the server's RSS and CPU time at one moment.
type procSample struct {
	at   time.Duration // since sampling started
	rss  int64
	cpu  time.Duration
	load float64 // the machine's 1-minute load average
}

// sampleProc reads /proc/PID every interval until ctx is done, calling
// tick after each read.
// loadAverage is the machine's 1-minute load average, NaN if unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func sampleProc(ctx context.Context, pid int, interval time.Duration, tick func()) []procSample {
	var out []procSample
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if st, err := readProc(pid); err == nil {
			out = append(out, procSample{at: time.Since(start), rss: st.rss, cpu: st.cpu, load: loadAverage()})
		}
		tick()
		select {
		case <-ctx.Done():
			if st, err := readProc(pid); err == nil {
				out = append(out, procSample{at: time.Since(start), rss: st.rss, cpu: st.cpu})
			}
			return out
		case <-t.C:
		}
	}
}

func (f *soakFlags) soakReport(cmd *cobra.Command, started time.Time, s *soakRun, stats []procSample, idle, idleCached []float64, c countResult) error {
	w := fmt.Sprintf("%d jobs x 4 Hz x 3 res, %s", f.jobs, f.duration)
	r := &Report{Title: fmt.Sprintf("soak: %d live jobs through JSON ingest for %s, graphs under load vs idle", f.jobs, f.duration)}
	r.Add(cost(w, "graph p50 under load", "graph p50 idle (uncached)", "graph latency under load vs idle", "ms, lower is better", percentile(s.loadMs, 50), percentile(idle, 50)),
		cost(w, "graph p99 under load", "graph p99 idle (uncached)", "graph latency under load vs idle", "ms, lower is better", percentile(s.loadMs, 99), percentile(idle, 99)),
		cost(w, "graph p50 under load", "graph p50 idle (cached)", "graph latency under load vs idle", "ms, lower is better", percentile(s.loadMs, 50), percentile(idleCached, 50)),
		cost(w, "graph p99 under load", "graph p99 idle (cached)", "graph latency under load vs idle", "ms, lower is better", percentile(s.loadMs, 99), percentile(idleCached, 99)))
	r.Add(alone(w, "p50", "graph of a live job under load", "ms", percentile(s.liveMs, 50)),
		alone(w, "p99", "graph of a live job under load", "ms", percentile(s.liveMs, 99)))
	r.Add(alone(w, "p50", "ingest request latency", "ms", percentile(s.ingestMs, 50)),
		alone(w, "p99", "ingest request latency", "ms", percentile(s.ingestMs, 99)),
		alone(w, "p50", "ingest lag (oldest sample's age at ack)", "ms", percentile(s.lagMs, 50)),
		alone(w, "p99", "ingest lag (oldest sample's age at ack)", "ms", percentile(s.lagMs, 99)),
		alone(w, "max", "ingest lag (oldest sample's age at ack)", "ms", percentile(s.lagMs, 100)),
		alone(w, "batches", "ingest requests", "count", float64(len(s.ingestMs))))
	var maxRSS, lastRSS int64
	var cpuCores float64
	if n := len(stats); n > 1 {
		for _, st := range stats {
			maxRSS = max(maxRSS, st.rss)
		}
		lastRSS = stats[n-1].rss
		cpuCores = (stats[n-1].cpu - stats[0].cpu).Seconds() / (stats[n-1].at - stats[0].at).Seconds()
	}
	r.Add(alone(w, "max", "server RSS", "MiB", float64(maxRSS)/(1<<20)),
		alone(w, "at end", "server RSS", "MiB", float64(lastRSS)/(1<<20)),
		alone(w, "mean over the load", "server CPU", "cores", cpuCores))
	r.Add(gain(w, "samples stored", "samples sent", "count check", "samples", float64(c.stored), float64(c.sent)),
		alone(w, "samples lost (sent, not stored)", "count check", "samples", float64(c.lost)),
		alone(w, "samples extra (stored, not sent)", "count check", "samples", float64(c.extra)),
		alone(w, "duplicates and conflicts in ingest answers", "count check", "samples", float64(c.duplicates+c.conflicts)),
		alone(w, "jobs checked", "count check", "jobs", float64(c.jobs)))
	ok := c.lost == 0 && c.extra == 0 && c.duplicates == 0 && c.conflicts == 0 && c.acked == c.sent
	r.Note("count check: %d jobs, %d samples sent, %d acknowledged as stored, %d stored (/api/v1/jobs): %s.", c.jobs, c.sent, c.acked, c.stored,
		map[bool]string{true: "every sample stored exactly once", false: "MISMATCH"}[ok])
	r.Note("'under load' and 'idle' are the same requests: the graph of one of %d finished reference jobs (%s of samples each), after re-sending its last event (untimed) so the job is decoded from the TSDB again; %d under load, %d idle; 'cached' repeats the idle request at once. %d requests of live jobs (written every %s) ran under load besides.", len(s.refs), f.jobLength, len(s.loadMs), len(idle), len(s.liveMs), f.flush)
	var loadSum float64
	for _, st := range stats {
		loadSum += st.load
	}
	r.Note("idle before the load: p50 %.1f ms, p99 %.1f ms (load average %.2f); after: p50 %.1f ms, p99 %.1f ms (load average %.2f); the machine's load average during the load: %.2f on %d cores, this bench's server and clients included.",
		percentile(s.idleBefore, 50), percentile(s.idleBefore, 99), s.loadBefore, percentile(s.idleAfter, 50), percentile(s.idleAfter, 99), s.loadAfter, loadSum/float64(max(len(stats), 1)), runtime.NumCPU())
	if p99, idle99 := percentile(s.loadMs, 99), percentile(idle, 99); !math.IsNaN(p99) {
		verdict := "within"
		if p99 > 2*idle99 {
			verdict = "NOT within"
		}
		r.Note("target: graph p99 under load within 2x of idle: %.1f ms vs %.1f ms, %.2fx, %s.", p99, idle99, p99/idle99, verdict)
	}
	secs := func(ds []procSample) (x []float64) {
		for _, d := range ds {
			x = append(x, d.at.Seconds())
		}
		return x
	}
	var rss, cpu []float64
	for i, st := range stats {
		rss = append(rss, float64(st.rss)/(1<<20))
		if i == 0 {
			cpu = append(cpu, math.NaN())
			continue
		}
		cpu = append(cpu, (st.cpu-stats[i-1].cpu).Seconds()/(st.at-stats[i-1].at).Seconds())
	}
	r.Charts = []Chart{
		{Title: "graph latency under load", XLabel: "seconds", YLabel: "ms", Lines: []Line{{Name: "reference job under load", X: s.loadAt, Y: s.loadMs, Dots: true},
			{Name: "live job under load", X: s.liveAt, Y: s.liveMs, Dots: true},
			{Name: "idle p99 (uncached)", X: span(s.loadAt), Y: []float64{percentile(idle, 99), percentile(idle, 99)}, Dashed: true},
			{Name: "load p99", X: span(s.loadAt), Y: []float64{percentile(s.loadMs, 99), percentile(s.loadMs, 99)}, Dashed: true}}},
		{Title: "server RSS", XLabel: "seconds", YLabel: "MiB", Lines: []Line{{Name: "RSS", X: secs(stats), Y: rss}}},
		{Title: "server CPU", XLabel: "seconds", YLabel: "cores", Lines: []Line{{Name: "CPU", X: secs(stats), Y: cpu}}},
	}
	return f.finish(cmd, r, started)
}

// span is the first and last of xs (sorted), for a flat reference line.
func span(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	return []float64{xs[0], xs[len(xs)-1]}
}
