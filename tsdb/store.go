// Package tsdb is Peakline's job store: per-task resource samples and the
// tasks of Ansible jobs, kept in an embedded Prometheus TSDB on local disk,
// or (OpenRemote, remote.go) in a Prometheus-compatible engine reached
// through tsdb/remote, with the same write path and read code: callers
// cannot tell which backend answers.
//
// It owns the schema (metric and label names, see schema.go), appending
// (live batches and backfill of jobs of any age through the out-of-order
// window), reading one job as per-resource columns with task attribution,
// job summaries, retention and deletion, and the admission of writes by
// the free space of the data dir (diskspace.go). It does not downsample, speak HTTP
// or parse Ansible files: those belong to downsample, server and collector.
//
// A Store is safe for concurrent use.
package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/peakline/peakline/tsdb/remote"
)

// ErrJobNotFound is returned for a job with no stored series.
var ErrJobNotFound = errors.New("job not found")

// Options configure a Store.
type Options struct {
	// Retention deletes, as Delete does, every job whose newest sample,
	// task start and event are all older than Now() - Retention, checked
	// every min(Retention/10, 1h). It is measured against the clock, not
	// the newest stored sample, so a wrong timestamp in one job cannot
	// shorten another's life. Zero keeps everything.
	Retention time.Duration
	// CacheSamples bounds the samples of whole jobs kept decoded in memory
	// for repeated graph requests (about 20 bytes each). Zero means
	// DefaultCacheSamples; negative disables the cache.
	CacheSamples int
	// Now is the clock of the admission window (see admit.go) and of
	// retention; nil means time.Now.
	Now func() time.Time
	// MaxFutureSkew is how far ahead of Now a sample may be. Zero means
	// DefaultMaxFutureSkew.
	MaxFutureSkew time.Duration
	// HoldDeletes, when not nil, holds the removal of deleted jobs from
	// disk: each cleanup pass first receives from it (or gives up when the
	// store closes). Tests use it to look at a store between a delete and
	// its cleanup. Nil removes at once.
	HoldDeletes <-chan struct{}
	// DeleteWait bounds how long a write to a job whose deletion is still
	// being removed from disk waits before it fails with ErrDeletePending
	// (a server answers 503 with Retry-After). Zero waits as long as the
	// write's context allows (import into a stopped store).
	DeleteWait time.Duration
	// CacheTTL bounds how long a cached job, summary or span is served:
	// zero keeps them until the job is written or deleted (the embedded
	// store sees every write); a remote store, whose engine other
	// replicas write to, uses DefaultRemoteCacheTTL for zero.
	CacheTTL time.Duration
	// MinFreeDisk is the free space, in bytes, of the data dir's file
	// system below which writes are refused with ErrInsufficientStorage
	// (see diskspace.go). Zero means DefaultMinFreeDisk; negative turns
	// the rule off. A remote store ignores it.
	MinFreeDisk int64
}

// DefaultCacheSamples keeps about 400 MB of decoded samples.
const DefaultCacheSamples = 20_000_000

