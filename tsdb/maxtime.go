package tsdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// The duplicate rule (a retried batch is stored once) reads, for every
// series of a write, the samples already stored in the write's time span.
// Live jobs only ever send samples newer than any they sent before, so
// that read almost always finds nothing, and it cost a quarter of a
// remote write's CPU: selecting a job's series visits all of them. The
// newest-time index below answers "can a sample of this series in
// [lo, hi] be stored already?" from memory; the read is left for the
// writes it cannot rule out (a retry, an out-of-order or backfilled row).
//
// Safety rests on one invariant: for every series of a loaded job, the
// index holds a time at or after the newest sample stored (or no entry
// when the series holds none). An entry too high only costs a read;
// nothing may lower one. Hence:
//   - a job is loaded from storage (its series' newest sample times) once,
//     by the first write that touches it after Open or after it was
//     deleted, merged with max into what concurrent writes put there;
//   - every write raises the entries of its rows after each commit, under
//     the series locks that also serialise the check and the commit;
//   - a failed commit unloads the job (what reached the log is read again);
//   - a delete (hide, under the job's exclusive lock) drops the job.
//
// Writes that bypass the store (Appendable, for tests) are not seen: they
// must not be mixed with writes through Append to one job. A remote store
// keeps no index: other replicas write to its engine.

// seriesStripes is the number of series locks: writes of different
// series run at once, two writes of one series one after the other.
const seriesStripes = 1024

// newestTimes is the index: per job, per series label hash, an upper
// bound of the newest stored sample time (unix ms). Label hashes that
// collide share an entry, which only makes it higher than one needs.
type newestTimes struct {
	mu   sync.Mutex
	jobs map[string]*jobTimes
}

// jobTimes is one job's entries; mu guards all of its fields.
type jobTimes struct {
	mu      sync.Mutex
	loaded  bool // newest holds every series stored for the job
	loading bool // a write is reading the job's times from storage
	newest  map[uint64]int64
}

func newNewestTimes() *newestTimes { return &newestTimes{jobs: map[string]*jobTimes{}} }

// job returns the entries of jobID, creating them (not loaded).
func (n *newestTimes) job(jobID string) *jobTimes {
	n.mu.Lock()
	defer n.mu.Unlock()
	jt := n.jobs[jobID]
	if jt == nil {
		jt = &jobTimes{newest: map[uint64]int64{}}
		n.jobs[jobID] = jt
	}
	return jt
}

// drop forgets jobID; its next write loads it again. Callers hold the
// job's exclusive lock, so no write of it is under way.
func (n *newestTimes) drop(jobID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.jobs, jobID)
}

// reset forgets every job; each is loaded again at its next write.
// Writes are held off (compactMu) while it runs.
func (n *newestTimes) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.jobs)
}

// mayHold reports whether a sample of the series with label hash h at or
// after loMs may be stored already. It is true until the job is loaded.
func (jt *jobTimes) mayHold(h uint64, loMs int64) bool {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if !jt.loaded {
		return true
	}
	t, ok := jt.newest[h]
	return ok && t >= loMs
}

// raise records that the series with label hash h holds a sample at tMs.
func (jt *jobTimes) raise(h uint64, tMs int64) {
	jt.mu.Lock()
	if t, ok := jt.newest[h]; !ok || tMs > t {
		jt.newest[h] = tMs
	}
	jt.mu.Unlock()
}

// unload makes the job be read from storage again before its entries
// are trusted; the entries stay, as bounds that are still valid.
func (jt *jobTimes) unload() {
	jt.mu.Lock()
	jt.loaded = false
	jt.mu.Unlock()
}

// startLoad reports whether the caller is to load the job: it is neither
// loaded nor being loaded by another write.
func (jt *jobTimes) startLoad() bool {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.loaded || jt.loading {
		return false
	}
	jt.loading = true
	return true
}

// finishLoad merges the times read from storage and marks the job loaded
// (or, after a failed read, leaves it for the next write to load).
func (jt *jobTimes) finishLoad(read map[uint64]int64, ok bool) {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	jt.loading = false
	if !ok {
		return
	}
	for h, t := range read {
		if cur, has := jt.newest[h]; !has || t > cur {
			jt.newest[h] = t
		}
	}
	jt.loaded = true
}

// readNewestTimes reads the newest sample time of each series of jobID.
// The caller holds the job's lock (shared): no delete runs meanwhile,
// while writes of the job may, which finishLoad's max merge allows for.
func (s *Store) readNewestTimes(ctx context.Context, jobID string) (map[uint64]int64, error) {
	q, err := s.querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	out := map[uint64]int64{}
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))
	var it chunkenc.Iterator
	for set.Next() {
		series := set.At()
		newest, any := int64(math.MinInt64), false
		it = series.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			newest, any = it.AtT(), true
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("read newest samples of job %q: %w", jobID, err)
		}
		if any {
			h := series.Labels().Hash()
			out[h] = max(out[h], newest)
		}
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("read series of job %q: %w", jobID, err)
	}
	return out, nil
}

// jobsTimes returns the index entries of each job of a write, loading
// the ones not loaded yet (nil for rows without a job, and for a remote
// store). A job another write is loading, or whose read failed, is left
// unloaded: its rows are read as before.
func (s *Store) jobsTimes(ctx context.Context, jobs []string) map[string]*jobTimes {
	if s.newest == nil {
		return nil
	}
	out := make(map[string]*jobTimes, len(jobs))
	for _, j := range jobs {
		if j == "" {
			continue
		}
		jt := s.newest.job(j)
		out[j] = jt
		if jt.startLoad() {
			read, err := s.readNewestTimes(ctx, j)
			if err != nil {
				s.logger.Warn("read newest sample times", "job", j, "err", err)
			}
			jt.finishLoad(read, err == nil)
		}
	}
	return out
}

// lockSeries locks the series locks of rows in index order (after the
// jobs' locks, always) and returns the unlock.
func (s *Store) lockSeries(rows []row) func() {
	idx := make([]int, 0, len(rows))
	for i := range rows {
		idx = append(idx, int(rows[i].hash%seriesStripes))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.seriesMu[i].Lock()
	}
	return func() {
		for _, i := range slices.Backward(idx) {
			s.seriesMu[i].Unlock()
		}
	}
}

// newestOf is the newest time of a row, float and histogram samples.
func (r *row) newestOf() int64 {
	t := int64(math.MinInt64)
	if n := len(r.ts); n > 0 {
		t = r.ts[n-1]
	}
	for _, h := range r.hs {
		t = max(t, h.T)
	}
	return t
}
