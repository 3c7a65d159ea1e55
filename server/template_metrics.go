package server

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/history"
)

// Bounds of the per-template series of /metrics.
const (
	// maxTemplateMetrics caps the templates with series: those whose
	// newest run is newest; peakline_template_metrics_omitted counts the
	// rest. With five series a template, /metrics stays under 5,001
	// template series whatever the store holds.
	maxTemplateMetrics = 1000
	// templateMetricsEvery is how stale the figures may get: a scrape
	// recomputes them when they are older.
	templateMetricsEvery = 30 * time.Second
	// templateMetricsTimeout bounds one recomputation.
	templateMetricsTimeout = 20 * time.Second
)

// templateFigure is what /metrics says of one template, over its last
// defaultHistoryRuns runs.
type templateFigure struct {
	id             string
	newestMs       int64
	runs           int
	oomKilled      int
	atCap          int
	regressions    int     // flagged in the newest run (-1: not judged yet)
	memoryMaxBytes float64 // highest run peak
	limitBytes     float64 // the newest run's memory limit; 0 none known
}

// templateMetrics is the prometheus.Collector of the per-template
// series: runs OOM-killed and at their memory cap among each template's
// last runs, the regressions flagged in its newest run, its highest
// memory peak and its current memory limit. Summaries and info are
// cached by the store, so a recomputation reads little; the regressions
// of a template are judged again only when it has a new newest run, and
// with the heavy-read pool's memory (kept from the last time when the
// pool is busy). Safe for concurrent use.
type templateMetrics struct {
	s   *Server
	now func() time.Time

	mu       sync.Mutex
	at       time.Time
	figures  []templateFigure
	omitted  int
	judged   map[string]judgedRun // template → its newest run's regressions
	failures int

	runs, oom, atCap, regs, memMax, limit, omittedDesc, errorsDesc *prometheus.Desc
}

type judgedRun struct {
	jobID       string
	regressions int
}

