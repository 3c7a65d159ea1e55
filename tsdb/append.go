package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/histogram"
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
	// Info, when not zero, is stored as a job-info sample at the newest
	// time of the batch (the store's clock for a batch without times);
	// a job's info is the newest non-empty value of each field.
	Info JobInfo
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
	// Play, Role and Path (the task_path file:line of its job events)
	// identify the task across runs of a template; "" when unknown.
	Play string
	Role string
	Path string
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
	if err := checkJobID("job_id", b.JobID); err != nil {
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
		for _, l := range [...]struct {
			field, val string
			max        int
		}{{".play", t.Play, MaxPlayLen}, {".role", t.Role, MaxRoleLen}, {".task_path", t.Path, MaxTaskPathLen}} {
			if err := checkString(f+l.field, l.val, l.max, false); err != nil {
				return err
			}
		}
		if t.StartMs <= 0 {
			return invalid(f+".start", "must be a unix time in milliseconds, got %d", t.StartMs)
		}
	}
	info := b.Info
	for _, f := range infoFields(&info) {
		if err := checkString(f.label, *f.val, f.max, false); err != nil {
			return err
		}
		// Every field is shown in pages, logs and the regressions table,
		// and the template id is used in URLs: printable text only.
		if err := checkJobID(f.label, *f.val); err != nil {
			return err
		}
		if msg := f.checkAllowed(*f.val); msg != "" {
			return invalid(f.label, "%s", msg)
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
			return invalid(f+".resource", "must be one of %s, got %q", resourceNames(), s.Resource)
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

// checkJobID refuses control characters in a job id: it is shown in
// pages and logs and used in URLs, where they only confuse.
func checkJobID(field, id string) error {
	for i, r := range id {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return invalid(field, "has a control character (%U) at byte %d; job ids are printable text", r, i)
		case r == utf8.RuneError:
			// JSON decoding turns invalid UTF-8 into U+FFFD, which would
			// merge different ids into one.
			return invalid(field, "has an invalid UTF-8 sequence (or U+FFFD) at byte %d", i)
		}
	}
	return nil
}

// LabeledSeries is one series written with its own labels (Prometheus
// remote write): float samples in Ts/Vs (Ts strictly increasing, unix
// ms) and histogram samples in Hs. The store does not keep the slices.
type LabeledSeries struct {
	Labels labels.Labels
	Ts     []int64
	Vs     []float64
	Hs     []HistogramSample
}

// HistogramSample is one native-histogram sample: H or FH is set.
type HistogramSample struct {
	T  int64
	H  *histogram.Histogram
	FH *histogram.FloatHistogram
}

// WriteResult counts what AppendSeries did.
type WriteResult struct {
	Samples    int // float samples newly stored
	Histograms int // histogram samples appended
	Records    int // task-start and last-event samples newly stored
	Duplicates int // samples already stored with the same value, skipped
	Conflicts  int // samples already stored with another value; the stored value is kept
	Stale      int // staleness markers in Peakline series, dropped
}

// row is one series' worth of samples to append.
type row struct {
	ls     labels.Labels
	hash   uint64
	job    string // the job_id label
	ts     []int64
	vs     []float64
	hs     []HistogramSample
	isTask bool   // a task-start or last-event record: duplicates are not counted
	kind   string // "series", "tasks" or "last_event": what refusals name
	idx    int    // index in the write's series, or -1
	fresh  bool   // no sample of the series is stored at or after ts[0] (maxtime.go): nothing to read
}

// field names the row in a refusal: series[3], tasks, last_event.
func (r *row) field() string {
	if r.idx < 0 {
		return r.kind
	}
	return r.kind + "[" + strconv.Itoa(r.idx) + "]"
}

// Append validates b and stores it in one transaction: either every new
// sample of the batch is committed to the write-ahead log, or none is
// (a batch of more than maxAtomicSeries series is committed in parts, and
// a crash or I/O error can leave earlier parts stored). Samples already
// stored (same series and time) are skipped, so a batch sent twice is
// stored once. A batch with a time outside the admission
// window (see admit.go) is refused whole with a *Refusal.
func (s *Store) Append(ctx context.Context, b *Batch) (AppendResult, error) {
	if err := b.Validate(); err != nil {
		return AppendResult{}, err
	}
	if err := s.admission().admitBatch(b); err != nil {
		return AppendResult{}, err
	}
	rows, conflicts := batchRows(b, s.now().UnixMilli())
	if len(rows) == 0 {
		return AppendResult{Conflicts: conflicts}, nil
	}
	res, err := s.writeRows(ctx, rows)
	if err != nil {
		return AppendResult{}, err
	}
	return AppendResult{Samples: res.Samples, Tasks: res.Records, Duplicates: res.Duplicates, Conflicts: res.Conflicts + conflicts}, nil
}

// AppendSeries stores series that carry their own labels, of any metric,
// through the same path as Append: one admission, one duplicate rule,
// one transaction (in parts past maxAtomicSeries series), the cache of
// exactly the touched jobs dropped.
//
// A series with bad labels, a time outside the admission window or times
// not strictly increasing refuses the whole write with a *Refusal naming
// series[i] and t[j]; nothing of it is stored. Series of the Peakline
// schema (see schema.go) hold finite floats only: another non-finite
// value, or a histogram, is refused too, while their staleness markers
// are dropped and counted. Series of other metrics keep Prometheus
// semantics. Samples already stored at the same time are skipped and
// counted as Duplicates (same value) or Conflicts (another value, the
// stored one is kept).
func (s *Store) AppendSeries(ctx context.Context, series []LabeledSeries) (WriteResult, error) {
	var res WriteResult
	adm := s.admission()
	rows := newRowSet(len(series))
	for i := range series {
		sr := &series[i]
		r := row{ls: sr.Labels, kind: "series", idx: i}
		if err := checkLabels(&r, sr.Labels); err != nil {
			return WriteResult{}, err
		}
		if len(sr.Ts) != len(sr.Vs) {
			return WriteResult{}, refuse(ReasonLabels, r.field(), "t has %d values but v has %d", len(sr.Ts), len(sr.Vs))
		}
		metric := sr.Labels.Get(labels.MetricName)
		peakline := isPeaklineMetric(metric)
		r.isTask = metric == MetricTaskStart || metric == MetricLastEvent || metric == MetricJobInfo
		if peakline && len(sr.Hs) > 0 {
			return WriteResult{}, refuse(ReasonHistogram, r.field()+".histograms", "%s holds floats only, got %d histogram samples", metric, len(sr.Hs))
		}
		// The row reads the series' own slices (the store keeps neither)
		// unless staleness markers are dropped from it.
		r.ts, r.vs = sr.Ts, sr.Vs
		copied := false
		for j, t := range sr.Ts {
			if !adm.inside(t) {
				return WriteResult{}, adm.refuseTime(fmt.Sprintf("%s.t[%d]", r.field(), j), t)
			}
			if j > 0 && t <= sr.Ts[j-1] {
				return WriteResult{}, refuse(ReasonOutOfOrder, fmt.Sprintf("%s.t[%d]", r.field(), j), "times must strictly increase, got %d after %d", t, sr.Ts[j-1])
			}
			v := sr.Vs[j]
			if peakline && (math.IsNaN(v) || math.IsInf(v, 0)) {
				if !isStale(v) {
					return WriteResult{}, refuse(ReasonNonFinite, fmt.Sprintf("%s.v[%d]", r.field(), j), "%s must be a finite number, got %v", metric, v)
				}
				res.Stale++
				if !copied {
					r.ts, r.vs, copied = slices.Clone(sr.Ts[:j]), slices.Clone(sr.Vs[:j]), true
				}
				continue
			}
			if copied {
				r.ts, r.vs = append(r.ts, t), append(r.vs, v)
			}
		}
		for j, h := range sr.Hs {
			if !adm.inside(h.T) {
				return WriteResult{}, adm.refuseTime(fmt.Sprintf("%s.histograms[%d].t", r.field(), j), h.T)
			}
			if h.H == nil && h.FH == nil {
				return WriteResult{}, refuse(ReasonHistogram, fmt.Sprintf("%s.histograms[%d]", r.field(), j), "holds no histogram")
			}
		}
		r.hs = sr.Hs
		res.Conflicts += rows.add(r)
	}
	if len(rows.rows) == 0 {
		return res, nil
	}
	wr, err := s.writeRows(ctx, rows.rows)
	if err != nil {
		return WriteResult{}, err
	}
	wr.Stale, wr.Conflicts = res.Stale, wr.Conflicts+res.Conflicts
	return wr, nil
}

// rowSet gathers the rows of one write, one per label set.
type rowSet struct {
	rows   []row
	byHash map[uint64][]int
}

func newRowSet(n int) *rowSet {
	return &rowSet{rows: make([]row, 0, n), byHash: make(map[uint64][]int, n)}
}

// add adds r, merging it into the row of the same labels if there is one
// (a series sent twice in one write), and returns the conflicts of the
// merge. It sets r's hash and job.
func (rs *rowSet) add(r row) (conflicts int) {
	if len(r.ts) == 0 && len(r.hs) == 0 {
		return 0
	}
	r.hash, r.job = r.ls.Hash(), r.ls.Get(LabelJob)
	for _, k := range rs.byHash[r.hash] {
		if labels.Equal(rs.rows[k].ls, r.ls) {
			return mergeRow(&rs.rows[k], &r)
		}
	}
	rs.byHash[r.hash] = append(rs.byHash[r.hash], len(rs.rows))
	rs.rows = append(rs.rows, r)
	return 0
}

// mergeRow adds the samples of src to dst, both sorted by time; at a
// time both hold, dst's sample is kept. It returns how many of src's
// samples had another value than dst's at the same time.
func mergeRow(dst, src *row) (conflicts int) {
	ts := make([]int64, 0, len(dst.ts)+len(src.ts))
	vs := make([]float64, 0, len(dst.ts)+len(src.ts))
	i, j := 0, 0
	for i < len(dst.ts) || j < len(src.ts) {
		switch {
		case j == len(src.ts) || (i < len(dst.ts) && dst.ts[i] < src.ts[j]):
			ts, vs = append(ts, dst.ts[i]), append(vs, dst.vs[i])
			i++
		case i == len(dst.ts) || src.ts[j] < dst.ts[i]:
			ts, vs = append(ts, src.ts[j]), append(vs, src.vs[j])
			j++
		default:
			if math.Float64bits(dst.vs[i]) != math.Float64bits(src.vs[j]) {
				conflicts++
			}
			ts, vs = append(ts, dst.ts[i]), append(vs, dst.vs[i])
			i++
			j++
		}
	}
	dst.ts, dst.vs = ts, vs
	dst.hs = append(dst.hs, src.hs...)
	return conflicts
}

// writeRows appends rows in one transaction under the locks of their
// jobs (shared) and of their series, each taken in a fixed order,
// skipping samples already stored (read unless the newest-time index
// rules them out, maxtime.go), and
// drops the cache of every job the rows belong to. A refusal of the head
// rolls the whole transaction back and is returned as a *Refusal.
func (s *Store) writeRows(ctx context.Context, rows []row) (WriteResult, error) {
	if err := s.admitDisk(rows); err != nil { // diskspace.go
		return WriteResult{}, err
	}
	var jobs []string
	seen := map[string]struct{}{}
	for _, r := range rows {
		if _, ok := seen[r.job]; !ok {
			seen[r.job] = struct{}{}
			jobs = append(jobs, r.job)
		}
	}
	s.compactMu.RLock()
	defer s.compactMu.RUnlock()
	if s.remote == nil && s.db == nil { // a reopen failed (relog.go)
		return WriteResult{}, fmt.Errorf("%w: the store is not reopened yet", ErrLogUnsound)
	}
	unlock, err := s.lockLive(ctx, jobs) // waits out a pending delete (delete.go)
	if err != nil {
		return WriteResult{}, err
	}
	defer unlock()
	defer s.lockSeries(rows)()
	defer func() {
		for _, j := range jobs {
			if j != "" {
				s.cache.drop(j)
			}
		}
	}()

	// Rows newer than anything stored of their series skip the read.
	times := s.jobsTimes(ctx, jobs)
	for i := range rows {
		r := &rows[i]
		if jt := times[r.job]; jt != nil && len(r.ts) > 0 && !jt.mayHold(r.hash, r.ts[0]) {
			r.fresh = true
		}
	}
	existing, err := s.existingSamples(ctx, rows)
	if err != nil {
		return WriteResult{}, err
	}
	// After each commit the index learns the rows' newest times; after a
	// failure what reached the log is read again.
	committed := func(part []row) {
		for i := range part {
			if jt := times[part[i].job]; jt != nil {
				jt.raise(part[i].hash, part[i].newestOf())
			}
		}
	}
	done, from := false, 0
	defer func() {
		if !done {
			for _, jt := range times {
				jt.unload()
			}
		}
	}()
	var res WriteResult
	// Samples below the cut go to blocks of their own (backfill.go), the
	// rest to the head.
	cutMs := s.headCut(s.db)
	var blocks backfillRows
	app := s.appender(ctx) // the TSDB's, or a remote write request (remote.go)
	fail := func(err error) (WriteResult, error) {
		s.rollback(app) // diskspace.go
		return WriteResult{}, err
	}
	for ri, r := range rows {
		if len(rows) > maxAtomicSeries && ri > 0 && ri%commitSeries == 0 {
			if err := s.commit(app); err != nil {
				return WriteResult{}, storageRefusal("batch", fmt.Errorf("commit series %d to %d of %d: %w", ri-commitSeries, ri-1, len(rows), err))
			}
			committed(rows[from:ri])
			from = ri
			app = s.appender(ctx)
		}
		have := existing[ri]
		var ref storage.SeriesRef
		blocks.next()
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
			if t < cutMs {
				blocks.add(r.ls, t, r.vs[i])
			} else if ref, err = app.Append(ref, r.ls, t, r.vs[i]); err != nil {
				return fail(storageRefusal(fmt.Sprintf("%s.t[%d]", r.field(), i), fmt.Errorf("append sample of %s at %d: %w", r.ls, t, err)))
			}
			if r.isTask {
				if r.kind != "info" { // the job's info is not a task record
					res.Records++
				}
			} else {
				res.Samples++
			}
		}
		for i, h := range r.hs {
			if h.T < cutMs {
				blocks.addHistogram(r.ls, h)
			} else if ref, err = app.AppendHistogram(ref, r.ls, h.T, h.H, h.FH); err != nil {
				return fail(storageRefusal(fmt.Sprintf("%s.histograms[%d]", r.field(), i), fmt.Errorf("append histogram of %s at %d: %w", r.ls, h.T, err)))
			}
			res.Histograms++
		}
	}
	// The blocks before the head's commit: a failed block write leaves
	// the head's part uncommitted.
	if err := s.writeBackfill(ctx, blocks.rows, cutMs); err != nil {
		return fail(err)
	}
	if err := s.commit(app); err != nil {
		return WriteResult{}, storageRefusal("batch", fmt.Errorf("commit batch of %d series: %w", len(rows), err))
	}
	committed(rows[from:])
	done = true
	return res, nil
}

