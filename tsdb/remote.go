package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/peakline/peakline/tsdb/remote"
)

// The remote backend: a Store over a Prometheus-compatible engine that
// operators already run (VictoriaMetrics, Prometheus, Mimir, Thanos),
// which holds every sample, task record and last event. The store keeps
// its write path (validation, the admission window, the duplicate rule,
// one lock per job within the process) and its read code (readJob, the
// jobs list, the query engine's Queryable), which run over the engine's
// storage.Queryable instead of the local TSDB's, so every answer is
// computed by the same code from the same samples. What differs:
//
//   - A commit is one remote write request; the engine's refusal (4xx)
//     is a Refusal (ReasonEngine), an engine that stays unavailable
//     through the retries is ErrEngineUnavailable (a server answers 503
//     with Retry-After, and collectors retry).
//   - Reads stream the engine's answers into columns within a memory
//     budget shared by all reads (Remote.MemoryBudget): a read the
//     budget cannot hold now is ErrRemoteBudget (503 with Retry-After);
//     an answer past its limit, or alone past the budget, is
//     ErrEngineAnswerTooLarge; an engine failing a read (5xx, an answer
//     that is not the API's) ErrEngineFailed, one not answering in time
//     ErrEngineTimeout.
//   - Deletes use the engine's delete API, so every replica sees them at
//     once; an engine without one refuses (ErrDeleteUnsupported).
//   - Retention is the engine's (VictoriaMetrics -retentionPeriod,
//     Prometheus --storage.tsdb.retention.time, Mimir's compactor
//     blocks retention): the store does not apply Options.Retention.
//   - Caches are caches: an entry lives at most Options.CacheTTL, so a
//     replica serves a job at most that much older than another
//     replica's write (its own writes drop it at once).
//   - Jobs list spans come from one query over all jobs where the engine
//     has VictoriaMetrics' tfirst_over_time and tlast_over_time, else
//     from each job's samples (cached like jobs).

// ErrEngineUnavailable is returned when the remote engine could not be
// reached or kept failing through the retries; the write or read may be
// retried later.
var ErrEngineUnavailable = remote.ErrUnavailable

// ErrEngineRejected is returned when the remote engine refused a read as
// invalid (a 4xx such as VictoriaMetrics' or Prometheus' query limits):
// the same request will be refused again; the message says why.
var ErrEngineRejected = remote.ErrRejected

// ErrEngineFailed is returned when the remote engine answered a read
// with a server error or with what is not its API's answer.
var ErrEngineFailed = remote.ErrFailed

// ErrEngineTimeout is returned when the remote engine did not answer a
// read within Remote.Timeout (or answered 504).
var ErrEngineTimeout = remote.ErrTimeout

// ErrEngineAnswerTooLarge is returned when the engine's answer to a read
// passed the most one answer may take, or its samples alone the memory
// budget: the message names the engine and the limit.
var ErrEngineAnswerTooLarge = remote.ErrTooLarge

// ErrRemoteBudget is returned when other reads hold the memory budget
// of a remote store (Remote.MemoryBudget): the read may pass later.
var ErrRemoteBudget = remote.ErrBudget

// ErrDeleteUnsupported is returned by Delete on an engine that has no
// series delete API.
var ErrDeleteUnsupported = remote.ErrDeleteUnsupported

// ReasonEngine is the Refusal reason of a write the remote engine
// refused (e.g. Prometheus without an out-of-order window refusing an
// old sample).
const ReasonEngine = "refused_by_engine"

// DefaultRemoteCacheTTL is Options.CacheTTL of a remote store when zero.
const DefaultRemoteCacheTTL = 10 * time.Second

// Remote says where a remote store's engine is.
type Remote struct {
	// WriteURL is the full URL of the engine's remote write endpoint.
	WriteURL string
	// QueryURL is the base of its Prometheus HTTP API (/api/v1/query is
	// appended).
	QueryURL string
	// HTTP is the client of both; nil means http.DefaultTransport.
	HTTP *http.Client
	// Header is sent with every request to the engine (a tenant id:
	// X-Scope-OrgID for Mimir, THANOS-TENANT for Thanos receive).
	Header http.Header
	// Timeout bounds one request to the engine; past it a read fails
	// with ErrEngineTimeout (a 504), a write with ErrEngineUnavailable
	// (a 503 with Retry-After).
	// Zero means one minute.
	Timeout time.Duration
	// MaxAnswerBytes bounds one answer of the engine; zero means
	// remote.DefaultMaxResponseBytes.
	MaxAnswerBytes int64
	// MemoryBudget bounds the bytes all reads of the engine decode and
	// hold at once; zero means remote.DefaultMemoryBudget.
	MemoryBudget int64
}

