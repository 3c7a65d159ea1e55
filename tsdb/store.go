// Package tsdb is Peakline's job store: per-task resource samples and the
// tasks of Ansible jobs, kept in an embedded Prometheus TSDB on local disk.
//
// It owns the schema (metric and label names, see schema.go), appending
// (live batches and backfill of jobs of any age through the out-of-order
// window), reading one job as per-resource columns with task attribution,
// job summaries, retention and deletion. It does not downsample, speak HTTP
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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
)

// ErrJobNotFound is returned for a job with no stored series.
var ErrJobNotFound = errors.New("job not found")

// Options configure a Store.
type Options struct {
	// Retention drops blocks whose samples are all older than the newest
	// sample in the store minus Retention (Prometheus semantics: measured
	// from the newest data, not the wall clock). Zero keeps everything.
	Retention time.Duration
	// CacheSamples bounds the samples of whole jobs kept decoded in memory
	// for repeated graph requests (about 20 bytes each). Zero means
	// DefaultCacheSamples; negative disables the cache.
	CacheSamples int
	// Now is the clock of the admission window (see admit.go); nil
	// means time.Now.
	Now func() time.Time
	// MaxFutureSkew is how far ahead of Now a sample may be. Zero means
	// DefaultMaxFutureSkew.
	MaxFutureSkew time.Duration
}

// DefaultCacheSamples keeps about 400 MB of decoded samples.
const DefaultCacheSamples = 20_000_000

// oooWindow lets the head accept samples of any age: jobs from years ago
// are imported through the out-of-order path and compacted into blocks of
// their own time. 100 years in milliseconds.
const oooWindow = int64(100 * 365 * 24 * time.Hour / time.Millisecond)

// Store is a job store over one TSDB directory.
type Store struct {
	db     *ptsdb.DB
	logger *slog.Logger

	// appendMu serialises appends of one job so that the duplicate check
	// and the commit of a retried batch cannot interleave.
	appendMu [64]sync.Mutex

	// compactMu pauses writes while Compact moves the whole head into a
	// block: the head is truncated up to the block's end afterwards, so a
	// sample appended in between at an earlier time would be dropped with
	// it. Writes hold it shared, Compact exclusively.
	compactMu sync.RWMutex

	cache *cache

	damage Damage // found by checkDisk at Open (repair.go)

	now           func() time.Time
	maxFutureSkew time.Duration
	retention     time.Duration
}

// Open opens (creating if needed) the store in dir. reg may be nil.
func Open(dir string, opts Options, logger *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := ptsdb.DefaultOptions()
	o.RetentionDuration = int64(opts.Retention / time.Millisecond)
	o.OutOfOrderTimeWindow = oooWindow
	o.EnableOverlappingCompaction = true
	damage, err := checkDisk(dir, logger, reg)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	db, err := ptsdb.Open(dir, logger.With("component", "tsdb"), reg, o, nil)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	s := &Store{db: db, logger: logger, cache: newCache(opts.CacheSamples), damage: damage,
		now: opts.Now, maxFutureSkew: opts.MaxFutureSkew, retention: opts.Retention}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxFutureSkew <= 0 {
		s.maxFutureSkew = DefaultMaxFutureSkew
	}
	return s, nil
}

// Close flushes and closes the store. Samples acknowledged by Append are
// already in the write-ahead log; Close also writes the head to disk.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Queryable exposes the raw series for query engines (PromQL).
func (s *Store) Queryable() storage.Queryable { return s.db }

// Appendable exposes the raw appender of the TSDB. It skips admission,
// the duplicate rule and the job cache: only for tests that build a store
// of arbitrary series. Every write of a server goes through Append or
// AppendSeries.
func (s *Store) Appendable() storage.Appendable { return s.db }

// Compact compacts the head and out-of-order head into blocks. Used by
// tests and benchmarks that measure on-disk size. Writes wait while it runs.
func (s *Store) Compact(ctx context.Context) error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	h := s.db.Head()
	if h.NumSeries() == 0 || h.MinTime() > h.MaxTime() {
		return s.db.CompactOOOHead(ctx)
	}
	if err := s.db.CompactHead(ptsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
		return fmt.Errorf("compact head: %w", err)
	}
	if err := s.db.CompactOOOHead(ctx); err != nil {
		return fmt.Errorf("compact out-of-order head: %w", err)
	}
	return nil
}

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