// Store is a job store over one TSDB directory (Open) or a remote engine
// (OpenRemote).
type Store struct {
	// db is the TSDB, nil for a remote store (and while a reopen that
	// failed is retried); read under compactMu or dbMu, replaced by a
	// reopen under both (relog.go).
	db     *ptsdb.DB
	dbMu   sync.RWMutex
	remote *remote.Client // nil for an embedded store (remote.go)
	// spansFast is 0 while untried, k+1 when the remote engine answers
	// spanFuncs[k], -1 when it answers none (remote.go).
	spansFast atomic.Int32
	logger    *slog.Logger
	closing   *atomic.Bool // set by Close: the TSDB's compaction may be canceled (closelog.go)
	// compactor is the TSDB's compactor (backfill.go); stopCompactions
	// cancels its work in flight, first thing in Close.
	compactor       *compactor
	stopCompactions context.CancelFunc
	blockLog        *blockLog // summarises the TSDB's per-block log records (tsdblog.go)
	// afterBlock, when set (by tests, before the first delete), is called
	// by the cleanup pass after each block it rewrote (delete_blocks.go).
	afterBlock func(ctx context.Context, rewritten int)

	// appendMu holds off writes of a job while it is deleted: writes
	// take their jobs' locks shared, Delete and retention exclusively.
	appendMu [64]sync.RWMutex
	// seriesMu serialises writes of one series (by label hash), so that
	// the duplicate check and the commit of a retried batch cannot
	// interleave; taken after appendMu (maxtime.go).
	seriesMu [seriesStripes]sync.Mutex
	// newest bounds each series' newest stored time, so that most writes
	// skip reading what is stored (maxtime.go); nil for a remote store.
	newest *newestTimes

	// compactMu pauses writes while Compact moves the whole head into a
	// block: the head is truncated up to the block's end afterwards, so a
	// sample appended in between at an earlier time would be dropped with
	// it. Writes hold it shared, Compact exclusively.
	compactMu sync.RWMutex

	cache *cache

	damage Damage // found by checkDisk at Open (repair.go)

	disk *diskGuard // free-space admission and log soundness; nil for a remote store

	// What a reopen after a failed log write opens the TSDB with
	// (relog.go); reopenMu serialises reopens with Close, which sets shut.
	dbOpts     *ptsdb.Options
	dbLogger   *slog.Logger
	dbReg      *dbRegisterer // nil without a registry
	stopCtx    context.Context
	reopenMu   sync.Mutex
	reopenedAt time.Time
	shut       bool

	// mergeMu serialises a delete pass over the blocks (removeJobs) with
	// Compact's merge of blocks (mergeBlocks). Taken after dbMu, before
	// queryMu.
	mergeMu sync.Mutex

	// queryMu serialises opening queriers (read) with db.Delete (write):
	// Prometheus's Block.Delete replaces a block's tombstones and meta
	// without a lock that NewBlockQuerier takes.
	queryMu sync.RWMutex

	now           func() time.Time
	maxFutureSkew time.Duration
	retention     time.Duration
	deleteWait    time.Duration
	deletes       *deleter
	stopOnce      sync.Once
	stop          chan struct{} // closed by Close: stops retention
	stopped       sync.WaitGroup
}

