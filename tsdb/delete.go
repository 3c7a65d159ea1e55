package tsdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// ErrDeletePending is returned for a write to a job whose deletion is
// still being removed from disk. The write may be retried shortly.
var ErrDeletePending = errors.New("job deletion pending")

// deletionsDir holds one record per deleted job whose samples are not yet
// removed from disk, under the store directory. Prometheus ignores
// directories whose names are not block ULIDs.
const deletionsDir = "deletions"

// retryDelay is the wait after a failed cleanup pass before the next.
const retryDelay = 30 * time.Second

// Deletion in two steps:
//
//  1. Delete writes a small record (deletionsDir/<hash>.json, fsynced)
//     and adds the job to the pending set. From then on every read path
//     hides the job (ReadJob, JobIDs and Summaries, Queryable) and every
//     write (Append and AppendSeries, through writeRows) waits for its
//     removal or fails with ErrDeletePending. Open loads
//     the records, so a restart keeps the job hidden.
//  2. One background goroutine removes the samples of all pending jobs
//     in one pass, then drops their records.
//
// The order of the pass matters. Tombstones written by db.Delete do not
// reach the out-of-order head: its compaction head has no tombstones
// (OOOCompactionHead.Tombstones is empty), so a job's out-of-order samples
// would be written back into a block. And head tombstones outlive the
// deletion: they hide samples of a later re-import in the same range. So
// the pass first moves the jobs' series out of both heads into blocks
// (evictSeries), and then removes them from the blocks that hold them,
// one block at a time (delete_blocks.go): a tombstone on that block, a
// rewrite of it without the jobs (or its removal when nothing else is
// left), and a reload. Blocks without the jobs are not touched. Each job
// is released (visible to writes again, its record marked removed) as
// soon as the last block holding it is done, not at the end of the pass.
//
// The pass stops between blocks when the store closes, and Close cancels
// the rewrite of the block in flight (the store's compactor, backfill.go).
// What is done stays done: the next pass lists the blocks that still hold
// the jobs, so it resumes with the first block not rewritten yet.
type deleter struct {
	dir    string
	logger *slog.Logger
	hold   <-chan struct{}

	mu      sync.Mutex
	records map[string]string // pending job id -> record file name
	// removed holds jobs whose samples were removed. Prometheus drops a
	// series emptied by an out-of-order compaction from the head without
	// a WAL tombstone, and a restart loads its out-of-order chunks back
	// from the head chunk files as long as the WAL still names the series.
	// Open checks these jobs and deletes whatever came back. A removed
	// record is forgotten when the job is written again.
	removed map[string]string
	changed chan struct{} // closed and replaced when jobs leave records
	view    atomic.Pointer[hiddenJobs]

	kick chan struct{} // buffered: a cleanup pass is wanted
	stop chan struct{}
	done chan struct{}

	pending prometheus.Gauge
	deleted prometheus.Counter
}

// hiddenJobs is an immutable snapshot of the pending set for readers.
type hiddenJobs struct {
	ids   map[string]struct{}
	notIn *labels.Matcher // job_id!~"a|b|…"
	in    *labels.Matcher // job_id=~"a|b|…"
}

// deletionRecord is the on-disk form of a pending deletion.
type deletionRecord struct {
	JobID       string `json:"job_id"`
	RequestedMs int64  `json:"requested_ms"`
	// RemovedMs is when the samples were removed from disk; 0 while the
	// deletion is pending. See deleter.removed.
	RemovedMs int64 `json:"removed_ms,omitempty"`
}