func newTemplateMetrics(s *Server, now func() time.Time) *templateMetrics {
	l := []string{"template_id"}
	return &templateMetrics{
		s: s, now: now, judged: map[string]judgedRun{},
		runs:        prometheus.NewDesc("peakline_template_runs", "Runs of the job template in its window (its last 20 runs).", l, nil),
		oom:         prometheus.NewDesc("peakline_template_runs_oom_killed", "Runs among the template's last 20 with an OOM kill in their cgroup.", l, nil),
		atCap:       prometheus.NewDesc("peakline_template_runs_at_cap", "Runs among the template's last 20 (not OOM-killed) whose memory peak reached 95% of their memory limit.", l, nil),
		regs:        prometheus.NewDesc("peakline_template_regressions", "Regressions (not contended) the history rule flags in the template's newest run.", l, nil),
		memMax:      prometheus.NewDesc("peakline_template_memory_max_bytes", "Highest memory peak of a run among the template's last 20.", l, nil),
		limit:       prometheus.NewDesc("peakline_template_memory_limit_bytes", "Memory limit of the template's newest run that had one.", l, nil),
		omittedDesc: prometheus.NewDesc("peakline_template_metrics_omitted", "Templates left out of the per-template series (past the newest 1000).", nil, nil),
		errorsDesc:  prometheus.NewDesc("peakline_template_metrics_errors_total", "Recomputations of the per-template series that failed (the previous figures are served).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *templateMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.runs, m.oom, m.atCap, m.regs, m.memMax, m.limit, m.omittedDesc, m.errorsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *templateMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() || m.now().Sub(m.at) >= templateMetricsEvery {
		ctx, cancel := context.WithTimeout(context.Background(), templateMetricsTimeout)
		if err := m.refresh(ctx); err != nil {
			m.failures++
			m.s.logger.Warn("template metrics", "err", err)
		}
		cancel()
		m.at = m.now()
	}
	g := func(d *prometheus.Desc, v float64, id string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
	}
	for _, f := range m.figures {
		g(m.runs, float64(f.runs), f.id)
		g(m.oom, float64(f.oomKilled), f.id)
		g(m.atCap, float64(f.atCap), f.id)
		if f.regressions >= 0 {
			g(m.regs, float64(f.regressions), f.id)
		}
		g(m.memMax, f.memoryMaxBytes, f.id)
		if f.limitBytes > 0 {
			g(m.limit, f.limitBytes, f.id)
		}
	}
	ch <- prometheus.MustNewConstMetric(m.omittedDesc, prometheus.GaugeValue, float64(m.omitted))
	ch <- prometheus.MustNewConstMetric(m.errorsDesc, prometheus.CounterValue, float64(m.failures))
}

// refresh recomputes the figures; on an error the old ones stay.
func (m *templateMetrics) refresh(ctx context.Context) error {
	ids, err := m.s.store.TemplateIDs(ctx)
	if err != nil {
		return err
	}
	spans, err := m.s.store.Spans(ctx)
	if err != nil {
		return err
	}
	spanOf := make(map[string]tsdb.Span, len(spans))
	for _, sp := range spans {
		spanOf[sp.ID] = sp
	}
	type tmpl struct {
		id    string
		spans []tsdb.Span
	}
	var all []tmpl
	for _, id := range ids {
		jobs, err := m.s.store.TemplateJobs(ctx, id)
		if err != nil {
			return err
		}
		t := tmpl{id: id}
		for _, j := range jobs {
			if sp, ok := spanOf[j]; ok {
				t.spans = append(t.spans, sp)
			}
		}
		if len(t.spans) == 0 {
			continue
		}
		slices.SortFunc(t.spans, func(a, b tsdb.Span) int {
			return cmp.Or(cmp.Compare(a.FirstMs, b.FirstMs), cmp.Compare(a.ID, b.ID))
		})
		t.spans = t.spans[max(0, len(t.spans)-defaultHistoryRuns):]
		all = append(all, t)
	}
	// The templates run most recently keep their series.
	slices.SortFunc(all, func(a, b tmpl) int {
		return cmp.Or(cmp.Compare(b.spans[len(b.spans)-1].FirstMs, a.spans[len(a.spans)-1].FirstMs), cmp.Compare(a.id, b.id))
	})
	omitted := max(0, len(all)-maxTemplateMetrics)
	all = all[:len(all)-omitted]
	figures := make([]templateFigure, 0, len(all))
	judged := make(map[string]judgedRun, len(all))
	for _, t := range all {
		f := templateFigure{id: t.id, runs: len(t.spans), regressions: -1, newestMs: t.spans[len(t.spans)-1].FirstMs}
		for _, sp := range t.spans {
			sum, err := m.s.store.Summary(ctx, sp.ID)
			if errors.Is(err, tsdb.ErrJobNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			z := sizingEntry(sum)
			for _, r := range sum.Resources {
				if r.Resource.Name == "memory" && r.Samples > 0 {
					f.memoryMaxBytes = max(f.memoryMaxBytes, r.Peak)
				}
			}
			if z != nil {
				if z.OOMKills > 0 {
					f.oomKilled++
				}
				if z.AtCap {
					f.atCap++
				}
				if z.MemoryLimitBytes > 0 {
					f.limitBytes = float64(z.MemoryLimitBytes)
				}
			}
		}
		newest := t.spans[len(t.spans)-1].ID
		if j, ok := m.judged[t.id]; ok && j.jobID == newest {
			f.regressions = j.regressions
		} else if n, ok, err := m.regressionsOf(ctx, t.id, newest); err != nil {
			return err
		} else if ok {
			f.regressions = n
		}
		if f.regressions >= 0 {
			judged[t.id] = judgedRun{jobID: newest, regressions: f.regressions}
		}
		figures = append(figures, f)
	}
	m.figures, m.omitted, m.judged = figures, omitted, judged
	return nil
}

// regressionsOf counts the regressions (not contended) the history rule
// flags in run jobID of template id; ok is false when the heavy-read pool
// had no room for the read.
func (m *templateMetrics) regressionsOf(ctx context.Context, id, jobID string) (n int, ok bool, err error) {
	busy := errors.New("busy")
	runs, _, _, release, err := m.s.readTemplateRuns(ctx, id, defaultHistoryRuns, jobID, func(_ string, bytes int64) (func(), error) {
		r, ok := m.s.reads.tryReserve(bytes)
		if !ok {
			return nil, busy
		}
		return r, nil
	})
	if errors.Is(err, busy) || errors.Is(err, errNoSuchRun) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer release()
	rule := m.s.regressionRule()
	rule.MaxStall = history.DefaultMaxStall // as the history API judges by default
	h := history.Build(id, "", runs, rule, maxHistoryTasks)
	for _, t := range h.Tasks {
		for _, r := range t.Regressions {
			if r.JobID == jobID && !r.Contended {
				n++
			}
		}
	}
	return n, true, nil
}