// Open opens (creating if needed) the store in dir. reg may be nil.
func Open(dir string, opts Options, logger *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := ptsdb.DefaultOptions()
	// Prometheus's own retention is measured from the newest block, so
	// one far-future sample would drop everything else: retention.go
	// applies Options.Retention per job against the clock instead.
	o.RetentionDuration = 0
	skew := opts.MaxFutureSkew
	if skew <= 0 {
		skew = DefaultMaxFutureSkew
	}
	// Only for ordinary late samples: old jobs go to blocks (backfill.go).
	o.OutOfOrderTimeWindow = outOfOrderWindow(skew)
	o.EnableOverlappingCompaction = true
	// Chunk files are allocated whole when started (diskspace.go).
	o.MaxBlockChunkSegmentSize = blockChunkSegmentSize
	damage, err := checkDisk(dir, logger, reg)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	if err := removeBackfillLeftovers(dir); err != nil {
		return nil, fmt.Errorf("open store %q: remove unfinished backfill: %w", dir, err)
	}
	if err := checkStartSpace(dir); err != nil { // diskspace.go
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	minFree := opts.MinFreeDisk
	if minFree == 0 {
		minFree = DefaultMinFreeDisk
	}
	disk := newDiskGuard(dir, minFree, now, reg)
	stopCtx, stopCompactions := context.WithCancel(context.Background())
	var comp *compactor
	o.NewCompactorFunc = newCompactorFunc(stopCtx, &comp)
	closing := new(atomic.Bool)
	blog := newBlockLog(logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "tsdb")}), now)
	dbLogger := slog.New(closingHandler{Handler: blockLogHandler{Handler: logger.Handler(), log: blog}, closing: closing, disk: disk}).With("component", "tsdb")
	var dbReg *dbRegisterer
	var preg prometheus.Registerer
	if reg != nil {
		dbReg = &dbRegisterer{reg: reg}
		preg = dbReg
	}
	opened := *o
	db, err := ptsdb.Open(dir, dbLogger, preg, o, nil)
	if err != nil {
		stopCompactions()
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	dels, err := newDeleter(dir, opts.HoldDeletes, logger, reg)
	if err != nil {
		stopCompactions()
		_ = db.Close()
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	s := &Store{db: db, logger: logger, closing: closing, compactor: comp, stopCompactions: stopCompactions, blockLog: blog,
		cache: newCache(opts.CacheSamples), damage: damage, disk: disk,
		now: now, maxFutureSkew: skew, retention: opts.Retention,
		deleteWait: opts.DeleteWait, deletes: dels, stop: make(chan struct{}), newest: newNewestTimes(),
		dbOpts: &opened, dbLogger: dbLogger, dbReg: dbReg, stopCtx: stopCtx}
	s.cache.ttl, s.cache.now = opts.CacheTTL, s.now
	if err := s.recheckRemoved(context.Background()); err != nil {
		stopCompactions()
		_ = db.Close()
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	s.stopped.Add(1)
	go s.runBlockLog()
	go s.runDeletes()
	dels.requestCleanup() // records left by the last run
	if s.retention > 0 {
		s.stopped.Add(1)
		go s.runRetention()
	}
	return s, nil
}

// hidden reports whether jobID is deleted and its samples not yet removed
// from disk; reads already act as if it did not exist.
func (s *Store) hidden(jobID string) bool { return s.deletes.hidden(jobID) }

// Close stops retention and the removal of deleted jobs (a pass under way
// ends first; records still pending resume at the next Open) and closes
// the store. Samples acknowledged by Append are already in the
// write-ahead log. Close may be called more than once.
func (s *Store) Close() error {
	first := false
	s.stopOnce.Do(func() {
		first = true
		close(s.stop)
		close(s.deletes.stop)
	})
	if !first {
		return nil
	}
	if s.remote != nil {
		s.stopped.Wait()
		<-s.deletes.done
		return nil
	}
	s.reopenMu.Lock() // a reopen under way ends first (relog.go)
	s.shut = true
	s.reopenMu.Unlock()
	// A compaction in flight (Prometheus's own, or one of the delete
	// pass) ends at its next series: the pass below stops at once.
	s.closing.Store(true)
	s.stopCompactions()
	s.stopped.Wait()
	<-s.deletes.done
	var err error
	if s.db != nil { // nil when the last reopen failed
		err = s.db.Close()
	}
	s.blockLog.flush()
	if err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Queryable exposes the raw series for query engines (PromQL). Series of
// deleted jobs are hidden from it at once, as from every read of the
// store.
func (s *Store) Queryable() storage.Queryable { return hidingQueryable{s: s, d: s.deletes} }

// Appendable exposes the raw appender of the TSDB. It skips admission,
// the duplicate rule and the job cache: only for tests that build a store
// of arbitrary series. Every write of a server goes through Append or
// AppendSeries. A remote store has none (nil). It is the TSDB of the
// moment: a reopen after a failed log write (relog.go) closes it.
func (s *Store) Appendable() storage.Appendable {
	if s.remote != nil {
		return nil
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.db
}

// Compact compacts the head and out-of-order head into blocks, and then
// the blocks into larger ones as the TSDB's own loop would within a
// minute, so no compaction starts on its own after it. Used by tests and
// benchmarks that measure on-disk size, or memory and time with nothing
// compacting beside them. Writes wait while the heads are compacted.
func (s *Store) Compact(ctx context.Context) error {
	if s.remote != nil {
		return nil // the engine compacts on its own
	}
	if err := s.compactHeads(ctx); err != nil {
		return err
	}
	return s.mergeBlocks(ctx)
}

func (s *Store) compactHeads(ctx context.Context) error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.db == nil {
		return fmt.Errorf("compact: %w", ErrReopening)
	}
	// The reloads below read every block's meta, which the delete pass
	// writes under queryMu (delete_blocks.go).
	s.queryMu.RLock()
	defer s.queryMu.RUnlock()
	if h := s.db.Head(); h.NumSeries() > 0 && h.MinTime() <= h.MaxTime() {
		if err := s.db.CompactHead(ptsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
			return fmt.Errorf("compact head: %w", err)
		}
	}
	if err := s.db.CompactOOOHead(ctx); err != nil {
		return fmt.Errorf("compact out-of-order head: %w", err)
	}
	return nil
}

// mergeBlocks merges the blocks the TSDB's compactor plans to: the
// overlapping backfill blocks of a day (backfill.go), the out-of-order
// ones, and blocks of one level into the next. It waits for a delete
// pass over the blocks, whose DisableCompactions holds off Prometheus's
// own loop only: a merge beside the pass would close the block the pass
// is rewriting, or carry a deleted job's samples into a new block.
func (s *Store) mergeBlocks(ctx context.Context) error {
	db, release, err := s.acquireDB()
	if err != nil {
		return fmt.Errorf("compact blocks: %w", err)
	}
	defer release()
	s.mergeMu.Lock()
	defer s.mergeMu.Unlock()
	s.queryMu.RLock()
	defer s.queryMu.RUnlock()
	// Writes go on meanwhile: the TSDB compacts the head only where it
	// would on its own, behind the appenders it waits for.
	if err := db.Compact(ctx); err != nil {
		return fmt.Errorf("compact blocks: %w", err)
	}
	return nil
}

// querier opens a querier of the TSDB; every read of the store opens
// its queriers here (see queryMu). The querier holds off a reopen
// (relog.go) until it is closed; during one it fails with ErrReopening.
func (s *Store) querier(mint, maxt int64) (storage.Querier, error) {
	if s.remote != nil {
		return s.remote.Querier(s.remoteRange(mint, maxt))
	}
	db, release, err := s.acquireDB()
	if err != nil {
		return nil, err
	}
	s.queryMu.RLock()
	defer s.queryMu.RUnlock()
	q, err := db.Querier(mint, maxt)
	if err != nil {
		release()
		return nil, err
	}
	return heldQuerier{Querier: q, release: release}, nil
}

// chunkQuerier opens a chunk querier of the TSDB, as querier does; over
// a remote engine, its series encoded as chunks.
func (s *Store) chunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	if s.remote != nil {
		return s.remote.ChunkQuerier(s.remoteRange(mint, maxt))
	}
	db, release, err := s.acquireDB()
	if err != nil {
		return nil, err
	}
	s.queryMu.RLock()
	defer s.queryMu.RUnlock()
	q, err := db.ChunkQuerier(mint, maxt)
	if err != nil {
		release()
		return nil, err
	}
	return heldChunkQuerier{ChunkQuerier: q, release: release}, nil
}

// lockJob locks jobID exclusively: no write of the job runs until the
// unlock.
func (s *Store) lockJob(jobID string) func() {
	m := &s.appendMu[jobLockIndex(jobID)]
	m.Lock()
	return m.Unlock
}

// jobLockIndex is the position in Store.appendMu of a job's lock.
func jobLockIndex(jobID string) int {
	var h uint32 = 2166136261
	for i := 0; i < len(jobID); i++ {
		h = (h ^ uint32(jobID[i])) * 16777619
	}
	return int(h % 64)
}

// allTime is the widest query range.
const (
	minTime = math.MinInt64
	maxTime = math.MaxInt64
)