// maxAtomicSeries is the most series a write commits in one transaction,
// all or nothing, also for readers and across a crash: twice the server's
// default --max-batch-series, so every batch of a server with default
// limits is atomic. A larger write (import --data of a huge job, or a
// raised limit) is committed in parts of commitSeries.
const maxAtomicSeries = 20_000

// commitSeries is how many series one commit of the head holds in a write
// of more than maxAtomicSeries: the Prometheus head's commit costs
// O(n^2) in the out-of-order series it creates (for each one it
// allocates room for the m-map markers of all before it), so one
// transaction of 200k series of an old job took minutes and gigabytes;
// in parts of commitSeries the cost is linear. Everything that refuses a
// write (admission, labels, values) is decided before the first part;
// what is left, a refusal of the head that admission rules out or an
// I/O error, can leave earlier parts stored, and sending the write again
// is harmless: their samples count as duplicates.
const commitSeries = 256

// lockJobs locks the append locks of jobs shared, for a write, in index
// order (a delete waiting for one cannot deadlock two writes), and
// returns the unlock. Writes of one job run at once; their series locks
// (lockSeries) order writes of one series.
func (s *Store) lockJobs(jobs []string) func() {
	var idx []int
	for _, j := range jobs {
		idx = append(idx, jobLockIndex(j))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.appendMu[i].RLock()
	}
	return func() {
		for _, i := range slices.Backward(idx) {
			s.appendMu[i].RUnlock()
		}
	}
}

