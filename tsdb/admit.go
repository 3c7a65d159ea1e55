package tsdb

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/peakline/peakline/tsdb/remote"
)

// Admission: one check of times, labels and values for every write,
// whatever protocol it came by (JSON ingest, remote write, import).
// A sample the head would take but that would break the store is refused
// here: one sample in microseconds once moved the head's window so far
// ahead that every later append failed as "too old", for good.

// DefaultMaxFutureSkew is how far ahead of the store's clock a sample may
// be when Options.MaxFutureSkew is zero (as in Prometheus).
const DefaultMaxFutureSkew = 10 * time.Minute

// earliestMs is the earliest time a sample may carry: 2000-01-01T00:00:00Z.
// Nothing Peakline stores is older; a smaller number is a unit mistake.
var earliestMs = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// year10000Ms is the first millisecond of the year 10000.
var year10000Ms = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// Reasons of a Refusal, also the reason label of the server's
// rejected-samples counter.
const (
	ReasonTooFarInFuture  = "too_far_in_future"
	ReasonTooOld          = "too_old"
	ReasonNotMilliseconds = "not_milliseconds"
	ReasonNonFinite       = "non_finite"
	ReasonLabels          = "invalid_labels"
	ReasonPeaklineLabels  = "invalid_peakline_labels"
	ReasonOutOfOrder      = "out_of_order"
	ReasonOutOfBounds     = "out_of_bounds"
	ReasonDuplicate       = "duplicate_timestamp"
	ReasonHistogram       = "invalid_histogram"
)

// Refusal is a write the store refuses as a whole. It wraps ErrInvalid;
// its text names the field, index and value and what would be right.
type Refusal struct {
	Reason string // one of the Reason constants
	Msg    string // "series[2].t[17]: 1796010000000000 looks like microseconds; send unix milliseconds"
}

func (e *Refusal) Error() string { return ErrInvalid.Error() + ": " + e.Msg }
func (e *Refusal) Unwrap() error { return ErrInvalid }

func refuse(reason, field, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Msg: field + ": " + fmt.Sprintf(format, args...)}
}

// admission is the window of sample times one write may carry, taken
// once per write from the store's clock: [minMs, maxMs], unix ms.
type admission struct {
	minMs, maxMs int64
	// retention is Options.Retention when it raised minMs above
	// earliestMs (now - retention), else 0.
	retention time.Duration
	skew      time.Duration
	now       time.Time
}

// admission returns the window of a write starting now.
func (s *Store) admission() admission {
	now := s.now()
	a := admission{minMs: earliestMs, maxMs: now.Add(s.maxFutureSkew).UnixMilli(), skew: s.maxFutureSkew, now: now}
	// The lower bound: samples that retention would drop at once.
	if s.retention > 0 {
		if m := now.Add(-s.retention).UnixMilli(); m > a.minMs {
			a.minMs, a.retention = m, s.retention
		}
	}
	return a
}

// plausible reports whether ms is a time inside the window.
func (a admission) plausible(ms int64) bool { return ms >= a.minMs && ms <= a.maxMs }

// inside reports whether t lies in the window. Callers check it before
// building a field name for refuseTime: formatting a name per sample
// would cost more than the check.
func (a admission) inside(t int64) bool { return t >= a.minMs && t <= a.maxMs }

// refuseTime refuses a time outside the window, saying which unit the
// number looks like when it is not milliseconds.
func (a admission) refuseTime(field string, t int64) *Refusal {
	if t > a.maxMs {
		switch {
		case a.plausible(t / 1_000_000):
			return refuse(ReasonNotMilliseconds, field, "%d looks like nanoseconds; send unix milliseconds", t)
		case a.plausible(t / 1_000):
			return refuse(ReasonNotMilliseconds, field, "%d looks like microseconds; send unix milliseconds", t)
		case t >= year10000Ms:
			return refuse(ReasonNotMilliseconds, field, "%d is past the year 9999 as unix milliseconds; send unix milliseconds", t)
		}
		return refuse(ReasonTooFarInFuture, field, "%d (%s) is more than --max-future-skew %s ahead of the server's clock (%s)",
			t, fmtMs(t), a.skew, a.now.UTC().Format(time.RFC3339))
	}
	switch {
	case t > 0 && t <= math.MaxInt64/1000 && a.plausible(t*1000):
		return refuse(ReasonNotMilliseconds, field, "%d looks like seconds; send unix milliseconds", t)
	case a.retention > 0:
		return refuse(ReasonTooOld, field, "%d (%s) is older than --retention %s allows (before %s)", t, fmtMs(t), a.retention, fmtMs(a.minMs))
	}
	return refuse(ReasonTooOld, field, "%d is before 2000-01-01T00:00:00Z; send unix milliseconds", t)
}