func newDeleter(dir string, hold <-chan struct{}, logger *slog.Logger, reg prometheus.Registerer) (*deleter, error) {
	d := &deleter{
		dir:     filepath.Join(dir, deletionsDir),
		logger:  logger,
		hold:    hold,
		records: map[string]string{},
		removed: map[string]string{},
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: promauto.With(reg).NewGauge(prometheus.GaugeOpts{
			Name: "peakline_delete_pending",
			Help: "Deleted jobs hidden from reads whose samples are not yet removed from disk.",
		}),
		deleted: promauto.With(reg).NewCounter(prometheus.CounterOpts{
			Name: "peakline_deletes_total",
			Help: "Deleted jobs whose samples were removed from disk.",
		}),
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create deletions directory: %w", err)
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("read deletions directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(d.dir, name)
		if strings.HasPrefix(name, ".tmp-") {
			// A record whose write did not finish: its delete was never
			// answered.
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove unfinished deletion record %q: %w", path, err)
			}
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read deletion record %q: %w", path, err)
		}
		var rec deletionRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.JobID == "" {
			return nil, fmt.Errorf("read deletion record %q: not a deletion record (%v); move it away to open the store", path, err)
		}
		if rec.RemovedMs != 0 {
			d.removed[rec.JobID] = name
		} else {
			d.records[rec.JobID] = name
		}
	}
	d.publish()
	return d, nil
}

// recordName is the file name of a job's deletion record: job ids may
// hold any character, so the name is a hash.
func recordName(jobID string) string {
	h := sha256.Sum256([]byte(jobID))
	return hex.EncodeToString(h[:16]) + ".json"
}

// publish rebuilds the readers' snapshot. d.mu must be held (or d not
// yet shared).
func (d *deleter) publish() {
	d.pending.Set(float64(len(d.records)))
	if len(d.records) == 0 {
		d.view.Store(nil)
		return
	}
	v := &hiddenJobs{ids: make(map[string]struct{}, len(d.records))}
	quoted := make([]string, 0, len(d.records))
	for id := range d.records {
		v.ids[id] = struct{}{}
		quoted = append(quoted, regexp.QuoteMeta(id))
	}
	slices.Sort(quoted)
	re := strings.Join(quoted, "|")
	v.notIn = labels.MustNewMatcher(labels.MatchNotRegexp, LabelJob, re)
	v.in = labels.MustNewMatcher(labels.MatchRegexp, LabelJob, re)
	d.view.Store(v)
}

// hidden reports whether a job is deleted and not yet removed.
func (d *deleter) hidden(jobID string) bool {
	v := d.view.Load()
	if v == nil {
		return false
	}
	_, ok := v.ids[jobID]
	return ok
}

// add makes a job pending: it writes the record durably, then hides the
// job. d.mu must not be held.
func (d *deleter) add(jobID string, now time.Time) error {
	data, err := json.Marshal(deletionRecord{JobID: jobID, RequestedMs: now.UnixMilli()})
	if err != nil {
		return fmt.Errorf("encode deletion record of job %q: %w", jobID, err)
	}
	name := recordName(jobID)
	if err := writeFileSync(d.dir, name, data); err != nil {
		return fmt.Errorf("write deletion record of job %q: %w", jobID, err)
	}
	d.mu.Lock()
	d.records[jobID] = name
	delete(d.removed, jobID)
	d.publish()
	d.mu.Unlock()
	return nil
}

// writeFileSync writes dir/name so that after it returns the file is on
// disk whole, or (after a crash before that) not there under name: temp
// file, fsync, rename, fsync of the directory.
func writeFileSync(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// forget drops the removed record of a job written again. Call with the
// job's lock held.
func (d *deleter) forget(jobID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name, ok := d.removed[jobID]
	if !ok {
		return nil
	}
	if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove deletion record of job %q: %w", jobID, err)
	}
	delete(d.removed, jobID)
	return nil
}

// recheckRemoved hides again, for another cleanup pass, every removed job
// that has series in the head after the WAL replay of Open.
func (s *Store) recheckRemoved(ctx context.Context) error {
	d := s.deletes
	d.mu.Lock()
	ids := make([]string, 0, len(d.removed))
	for id := range d.removed {
		ids = append(ids, regexp.QuoteMeta(id))
	}
	d.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	ir, err := s.db.Head().Index()
	if err != nil {
		return fmt.Errorf("open head index: %w", err)
	}
	defer ir.Close()
	back := map[string]struct{}{}
	vals, err := ir.LabelValues(ctx, LabelJob, nil, labels.MustNewMatcher(labels.MatchRegexp, LabelJob, strings.Join(ids, "|")))
	if err != nil {
		return fmt.Errorf("look up removed jobs in the head: %w", err)
	}
	for _, v := range vals {
		back[strings.Clone(v)] = struct{}{}
	}
	for id := range back {
		s.logger.Warn("samples of a deleted job came back with the write-ahead log, deleting them again", "job", id)
		if err := d.add(id, s.now()); err != nil {
			return err
		}
	}
	return nil
}