// batchRows turns a batch into label sets and sample runs. Series and
// task records sharing a label set are merged, the first value kept at a
// time both hold; conflicts counts the other values. nowMs is the
// store's clock: the value of a job-info sample, and its time when the
// batch holds no other.
func batchRows(b *Batch, nowMs int64) (rows []row, conflicts int) {
	sb := labels.NewScratchBuilder(5)
	rs := newRowSet(len(b.Series) + len(b.Tasks) + 1)
	for i, sd := range b.Series {
		r := Resources[resourceIndex(sd.Resource)]
		conflicts += rs.add(row{ls: taskLabels(&sb, r.Metric, b.JobID, sd.Counter, sd.UUID, sd.Task), ts: sd.Ts, vs: sd.Vs, kind: "series", idx: i})
	}
	// A task's start sent twice (other times) is one series of two samples.
	tasks := slices.Clone(b.Tasks)
	slices.SortStableFunc(tasks, func(x, y Task) int { return cmpInt64(x.StartMs, y.StartMs) })
	for _, t := range tasks {
		ls := taskStartLabels(&sb, b.JobID, &t)
		rs.add(row{ls: ls, ts: []int64{t.StartMs}, vs: []float64{float64(t.Counter)}, isTask: true, kind: "tasks", idx: -1})
	}
	if e := b.LastEvent; e != nil {
		ls := labels.FromStrings(labels.MetricName, MetricLastEvent, LabelJob, b.JobID)
		rs.add(row{ls: ls, ts: []int64{e.TimeMs}, vs: []float64{float64(e.Counter)}, isTask: true, kind: "last_event", idx: -1})
	}
	if !b.Info.IsZero() {
		// At the batch's newest time, so that the info neither widens the
		// job's span nor falls outside the admission window of an old job.
		at := int64(math.MinInt64)
		for _, t := range b.Tasks {
			at = max(at, t.StartMs)
		}
		if e := b.LastEvent; e != nil {
			at = max(at, e.TimeMs)
		}
		for _, sd := range b.Series {
			if n := len(sd.Ts); n > 0 {
				at = max(at, sd.Ts[n-1])
			}
		}
		if at == math.MinInt64 {
			at = nowMs
		}
		rs.add(row{ls: jobInfoLabels(b.JobID, b.Info), ts: []int64{at}, vs: []float64{float64(nowMs)}, isTask: true, kind: "info", idx: -1})
	}
	return rs.rows, conflicts
}

