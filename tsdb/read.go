package tsdb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// Job is one job read from the store: its tasks in start order and, per
// resource present, the samples in time order, each tied to its task.
type Job struct {
	ID        string
	Tasks     []Task // ordered by start, then counter; EndMs filled in
	LastEvent *Event // the newest job event seen, if any
	Columns   []Column
	// Info holds, per field, the value of the newest job-info sample
	// where it is set (by sample time, then by the store's clock when
	// written).
	Info JobInfo
	// InfoFirstMs and InfoLastMs are the times of the oldest and newest
	// job-info samples; 0 when there are none.
	InfoFirstMs, InfoLastMs int64
}

// Column holds the samples of one resource as parallel slices.
type Column struct {
	Resource Resource
	Ts       []int64   // unix ms, strictly increasing
	Vs       []float64 // in Resource.Unit
	Task     []int32   // index into Job.Tasks of the task each sample belongs to
}

// ReadJob reads a job's samples in [fromMs, toMs] (inclusive) and all its
// tasks. Task ends come from the next task's start, or for the last task
// from the newest of the job's last event and its last sample. When two
// series of one resource hold a sample at the same millisecond, the one of
// the later task is kept so that times strictly increase (between series
// of one task, the one whose labels sort last).
//
// A job read once stays cached (within the store's budget) until it is
// written to or deleted, so zooming into a finished job does not decode
// it again. The returned Job and its slices are shared: read them only.
func (s *Store) ReadJob(ctx context.Context, jobID string, fromMs, toMs int64) (*Job, error) {
	if s.hidden(jobID) { // deleted (delete.go)
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}
	job, gen, ok := s.cache.job(jobID)
	if !ok {
		var err error
		s.cache.decoded.Add(1)
		if job, err = s.readJob(ctx, jobID); err != nil {
			return nil, err
		}
		s.cache.putJob(jobID, job, gen)
	}
	return job.window(fromMs, toMs), nil
}

// window returns a view of j holding only samples in [fromMs, toMs].
func (j *Job) window(fromMs, toMs int64) *Job {
	if fromMs == minTime && toMs == maxTime {
		return j
	}
	w := &Job{ID: j.ID, Tasks: j.Tasks, LastEvent: j.LastEvent, Info: j.Info, InfoFirstMs: j.InfoFirstMs, InfoLastMs: j.InfoLastMs}
	for _, c := range j.Columns {
		lo, _ := slices.BinarySearch(c.Ts, fromMs)
		hi, found := slices.BinarySearch(c.Ts, toMs)
		if found {
			hi++
		}
		if lo >= hi {
			continue
		}
		w.Columns = append(w.Columns, Column{Resource: c.Resource, Ts: c.Ts[lo:hi:hi], Vs: c.Vs[lo:hi:hi], Task: c.Task[lo:hi:hi]})
	}
	return w
}

// readJob reads a whole job from the TSDB.
func (s *Store) readJob(ctx context.Context, jobID string) (*Job, error) {
	q, err := s.chunkQuerier(minTime, maxTime) // see store.go
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	return readJobFrom(ctx, q, jobID)
}

// readJobFrom reads a whole job from q: the embedded TSDB's chunk querier
// or one over another backend. It keeps nothing of q's memory: label
// values are cloned and samples copied into the job's columns, so the job
// outlives q.
//
// It is built for jobs of millions of samples. The columns are sized from
// the chunks' sample counts before anything is decoded; each series is
// decoded once, in parallel with the others, straight into its slot of
// its resource's column, the slots laid out in the order of the series'
// first chunks. The series of one resource belong to one task each and
// tasks barely overlap in time, so the slots are then already in time
// order but where two series overlap, and only those stretches are merged
// (see finishColumn).
func readJobFrom(ctx context.Context, q storage.ChunkQuerier, jobID string) (*Job, error) {
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))

	job := &Job{ID: jobID}
	tasks := map[taskKey]*taskAcc{}
	// Label values point into block memory that compaction unmaps once
	// the querier is closed; what the job keeps is copied.
	getTask := func(k taskKey, name string) *taskAcc {
		t := tasks[k]
		if t == nil {
			k.uuid, name = strings.Clone(k.uuid), strings.Clone(name)
			t = &taskAcc{Task: Task{Counter: k.counter, UUID: k.uuid, Name: name, StartMs: maxTime, EndMs: minTime}, firstSample: maxTime}
			tasks[k] = t
		}
		return t
	}
	var (
		runs  = make([][]*seriesRun, len(Resources)) // per resource
		it    chunkenc.Iterator
		info  infoAcc
		found bool
	)
	for set.Next() {
		found = true
		cs := set.At()
		ls := cs.Labels()
		var err error
		switch metric := ls.Get(labels.MetricName); metric {
		case MetricLastEvent:
			it, err = eachFloat(cs, it, func(t int64, v float64) bool {
				if job.LastEvent == nil || t >= job.LastEvent.TimeMs {
					job.LastEvent = &Event{Counter: int64(v), TimeMs: t}
				}
				return true
			})
		case MetricJobInfo:
			it, err = eachFloat(cs, it, func(t int64, v float64) bool {
				info.add(ls, t, v)
				return true
			})
		case MetricTaskStart:
			var k taskKey
			if k, err = keyOf(ls); err != nil {
				return nil, err
			}
			// The first finite sample is the start; a record with none
			// makes no task.
			it, err = eachFloat(cs, it, func(t int64, _ float64) bool {
				task := getTask(k, ls.Get(LabelTask))
				task.StartMs = min(task.StartMs, t)
				task.recorded = true
				// A record with identity labels wins over one
				// without (sent by an older writer).
				if p := ls.Get(LabelTaskPath); p != "" || task.Path == "" {
					task.Play = strings.Clone(ls.Get(LabelPlay))
					task.Role = strings.Clone(ls.Get(LabelRole))
					task.Path = strings.Clone(p)
				}
				return false
			})
		default:
			ri := metricIndex(metric)
			if ri < 0 {
				continue
			}
			k, err := keyOf(ls)
			if err != nil {
				return nil, err
			}
			r := &seriesRun{task: getTask(k, ls.Get(LabelTask)), labels: ls}
			if err := r.collect(cs); err != nil {
				return nil, fmt.Errorf("read %s: %w", ls, err)
			}
			runs[ri] = append(runs[ri], r)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ls, err)
		}
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("read job %q: %w", jobID, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}

	cols := make([]Column, len(Resources))
	for ri := range runs {
		cols[ri] = placeRuns(runs[ri])
	}
	if err := decodeRuns(ctx, slices.Concat(runs...)); err != nil {
		return nil, fmt.Errorf("read job %q: %w", jobID, err)
	}
	// A series' own first and last time decide a task's start when it
	// has no record and its end when it is the last.
	for _, rs := range runs {
		for _, r := range rs {
			r.task.firstSample = min(r.task.firstSample, r.firstMs)
			r.task.EndMs = max(r.task.EndMs, r.lastMs)
		}
	}

	job.Info, job.InfoFirstMs, job.InfoLastMs = info.result()
	job.Tasks = orderTasks(tasks, job.LastEvent)
	index := make(map[taskKey]int32, len(job.Tasks))
	for i, t := range job.Tasks {
		index[taskKey{t.Counter, t.UUID}] = int32(i)
	}
	for ri, rs := range runs {
		for _, r := range rs {
			r.taskIdx = index[taskKey{r.task.Counter, r.task.UUID}]
		}
		if c := finishColumn(cols[ri], rs); len(c.Ts) > 0 {
			c.Resource = Resources[ri]
			job.Columns = append(job.Columns, c)
		}
	}
	return job, nil
}