// requestCleanup wakes the cleanup goroutine.
func (d *deleter) requestCleanup() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// snapshot returns the pending jobs, sorted.
func (d *deleter) snapshot() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]string, 0, len(d.records))
	for id := range d.records {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// pendingJob reports whether jobID is pending removal.
func (d *deleter) pendingJob(jobID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.records[jobID]
	return ok
}

// finish drops the records of removed jobs and wakes their waiters.
func (d *deleter) finish(ids []string, now time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, id := range ids {
		name, ok := d.records[id]
		if !ok {
			continue
		}
		data, err := json.Marshal(deletionRecord{JobID: id, RemovedMs: now.UnixMilli()})
		if err == nil {
			err = writeFileSync(d.dir, name, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write removal of job %q: %w", id, err))
			continue
		}
		delete(d.records, id)
		d.removed[id] = name
		d.deleted.Inc()
	}
	if err := syncDir(d.dir); err != nil {
		errs = append(errs, fmt.Errorf("sync deletions directory: %w", err))
	}
	d.publish()
	close(d.changed)
	d.changed = make(chan struct{})
	return errors.Join(errs...)
}

// waitFor blocks until jobID (every job when jobID is "") is no longer
// pending, ctx is done or the store closes.
func (d *deleter) waitFor(ctx context.Context, jobID string) error {
	for {
		d.mu.Lock()
		_, pending := d.records[jobID]
		if jobID == "" {
			pending = len(d.records) > 0
		}
		ch := d.changed
		d.mu.Unlock()
		if !pending {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.stop:
			return errors.New("store closed")
		}
	}
}

// Delete deletes a job: from the moment it returns, no read of the store
// shows it and no write to it is taken until its samples are removed from
// disk in the background (see WaitDeletes). The deletion is durable when
// Delete returns: after a crash or restart the job stays hidden and the
// removal resumes. It returns ErrJobNotFound for a job with no series or
// already deleted. Delete only writes a small file, whatever the size of
// the store.
func (s *Store) Delete(ctx context.Context, jobID string) error {
	if s.remote != nil {
		return s.deleteRemote(ctx, jobID) // remote.go
	}
	if s.deletes.hidden(jobID) {
		return fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}
	err := s.hide(ctx, jobID, func() (bool, error) { return s.hasSeries(ctx, jobID, minTime) })
	if err != nil {
		return err
	}
	s.deletes.requestCleanup()
	return nil
}

// hide makes jobID pending if check, run under the job's lock, says so;
// ErrJobNotFound otherwise.
func (s *Store) hide(ctx context.Context, jobID string, check func() (bool, error)) error {
	unlock := s.lockJob(jobID)
	defer unlock()
	if s.deletes.hidden(jobID) {
		return fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}
	ok, err := check()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrJobNotFound, jobID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.deletes.add(jobID, s.now()); err != nil {
		return err
	}
	s.cache.drop(jobID)
	if s.newest != nil {
		s.newest.drop(jobID) // written again, the job is loaded anew (maxtime.go)
	}
	return nil
}

// hasSeries reports whether the job has a sample at or after fromMs.
func (s *Store) hasSeries(ctx context.Context, jobID string, fromMs int64) (bool, error) {
	q, err := s.querier(fromMs, maxTime)
	if err != nil {
		return false, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	set := q.Select(ctx, false, &storage.SelectHints{Start: fromMs, End: maxTime},
		labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))
	found := false
	for !found && set.Next() {
		it := set.At().Iterator(nil)
		found = it.Seek(fromMs) != chunkenc.ValNone
		if err := it.Err(); err != nil {
			return false, fmt.Errorf("look up job %q: %w", jobID, err)
		}
	}
	if err := set.Err(); err != nil {
		return false, fmt.Errorf("look up job %q: %w", jobID, err)
	}
	return found, nil
}

// WaitDeletes blocks until every deleted job is removed from disk, or ctx
// is done.
func (s *Store) WaitDeletes(ctx context.Context) error {
	return s.deletes.waitFor(ctx, "")
}

// lockLive waits until none of jobs is pending deletion and locks them
// for writing, in a fixed order. It waits up to ctx's deadline (without
// one, until the removal ends) and then fails with ErrDeletePending. Rows
// without a job ("") wait for nothing.
func (s *Store) lockLive(ctx context.Context, jobs []string) (unlock func(), err error) {
	if s.deleteWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.deleteWait)
		defer cancel()
	}
	for {
		for _, j := range jobs {
			if j == "" {
				continue
			}
			if err := s.deletes.waitFor(ctx, j); err != nil {
				return nil, fmt.Errorf("%w: job %q is being deleted, retry when its removal ends: %v", ErrDeletePending, j, err)
			}
		}
		unlock := s.lockJobs(jobs)
		again := false
		for _, j := range jobs {
			if j != "" && s.deletes.hidden(j) {
				again = true // deleted again in between
				break
			}
		}
		if again {
			unlock()
			continue
		}
		for _, j := range jobs {
			if j == "" {
				continue
			}
			if err := s.deletes.forget(j); err != nil {
				unlock()
				return nil, err
			}
		}
		return unlock, nil
	}
}