// OpenRemote returns a stateless store over the engine r names. It does
// not contact the engine: an engine down at start is an error of the
// first request, not of the server. reg may be nil.
func OpenRemote(r Remote, opts Options, logger *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Retention > 0 {
		return nil, errors.New("retention: a remote store keeps what its engine keeps; set the engine's retention instead")
	}
	if opts.CacheTTL < 0 {
		// The cache takes a ttl <= 0 as no bound, which a remote store
		// must not have: other replicas' writes would never show.
		return nil, fmt.Errorf("cache TTL: must not be negative, got %s", opts.CacheTTL)
	}
	client, err := remote.New(remote.Config{WriteURL: r.WriteURL, QueryURL: r.QueryURL, HTTP: r.HTTP, Header: r.Header, RequestTimeout: r.Timeout,
		MaxResponseBytes: r.MaxAnswerBytes, MemoryBudget: r.MemoryBudget,
		Relabel: schemaOnly, Logger: logger.With("component", "remote"), Registerer: reg})
	if err != nil {
		return nil, err
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultRemoteCacheTTL
	}
	s := &Store{logger: logger, cache: newCache(opts.CacheSamples), remote: client,
		now: opts.Now, maxFutureSkew: opts.MaxFutureSkew, deleteWait: opts.DeleteWait,
		deletes: noDeleter(), stop: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxFutureSkew <= 0 {
		s.maxFutureSkew = DefaultMaxFutureSkew
	}
	s.cache.ttl, s.cache.now = opts.CacheTTL, s.now
	return s, nil
}

// noDeleter is the deleter of a remote store: nothing is ever pending,
// deletes happen in the engine.
func noDeleter() *deleter {
	d := &deleter{records: map[string]string{}, removed: map[string]string{}, changed: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "unused"}), deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"})}
	close(d.done)
	return d
}

// IsRemote reports whether the store's samples live in a remote engine.
func (s *Store) IsRemote() bool { return s.remote != nil }

// remoteRange clamps a query range to the times a store may hold: from
// the earliest admissible time to an hour past what the admission window
// takes now (the hour covers replicas whose clocks differ).
func (s *Store) remoteRange(mint, maxt int64) (int64, int64) {
	return max(mint, earliestMs), min(maxt, s.now().Add(s.maxFutureSkew+time.Hour).UnixMilli())
}

// schemaLabels are the labels Peakline writes on its own series (those
// whose metric name starts with peakline_). Reading from an engine, such
// a series keeps only these: engines add their own (Thanos receive adds
// receive_replica and tenant_id, a Prometheus agent may add external
// labels), which must not split a task's series in two. A new series
// kind with labels of its own adds them here.
var schemaLabels = func() map[string]bool {
	m := map[string]bool{
		labels.MetricName: true, LabelJob: true, LabelCounter: true, LabelTaskUUID: true, LabelTask: true,
		// A task's identity across runs of a template.
		LabelPlay: true, LabelRole: true, LabelTaskPath: true,
	}
	// The job info series: every field of JobInfo (template, AWX
	// fields, sizing).
	var info JobInfo
	for _, f := range infoFields(&info) {
		m[f.label] = true
	}
	return m
}()

// schemaOnly drops labels outside schemaLabels from a Peakline series.
func schemaOnly(ls labels.Labels) labels.Labels {
	if !strings.HasPrefix(ls.Get(labels.MetricName), "peakline_") {
		return ls
	}
	extra := false
	ls.Range(func(l labels.Label) { extra = extra || !schemaLabels[l.Name] })
	if !extra {
		return ls
	}
	b := labels.NewBuilder(ls)
	ls.Range(func(l labels.Label) {
		if !schemaLabels[l.Name] {
			b.Del(l.Name)
		}
	})
	return b.Labels()
}

// rowAppender is what writeRows appends through: the TSDB's appender or
// a remote write request.
type rowAppender interface {
	Append(ref storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error)
	AppendHistogram(ref storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error)
	Commit() error
	Rollback() error
}

// appender starts one transaction of the backend.
func (s *Store) appender(ctx context.Context) rowAppender {
	if s.remote != nil {
		return s.remote.Appender(ctx)
	}
	return s.db.Appender(ctx)
}

// deleteRemote deletes a job in the engine, under the job's lock within
// this process.
func (s *Store) deleteRemote(ctx context.Context, jobID string) error {
	unlock := s.lockJob(jobID)
	defer unlock()
	match := labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID)
	q, err := s.querier(minTime, maxTime)
	if err != nil {
		return err
	}
	ids, _, err := q.LabelValues(ctx, LabelJob, nil, match)
	q.Close()
	if err != nil {
		return fmt.Errorf("look up job %q: %w", jobID, err)
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}
	defer s.cache.drop(jobID)
	if err := s.remote.Delete(ctx, match); err != nil {
		return fmt.Errorf("delete job %q: %w", jobID, err)
	}
	return nil
}

// spanFuncs are the engine functions that give the first and last
// sample time of each series over a range: VictoriaMetrics' MetricsQL
// ones, then Prometheus' experimental ones (Prometheus
// --enable-feature=promql-experimental-functions, Mimir
// -querier.promql-experimental-functions-enabled). Prometheus drops the
// metric name before aggregating, so that a task's series of different
// metrics would collide: it is asked one metric name at a time.
var spanFuncs = []struct {
	first, last string
	perName     bool
}{
	{"tfirst_over_time", "tlast_over_time", false},
	{"ts_of_first_over_time", "ts_of_last_over_time", true},
}