type stored struct {
	ts []int64
	vs []float64
}

// existingSamples reads the samples already stored for the series of
// rows within the time span of each, in rows order. It selects once per
// job (the job_id label), or per metric name for series without a job,
// and matches series by label hash, so its cost is linear in the series
// selected and the samples of the rows' own series.
func (s *Store) existingSamples(ctx context.Context, rows []row) ([]stored, error) {
	out := make([]stored, len(rows))
	type group struct {
		matcher *labels.Matcher
		rows    map[uint64][]int
	}
	groups := map[[2]string]*group{}
	var order [][2]string
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	for i, r := range rows {
		if len(r.ts) == 0 || r.fresh {
			continue
		}
		mint = min(mint, r.ts[0])
		maxt = max(maxt, r.ts[len(r.ts)-1])
		key := [2]string{LabelJob, r.job}
		if r.job == "" {
			key = [2]string{labels.MetricName, r.ls.Get(labels.MetricName)}
		}
		g := groups[key]
		if g == nil {
			g = &group{matcher: labels.MustNewMatcher(labels.MatchEqual, key[0], key[1]), rows: map[uint64][]int{}}
			groups[key] = g
			order = append(order, key)
		}
		g.rows[r.hash] = append(g.rows[r.hash], i)
	}
	if len(order) == 0 {
		return out, nil
	}
	q, err := s.querier(mint, maxt) // see store.go
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	var it chunkenc.Iterator
	for _, key := range order {
		g := groups[key]
		set := q.Select(ctx, false, nil, g.matcher)
		for set.Next() {
			series := set.At()
			ls := series.Labels()
			ri := -1
			for _, i := range g.rows[ls.Hash()] {
				if labels.Equal(rows[i].ls, ls) {
					ri = i
				}
			}
			if ri < 0 {
				continue
			}
			r := rows[ri]
			lo, hi := r.ts[0], r.ts[len(r.ts)-1]
			var st stored
			it = series.Iterator(it)
			for vt := it.Seek(lo); vt != chunkenc.ValNone; vt = it.Next() {
				if vt != chunkenc.ValFloat {
					continue
				}
				t, v := it.At()
				if t > hi {
					break
				}
				st.ts = append(st.ts, t)
				st.vs = append(st.vs, v)
			}
			if err := it.Err(); err != nil {
				return nil, fmt.Errorf("read stored samples of %s: %w", ls, err)
			}
			out[ri] = st
		}
		if err := set.Err(); err != nil {
			return nil, fmt.Errorf("read stored series of %s=%q: %w", key[0], key[1], err)
		}
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