// runDeletes is the cleanup goroutine: one pass over all pending jobs per
// wake-up, until stop.
func (s *Store) runDeletes() {
	d := s.deletes
	defer close(d.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.stop
		cancel()
	}()
	var retry <-chan time.Time
	for {
		select {
		case <-d.stop:
			return
		case <-d.kick:
		case <-retry:
		}
		retry = nil
		if len(d.snapshot()) == 0 {
			continue
		}
		if d.hold != nil {
			select {
			case <-d.stop:
				return
			case <-d.hold:
			}
		}
		ids := d.snapshot()
		start := time.Now()
		st, err := s.removeJobs(ctx, ids) // delete_blocks.go
		if err != nil {
			if ctx.Err() != nil {
				s.logger.Info("cleanup of deleted jobs stopped by closing the store; it resumes at the next start",
					"jobs", len(ids), "blocks_rewritten", st.rewritten, "duration", time.Since(start))
				return
			}
			d.logger.Error("remove deleted jobs, will retry", "jobs", len(ids), "retry_in", retryDelay, "err", err)
			retry = time.After(retryDelay)
			continue
		}
		s.logPass(ids, st, start)
	}
}

// evictSeries moves every head series matching m into blocks and out of
// the head. CompactSelectedSeries writes a whole-range tombstone for each
// series it evicts into the WAL, so a restart does not bring them back.
// It skips series holding out-of-order samples. Those are flushed by
// CompactOOOHead (which walks the whole out-of-order time span in steps of
// one block range), but that alone would let the head's garbage collection
// drop the emptied series silently, and a restart would load its
// out-of-order chunks back from the head chunk files. So each such series
// first gets a stale marker as an in-order sample, which keeps it in the
// head until CompactSelectedSeries evicts it for good; the marker goes
// with the job's other samples.
func (s *Store) evictSeries(ctx context.Context, m *labels.Matcher) error {
	for attempt := 0; ; attempt++ {
		refs, err := s.headSeries(ctx, m)
		if err != nil {
			return err
		}
		switch {
		case len(refs) == 0:
			return nil
		case attempt == 3:
			return fmt.Errorf("%d series of deleted jobs stay in the head", len(refs))
		case attempt > 0:
			if err := s.markStale(ctx, refs); err != nil {
				return err
			}
			if err := s.db.CompactOOOHead(ctx); err != nil {
				return fmt.Errorf("compact out-of-order head: %w", err)
			}
		}
		if err := s.db.CompactSelectedSeries(refs); err != nil {
			return fmt.Errorf("move %d series of deleted jobs out of the head: %w", len(refs), err)
		}
	}
}