// remoteSpans reads the spans of jobs ids (sorted) from the engine: with
// two queries over all jobs where the engine has one of spanFuncs, else
// (or when the engine finds the query too large) from each job's series.
func (s *Store) remoteSpans(ctx context.Context, ids []string) (map[string]Span, error) {
	for k := max(int(s.spansFast.Load())-1, 0); k < len(spanFuncs) && s.spansFast.Load() >= 0; k++ {
		f := spanFuncs[k]
		out, err := s.spansByQuery(ctx, f.first, f.last, f.perName)
		switch {
		case err == nil:
			s.spansFast.Store(int32(k + 1))
			return out, nil
		case remote.IsTooLarge(err):
			s.logger.Warn("the engine finds the jobs list's span query too large; reading each job", "err", err)
			return s.spansOneByOne(ctx, ids)
		case errors.Is(err, remote.ErrRejected) && s.spansFast.Load() == 0:
			continue // the engine lacks these functions: try the next
		default:
			return nil, err
		}
	}
	if s.spansFast.CompareAndSwap(0, -1) {
		s.logger.Info("the engine has none of tfirst_over_time, ts_of_first_over_time; jobs list spans come from each job's samples")
	}
	return s.spansOneByOne(ctx, ids)
}

// spansOneByOne reads the spans of ids from each job's series.
func (s *Store) spansOneByOne(ctx context.Context, ids []string) (map[string]Span, error) {
	out := make(map[string]Span, len(ids))
	for _, id := range ids {
		m, err := s.spansOfSeries(ctx, labels.MustNewMatcher(labels.MatchEqual, LabelJob, id))
		if err != nil {
			return nil, err
		}
		out[id] = m[id]
	}
	return out, nil
}

// spansByQuery asks the engine for the first and last sample time of
// every job with the functions first and last: in two queries, or two
// per metric name of the series with a job id.
func (s *Store) spansByQuery(ctx context.Context, first, last string, perName bool) (map[string]Span, error) {
	lo, hi := s.remoteRange(minTime, maxTime)
	sels := []string{fmt.Sprintf(`{%s!=""}`, LabelJob)}
	if perName {
		q, err := s.querier(minTime, maxTime)
		if err != nil {
			return nil, err
		}
		names, _, err := q.LabelValues(ctx, labels.MetricName, nil, labels.MustNewMatcher(labels.MatchNotEqual, LabelJob, ""))
		q.Close()
		if err != nil {
			return nil, err
		}
		sels = sels[:0]
		for _, n := range names {
			sels = append(sels, fmt.Sprintf(`{%s=%q,%s!=""}`, labels.MetricName, n, LabelJob))
		}
	}
	out := map[string]Span{}
	for _, sel := range sels {
		rng := fmt.Sprintf("%s[%dms]", sel, hi-lo+1)
		firsts, err := s.remote.Query(ctx, fmt.Sprintf("min by (%s) (%s(%s))", LabelJob, first, rng), hi)
		if err != nil {
			return nil, err
		}
		lasts, err := s.remote.Query(ctx, fmt.Sprintf("max by (%s) (%s(%s))", LabelJob, last, rng), hi)
		if err != nil {
			return nil, err
		}
		for _, smp := range firsts {
			id := smp.Labels.Get(LabelJob)
			sp, ok := out[id]
			if !ok {
				sp = Span{ID: id, FirstMs: math.MaxInt64, LastMs: math.MinInt64}
			}
			sp.FirstMs = min(sp.FirstMs, secondsToMs(smp.V))
			out[id] = sp
		}
		for _, smp := range lasts {
			id := smp.Labels.Get(LabelJob)
			if sp, ok := out[id]; ok {
				sp.LastMs = max(sp.LastMs, secondsToMs(smp.V))
				out[id] = sp
			}
		}
	}
	for id, sp := range out {
		if sp.LastMs < sp.FirstMs {
			out[id] = Span{ID: id}
		}
	}
	return out, nil
}

// secondsToMs turns a time in unix seconds, as a query value, into ms.
func secondsToMs(sec float64) int64 { return int64(math.Round(sec * 1000)) }

// spansOfSeries reads the spans of the jobs of the series m selects from
// their samples: the first and last time of any series, as the embedded
// store's chunk bounds give them.
func (s *Store) spansOfSeries(ctx context.Context, m *labels.Matcher) (map[string]Span, error) {
	q, err := s.querier(minTime, maxTime)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	out := map[string]Span{}
	set := q.Select(ctx, false, nil, m)
	for set.Next() {
		series := set.At()
		id := series.Labels().Get(LabelJob)
		sp, ok := out[id]
		if !ok {
			sp = Span{ID: id, FirstMs: math.MaxInt64, LastMs: math.MinInt64}
		}
		it := series.Iterator(nil)
		for it.Next() != 0 {
			t := it.AtT()
			sp.FirstMs, sp.LastMs = min(sp.FirstMs, t), max(sp.LastMs, t)
		}
		out[id] = sp
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("read job spans: %w", err)
	}
	for id, sp := range out {
		if sp.FirstMs > sp.LastMs {
			out[id] = Span{ID: id}
		}
	}
	return out, nil
}
