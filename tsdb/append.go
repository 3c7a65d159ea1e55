package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// ErrInvalid marks a batch the store refuses; the error text names the
// field (JSON path of the ingest batch) and what would be right.
var ErrInvalid = errors.New("invalid batch")

// Batch is everything one write adds to one job. Series samples are in
// the stored unit of their resource (see Resources).
type Batch struct {
	JobID     string
	Tasks     []Task
	LastEvent *Event
	Series    []SeriesData
}

// Task is one task of a job: the counter of its task-start event (0 when
// no events were available), its uuid, name and times in unix ms. EndMs
// is filled in by reads; appends ignore it.
type Task struct {
	Counter int64
	UUID    string
	Name    string
	StartMs int64
	EndMs   int64
}

// Event is a job event reference: its counter and created time (unix ms).
type Event struct {
	Counter int64
	TimeMs  int64
}

// SeriesData is a run of samples of one resource attributed to one task.
// Ts strictly increases. The store does not keep the slices.
type SeriesData struct {
	Resource string // "cpu", "memory" or "pids"
	Counter  int64
	UUID     string
	Task     string
	Ts       []int64
	Vs       []float64
}

// AppendResult counts what an append did.
type AppendResult struct {
	Samples    int // samples newly stored
	Tasks      int // task records newly stored
	Duplicates int // samples already stored with the same value, skipped (task records not counted)
	Conflicts  int // samples already stored with another value; the stored value is kept
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Validate checks a batch without touching the store.
func (b *Batch) Validate() error {
	if err := checkString("job_id", b.JobID, MaxJobIDLen, true); err != nil {
		return err
	}
	for i, t := range b.Tasks {
		f := fmt.Sprintf("tasks[%d]", i)
		if t.Counter < 0 {
			return invalid(f+".counter", "must be >= 0, got %d", t.Counter)
		}
		if err := checkString(f+".uuid", t.UUID, MaxUUIDLen, false); err != nil {
			return err
		}
		if err := checkString(f+".name", t.Name, MaxTaskNameLen, false); err != nil {
			return err
		}
		if t.StartMs <= 0 {
			return invalid(f+".start", "must be a unix time in milliseconds, got %d", t.StartMs)
		}
	}
	if e := b.LastEvent; e != nil {
		if e.Counter < 0 {
			return invalid("last_event.counter", "must be >= 0, got %d", e.Counter)
		}
		if e.TimeMs <= 0 {
			return invalid("last_event.time", "must be a unix time in milliseconds, got %d", e.TimeMs)
		}
	}
	for i, s := range b.Series {
		f := fmt.Sprintf("series[%d]", i)
		if resourceIndex(s.Resource) < 0 {
			return invalid(f+".resource", "must be one of cpu, memory, pids, got %q", s.Resource)
		}
		if s.Counter < 0 {
			return invalid(f+".counter", "must be >= 0, got %d", s.Counter)
		}
		if err := checkString(f+".uuid", s.UUID, MaxUUIDLen, false); err != nil {
			return err
		}
		if err := checkString(f+".task", s.Task, MaxTaskNameLen, false); err != nil {
			return err
		}
		if len(s.Ts) != len(s.Vs) {
			return invalid(f, "t has %d values but v has %d", len(s.Ts), len(s.Vs))
		}
		for j, t := range s.Ts {
			if t <= 0 {
				return invalid(fmt.Sprintf("%s.t[%d]", f, j), "must be a unix time in milliseconds, got %d", t)
			}
			if j > 0 && t <= s.Ts[j-1] {
				return invalid(fmt.Sprintf("%s.t[%d]", f, j), "times must strictly increase, got %d after %d", t, s.Ts[j-1])
			}
			if v := s.Vs[j]; math.IsNaN(v) || math.IsInf(v, 0) {
				return invalid(fmt.Sprintf("%s.v[%d]", f, j), "must be a finite number, got %v", v)
			}
		}
	}
	return nil
}

func checkString(field, s string, maxLen int, required bool) error {
	switch {
	case required && s == "":
		return invalid(field, "is required")
	case len(s) > maxLen:
		return invalid(field, "is %d bytes long, at most %d allowed", len(s), maxLen)
	case !utf8.ValidString(s):
		return invalid(field, "is not valid UTF-8")
	}
	return nil
}

// row is one series' worth of samples to append.
type row struct {
	ls     labels.Labels
	ts     []int64
	vs     []float64
	isTask bool
}

// Append validates b and stores it in one transaction: either every new
// sample of the batch is committed to the write-ahead log, or none is.
// Samples already stored (same series and time) are skipped, so a batch
// sent twice is stored once.
func (s *Store) Append(ctx context.Context, b *Batch) (AppendResult, error) {
	if err := b.Validate(); err != nil {
		return AppendResult{}, err
	}
	rows := batchRows(b)
	if len(rows) == 0 {
		return AppendResult{}, nil
	}
	unlock, err := s.lockLive(ctx, b.JobID) // waits out a pending delete (delete.go)
	if err != nil {
		return AppendResult{}, err
	}
	defer unlock()
	defer s.cache.drop(b.JobID)

	existing, err := s.existingSamples(ctx, b.JobID, rows)
	if err != nil {
		return AppendResult{}, err
	}
	var res AppendResult
	app := s.db.Appender(ctx)
	for _, r := range rows {
		have := existing[r.ls.String()]
		var ref storage.SeriesRef
		k := 0
		for i, t := range r.ts {
			for k < len(have.ts) && have.ts[k] < t {
				k++
			}
			if k < len(have.ts) && have.ts[k] == t {
				switch {
				case r.isTask:
				case math.Float64bits(have.vs[k]) == math.Float64bits(r.vs[i]):
					res.Duplicates++
				default:
					res.Conflicts++
				}
				continue
			}
			ref, err = app.Append(ref, r.ls, t, r.vs[i])
			if err != nil {
				_ = app.Rollback()
				return AppendResult{}, fmt.Errorf("append sample of %s at %d: %w", r.ls, t, err)
			}
			if r.isTask {
				res.Tasks++
			} else {
				res.Samples++
			}
		}
	}
	if err := app.Commit(); err != nil {
		return AppendResult{}, fmt.Errorf("commit batch of job %q: %w", b.JobID, err)
	}
	return res, nil
}

// batchRows turns a batch into label sets and sample runs.
func batchRows(b *Batch) []row {
	sb := labels.NewScratchBuilder(5)
	rows := make([]row, 0, len(b.Series)+len(b.Tasks)+1)
	for _, sd := range b.Series {
		if len(sd.Ts) == 0 {
			continue
		}
		r := Resources[resourceIndex(sd.Resource)]
		rows = append(rows, row{ls: taskLabels(&sb, r.Metric, b.JobID, sd.Counter, sd.UUID, sd.Task), ts: sd.Ts, vs: sd.Vs})
	}
	// Tasks sharing a series (a start sent twice) are appended in time order.
	tasks := slices.Clone(b.Tasks)
	slices.SortStableFunc(tasks, func(x, y Task) int {
		if x.StartMs != y.StartMs {
			return cmpInt64(x.StartMs, y.StartMs)
		}
		return cmpInt64(x.Counter, y.Counter)
	})
	for _, t := range tasks {
		ls := taskLabels(&sb, MetricTaskStart, b.JobID, t.Counter, t.UUID, t.Name)
		if n := len(rows); n > 0 && rows[n-1].isTask && labels.Equal(rows[n-1].ls, ls) {
			if rows[n-1].ts[len(rows[n-1].ts)-1] < t.StartMs {
				rows[n-1].ts = append(rows[n-1].ts, t.StartMs)
				rows[n-1].vs = append(rows[n-1].vs, float64(t.Counter))
			}
			continue
		}
		rows = append(rows, row{ls: ls, ts: []int64{t.StartMs}, vs: []float64{float64(t.Counter)}, isTask: true})
	}
	if e := b.LastEvent; e != nil {
		ls := labels.FromStrings(labels.MetricName, MetricLastEvent, LabelJob, b.JobID)
		rows = append(rows, row{ls: ls, ts: []int64{e.TimeMs}, vs: []float64{float64(e.Counter)}, isTask: true})
	}
	return rows
}

type stored struct {
	ts []int64
	vs []float64
}

// existingSamples reads the samples already stored for the series of rows
// within the time span of rows, keyed by the series' label string.
func (s *Store) existingSamples(ctx context.Context, jobID string, rows []row) (map[string]stored, error) {
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	want := make(map[string]struct{}, len(rows))
	for _, r := range rows {
		mint = min(mint, r.ts[0])
		maxt = max(maxt, r.ts[len(r.ts)-1])
		want[r.ls.String()] = struct{}{}
	}
	q, err := s.querier(mint, maxt) // see store.go
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))
	out := make(map[string]stored)
	for set.Next() {
		series := set.At()
		key := series.Labels().String()
		if _, ok := want[key]; !ok {
			continue
		}
		var st stored
		it := series.Iterator(nil)
		for vt := it.Seek(mint); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			t, v := it.At()
			if t > maxt {
				break
			}
			st.ts = append(st.ts, t)
			st.vs = append(st.vs, v)
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("read stored samples of %s: %w", key, err)
		}
		out[key] = st
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("read stored series of job %q: %w", jobID, err)
	}
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