// markStale appends a stale marker to each head series just after the
// newest in-order sample of the head, so that it is in order for all.
func (s *Store) markStale(ctx context.Context, refs []storage.SeriesRef) error {
	h := s.db.Head()
	ir, err := h.Index()
	if err != nil {
		return fmt.Errorf("open head index: %w", err)
	}
	defer ir.Close()
	t := h.MaxTime() + 1
	if h.MaxTime() == math.MinInt64 {
		t = s.now().UnixMilli()
	}
	app := s.db.Appender(ctx)
	var sb labels.ScratchBuilder
	var chks []chunks.Meta
	for _, ref := range refs {
		if err := ir.Series(ref, &sb, &chks); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // gone meanwhile
			}
			_ = app.Rollback()
			return fmt.Errorf("read head series %d: %w", ref, err)
		}
		if _, err := app.Append(0, sb.Labels(), t, math.Float64frombits(value.StaleNaN)); err != nil {
			_ = app.Rollback()
			return fmt.Errorf("mark series %s stale: %w", sb.Labels(), err)
		}
	}
	if err := s.commit(app); err != nil { // diskspace.go
		return fmt.Errorf("commit stale markers: %w", err)
	}
	return nil
}

// headSeries returns the refs of the head series matching m.
func (s *Store) headSeries(ctx context.Context, m *labels.Matcher) ([]storage.SeriesRef, error) {
	ir, err := s.db.Head().Index()
	if err != nil {
		return nil, fmt.Errorf("open head index: %w", err)
	}
	defer ir.Close()
	p, err := ptsdb.PostingsForMatchers(ctx, ir, m)
	if err != nil {
		return nil, fmt.Errorf("select head series: %w", err)
	}
	var refs []storage.SeriesRef
	for p.Next() {
		refs = append(refs, p.At())
	}
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("select head series: %w", err)
	}
	return refs, nil
}

// anySeries reports whether any stored series matches m.
func (s *Store) anySeries(ctx context.Context, m *labels.Matcher) (bool, error) {
	q, err := s.querier(minTime, maxTime)
	if err != nil {
		return false, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	set := q.Select(ctx, false, nil, m)
	found := set.Next()
	if err := set.Err(); err != nil {
		return false, fmt.Errorf("check deleted jobs: %w", err)
	}
	return found, nil
}

// hidingQueryable hides pending jobs from every querier of db.
type hidingQueryable struct {
	s *Store
	d *deleter
}

func (h hidingQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := h.s.querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return hidingQuerier{Querier: q, d: h.d}, nil
}

// hidingQuerier adds job_id!~"<pending>" to every call while jobs are
// pending; without pending jobs it passes calls through untouched.
type hidingQuerier struct {
	storage.Querier
	d *deleter
}

// Select always sorts its series by labels, whatever sortSeries says: an
// unsorted TSDB read gives the head's series in the order they were
// created and a block's in label order, so a PromQL answer (whose vectors
// keep the order read) would change with compaction and differ from a
// remote engine's, which the remote querier returns sorted.
func (q hidingQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if v := q.d.view.Load(); v != nil {
		ms = append(slices.Clip(ms), v.notIn)
	}
	return q.Querier.Select(ctx, true, hints, ms...)
}

func (q hidingQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	v := q.d.view.Load()
	if v == nil {
		return q.Querier.LabelValues(ctx, name, hints, ms...)
	}
	if name == LabelJob {
		// Same answer as with the matcher, without its series scan.
		vals, ann, err := q.Querier.LabelValues(ctx, name, hints, ms...)
		return slices.DeleteFunc(vals, func(id string) bool { _, ok := v.ids[id]; return ok }), ann, err
	}
	return q.Querier.LabelValues(ctx, name, hints, append(slices.Clip(ms), v.notIn)...)
}

func (q hidingQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if v := q.d.view.Load(); v != nil {
		ms = append(slices.Clip(ms), v.notIn)
	}
	return q.Querier.LabelNames(ctx, hints, ms...)
}
