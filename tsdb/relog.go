package tsdb

// Reopening after a failed log write. While the log is unsound
// (diskspace.go) and the data dir's file system has room again, the
// next write attempt (at most once per relogInterval) reopens the TSDB
// in place: with writes held off (compactMu) and readers held off
// (dbMu), it closes the TSDB, cuts the torn tail of its logs as Open
// does (repairLogs), opens it again with the options of Open, and drops
// what was derived from the old one (the newest-time index, the job
// cache). The replay rebuilds the head from what the log really holds,
// which is what a restart would do. Until then every write is refused
// with ErrLogUnsound, and a reopen that fails (the disk filled again) is
// tried again at a later write.
//
// s.db is read only under compactMu or dbMu, shared (or exclusively),
// and replaced under both exclusively. Readers take dbMu with TryRLock
// (acquireDB): while a reopen waits for or holds it they fail at once
// with ErrReopening rather than queue behind it, so a reader already
// holding a querier that opens another cannot deadlock with the reopen.
// A querier holds dbMu shared until it is closed.

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
)

// ErrReopening is a read refused while the store reopens its TSDB after
// a failed log write; it is taken again within seconds (a server
// answers 503 with Retry-After).
var ErrReopening = errors.New("store is reopening after a failed write-ahead log write")

// relogInterval is how often writes refused for an unsound log try to
// reopen the store, by the store's clock.
const relogInterval = time.Second

// dbRegisterer is the registerer the TSDB is opened with: it remembers
// what the TSDB registered, so that a reopen can take it away first
// (Prometheus' DB registers its metrics when opened, and Close leaves
// them).
type dbRegisterer struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

func (r *dbRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
	return nil
}

func (r *dbRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *dbRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// forget unregisters everything registered through r.
func (r *dbRegisterer) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.reg.Unregister(c)
	}
	r.cs = nil
}

// acquireDB returns the TSDB and holds off a reopen until release is
// called; while a reopen is under way it fails with ErrReopening.
func (s *Store) acquireDB() (db *ptsdb.DB, release func(), err error) {
	if !s.dbMu.TryRLock() {
		return nil, nil, fmt.Errorf("%w: retry in a few seconds", ErrReopening)
	}
	if s.db == nil { // the last reopen failed
		s.dbMu.RUnlock()
		return nil, nil, fmt.Errorf("%w: the last attempt failed; writes retry it", ErrReopening)
	}
	return s.db, sync.OnceFunc(s.dbMu.RUnlock), nil
}

// heldQuerier releases the TSDB when it is closed.
type heldQuerier struct {
	storage.Querier
	release func()
}

func (q heldQuerier) Close() error {
	defer q.release()
	return q.Querier.Close()
}

// heldChunkQuerier releases the TSDB when it is closed.
type heldChunkQuerier struct {
	storage.ChunkQuerier
	release func()
}

func (q heldChunkQuerier) Close() error {
	defer q.release()
	return q.ChunkQuerier.Close()
}

// maybeReopen reopens the store when its log is unsound, there is room
// again, and no attempt ran in the last relogInterval. Writers call it
// before admission, holding no lock of the store.
func (s *Store) maybeReopen() {
	if s.disk == nil || s.disk.logErr.Load() == nil || !s.reopenMu.TryLock() {
		return
	}
	defer s.reopenMu.Unlock()
	now := s.now()
	if s.shut || s.disk.logErr.Load() == nil || now.Sub(s.reopenedAt) < relogInterval && !s.reopenedAt.IsZero() {
		return
	}
	s.reopenedAt = now
	need := s.disk.reopenFree()
	if free := s.disk.lookNow(); free < need {
		s.logger.Warn("write-ahead log not reopened: too little free space", "dir", s.disk.dir,
			"free_bytes", free, "needed_bytes", need-free)
		return
	}
	if err := s.reopen(); err != nil {
		s.logger.Error("write-ahead log not reopened, retrying at a later write", "err", err)
		return
	}
	s.disk.logErr.Store(nil)
	s.logger.Info("write-ahead log repaired and store reopened: writes are taken again")
}

// reopen closes the TSDB, repairs its logs and opens it again. On an
// error s.db stays nil (reads fail with ErrReopening) until a later
// attempt succeeds. reopenMu is held.
func (s *Store) reopen() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	dir := s.disk.dir
	if s.db != nil {
		s.closing.Store(true) // a compaction cut short is not a failure
		err := s.db.Close()
		s.closing.Store(false)
		s.db = nil
		if err != nil {
			s.logger.Info("closed the store's TSDB to reopen it", "err", err)
		}
	}
	if s.dbReg != nil {
		s.dbReg.forget()
	}
	for _, sub := range []string{"wal", "wbl"} {
		ld, err := checkLog(dir, sub)
		if err != nil {
			return fmt.Errorf("check %s: %w", sub, err)
		}
		if ld == nil {
			continue
		}
		s.logger.Warn("write-ahead log cut after its last good record", "dir", filepath.Join(dir, sub),
			"segment", ld.Segment, "offset", ld.Offset, "dropped_segments", ld.DroppedSegments,
			"dropped_bytes", ld.DroppedBytes, "err", ld.Err)
		if err := cutLog(filepath.Join(dir, sub), ld); err != nil {
			return fmt.Errorf("repair %s: %w", sub, err)
		}
	}
	if err := removeBackfillLeftovers(dir); err != nil {
		return fmt.Errorf("remove unfinished backfill: %w", err)
	}
	if err := checkStartSpace(dir); err != nil {
		return err
	}
	o := *s.dbOpts
	var comp *compactor
	o.NewCompactorFunc = newCompactorFunc(s.stopCtx, &comp)
	var reg prometheus.Registerer
	if s.dbReg != nil {
		reg = s.dbReg
	}
	db, err := ptsdb.Open(dir, s.dbLogger, reg, &o, nil)
	if err != nil {
		return fmt.Errorf("open TSDB: %w", err)
	}
	s.db, s.compactor = db, comp
	s.newest.reset()
	s.cache.clear()
	return nil
}