// eachFloat calls f with the finite float samples of a series in the
// order its chunks hold them, until f returns false. It returns it for
// reuse.
func eachFloat(cs storage.ChunkSeries, it chunkenc.Iterator, f func(t int64, v float64) bool) (chunkenc.Iterator, error) {
	chks := cs.Iterator(nil)
	for chks.Next() {
		m := chks.At()
		if m.Chunk == nil {
			return it, fmt.Errorf("chunk %d of %d-%d not loaded by the querier", m.Ref, m.MinTime, m.MaxTime)
		}
		it = m.Chunk.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			if t, v := it.At(); finite(v) && !f(t, v) {
				return it, nil
			}
		}
		if err := it.Err(); err != nil {
			return it, err
		}
	}
	return it, chks.Err()
}

// finite reports whether v is neither NaN nor infinite: the only values
// a Peakline series may hold. Others (stored before writes refused them)
// are skipped on read, so that summaries and peaks stay finite. NaNs and
// infinities are the floats whose exponent bits are all ones: one test
// per sample where IsNaN and IsInf take two and a compare.
func finite(v float64) bool { return math.Float64bits(v)&expMask != expMask }

const expMask = 0x7ff0000000000000 // exponent bits of a float64

// infoAcc gathers a job's info samples: per field, the newest sample
// (by time, then value: the store's clock when written) that sets it.
type infoAcc struct {
	info            JobInfo
	at              [numInfoFields][2]float64 // per field: time, value of the sample that set it
	set             [numInfoFields]bool
	firstMs, lastMs int64
	seen            bool
}

func (a *infoAcc) add(ls labels.Labels, t int64, v float64) {
	if !a.seen {
		a.firstMs, a.lastMs, a.seen = t, t, true
	}
	a.firstMs, a.lastMs = min(a.firstMs, t), max(a.lastMs, t)
	for i, f := range infoFields(&a.info) {
		val := ls.Get(f.label)
		if val == "" {
			continue
		}
		if a.set[i] && (float64(t) < a.at[i][0] || (float64(t) == a.at[i][0] && v <= a.at[i][1])) {
			continue
		}
		*f.val = strings.Clone(val)
		a.at[i] = [2]float64{float64(t), v}
		a.set[i] = true
	}
}

func (a *infoAcc) result() (JobInfo, int64, int64) {
	return a.info, a.firstMs, a.lastMs
}

// taskAcc gathers a task while its series are read.
type taskAcc struct {
	Task
	recorded    bool  // a task-start record exists; else the first sample is the start
	firstSample int64 // earliest sample of any resource
}

// orderTasks sorts tasks by start (then counter, then uuid) and sets each
// end to the next task's start; the last task ends at the newest of its
// last sample and the job's last event.
func orderTasks(m map[taskKey]*taskAcc, last *Event) []Task {
	out := make([]Task, 0, len(m))
	for _, t := range m {
		if !t.recorded {
			t.StartMs = t.firstSample
		}
		out = append(out, t.Task)
	}
	slices.SortFunc(out, func(a, b Task) int {
		return cmp.Or(cmp.Compare(a.StartMs, b.StartMs), cmp.Compare(a.Counter, b.Counter), cmp.Compare(a.UUID, b.UUID))
	})
	for i := range out {
		if i+1 < len(out) {
			out[i].EndMs = out[i+1].StartMs
			continue
		}
		if last != nil {
			out[i].EndMs = max(out[i].EndMs, last.TimeMs)
		}
		out[i].EndMs = max(out[i].EndMs, out[i].StartMs)
	}
	return out
}