func fmtMs(t int64) string { return time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z") }

// admitBatch checks every time of a validated batch against the window.
func (a admission) admitBatch(b *Batch) error {
	for i, t := range b.Tasks {
		if !a.inside(t.StartMs) {
			return a.refuseTime(fmt.Sprintf("tasks[%d].start", i), t.StartMs)
		}
	}
	if e := b.LastEvent; e != nil && !a.inside(e.TimeMs) {
		return a.refuseTime("last_event.time", e.TimeMs)
	}
	for i, sd := range b.Series {
		for j, t := range sd.Ts {
			if !a.inside(t) {
				return a.refuseTime(fmt.Sprintf("series[%d].t[%d]", i, j), t)
			}
		}
	}
	return nil
}

// isPeaklineMetric reports whether a metric name is of the Peakline
// schema, whose series hold finite floats only.
func isPeaklineMetric(name string) bool {
	switch name {
	case MetricCPU, MetricMemory, MetricPIDs, MetricTaskStart, MetricLastEvent, MetricJobInfo,
		MetricCPUStall, MetricMemoryStall, MetricCPUThrottled, MetricNodeCPUStall, MetricNodeLoad:
		return true
	}
	return false
}

// checkLabels refuses the label set of a series written with its own
// labels (r names it). Series of the Peakline schema must also carry the labels the
// job graph reads (a job id, a decimal counter), or one bad series would
// break its job.
func checkLabels(r *row, ls labels.Labels) *Refusal {
	field := func() string { return r.field() + ".labels" }
	if !ls.Has(labels.MetricName) {
		return refuse(ReasonLabels, field(), "has no %s label", labels.MetricName)
	}
	if !ls.IsValid(model.UTF8Validation) {
		return refuse(ReasonLabels, field(), "%s has an invalid label name or value", ls)
	}
	if name, dup := ls.HasDuplicateLabelNames(); dup {
		return refuse(ReasonLabels, field(), "%s has the label %q twice", ls, name)
	}
	metric := ls.Get(labels.MetricName)
	job := ls.Get(LabelJob)
	if !isPeaklineMetric(metric) {
		// Any series with a job id lists that job, so the id must be one
		// the API can read and delete.
		if job != "" && (len(job) > MaxJobIDLen || checkJobID("", job) != nil) {
			return refuse(ReasonLabels, field(), "%s: %s must be at most %d bytes of printable text", ls, LabelJob, MaxJobIDLen)
		}
		return nil
	}
	if job == "" || len(job) > MaxJobIDLen || checkJobID("", job) != nil {
		return refuse(ReasonPeaklineLabels, field(), "%s: %s must be 1 to %d bytes of printable text", ls, LabelJob, MaxJobIDLen)
	}
	if metric == MetricLastEvent {
		return nil
	}
	if metric == MetricJobInfo {
		var info JobInfo
		for _, f := range infoFields(&info) {
			if v := ls.Get(f.label); len(v) > f.max || checkJobID("", v) != nil {
				return refuse(ReasonPeaklineLabels, field(), "%s: %s must be at most %d bytes of printable text", ls, f.label, f.max)
			}
			if msg := f.checkAllowed(ls.Get(f.label)); msg != "" {
				return refuse(ReasonPeaklineLabels, field(), "%s: %s %s", ls, f.label, msg)
			}
		}
		return nil
	}
	for _, l := range [...]struct {
		name string
		max  int
	}{{LabelPlay, MaxPlayLen}, {LabelRole, MaxRoleLen}, {LabelTaskPath, MaxTaskPathLen}} {
		if len(ls.Get(l.name)) > l.max {
			return refuse(ReasonPeaklineLabels, field(), "%s: %s must be at most %d bytes", ls, l.name, l.max)
		}
	}
	if len(ls.Get(LabelTaskUUID)) > MaxUUIDLen || len(ls.Get(LabelTask)) > MaxTaskNameLen {
		return refuse(ReasonPeaklineLabels, field(), "%s: %s must be at most %d bytes and %s at most %d", ls, LabelTaskUUID, MaxUUIDLen, LabelTask, MaxTaskNameLen)
	}
	if c, err := strconv.ParseInt(ls.Get(LabelCounter), 10, 64); err != nil || c < 0 {
		return refuse(ReasonPeaklineLabels, field(), "%s: %s must be a decimal number >= 0, got %q", ls, LabelCounter, ls.Get(LabelCounter))
	}
	return nil
}

// isStale reports whether v is a Prometheus staleness marker.
func isStale(v float64) bool { return value.IsStaleNaN(v) }

// storageRefusal turns a refusal of the Prometheus head into a Refusal
// (a client's mistake, never a fault of the store); other errors are
// returned as they are.
func storageRefusal(field string, err error) error {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{storage.ErrOutOfOrderSample, ReasonOutOfOrder},
		{storage.ErrOutOfBounds, ReasonOutOfBounds},
		{storage.ErrTooOldSample, ReasonTooOld},
		{storage.ErrDuplicateSampleForTimestamp, ReasonDuplicate},
	} {
		if errors.Is(err, c.err) {
			return refuse(c.reason, field, "%v", err)
		}
	}
	if errors.Is(err, remote.ErrRejected) {
		return refuse(ReasonEngine, field, "%v", err)
	}
	var he histogram.Error
	if errors.As(err, &he) {
		return refuse(ReasonHistogram, field, "%v", err)
	}
	return err
}
