package tsdb

// Backfill: samples older than the head's window are written as TSDB
// blocks of their own, never through the out-of-order head.
//
// The head takes the recent past only: everything at or after the cut
// (backfillCut), a two-hour boundary at least headWindow before the
// newest of the head's newest sample and the clock. The out-of-order
// window is set just wide enough that the head takes every sample routed
// to it (outOfOrderWindow), a few hours. Older samples of one write are
// grouped by UTC day and each day becomes one block, written through a
// throw-away head and the store's compactor, fsynced and renamed into the
// data directory, then loaded by the DB, all before the write returns.
//
// Every backfill block of a day spans the whole day (up to the cut), so
// two imports into the same day overlap and Prometheus's vertical
// compaction merges them into one block per day in the background; days
// are multiples of the two-hour block range, so no merge ever crosses a
// day or grows past one. Backfill blocks carry the out-of-order hint:
// Prometheus then leaves them out of the head's replay cutoff, as it does
// for its own out-of-order blocks.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"
)

// headWindow is how far back from the newest of the head's newest sample
// and the clock the head takes samples: Prometheus keeps at most about
// three hours in the in-order head before it compacts, so a backfill
// block below the cut does not overlap the head's data.
const headWindow = 3 * time.Hour

// blockRangeMs is the TSDB's block range (Prometheus' default, 2h).
const blockRangeMs = int64(2 * time.Hour / time.Millisecond)

// backfillDayMs is the span of one backfill block: a UTC day.
const backfillDayMs = int64(24 * time.Hour / time.Millisecond)

// backfillTmpPrefix names the directories of the throw-away heads under
// the data directory; Prometheus ignores them, Open removes leftovers.
const backfillTmpPrefix = ".backfill-"

// outOfOrderWindow is the head's out-of-order window for a store whose
// clock may run skew behind its newest samples: the cut lies at most
// headWindow plus one block range before the head's newest sample or the
// clock, and a concurrent write may move the head's newest sample up to
// skew past the clock.
func outOfOrderWindow(skew time.Duration) int64 {
	return int64((headWindow+skew)/time.Millisecond) + blockRangeMs
}

// backfillCut is the time below which a write's samples go to blocks:
// the two-hour boundary at or below headWindow before the newer of the
// head's newest sample and nowMs.
func backfillCut(db *ptsdb.DB, nowMs int64) int64 {
	top := max(db.Head().MaxTime(), nowMs) - int64(headWindow/time.Millisecond)
	return alignDown(top, blockRangeMs)
}

func alignDown(t, step int64) int64 {
	if t < 0 {
		return -((-t + step - 1) / step) * step
	}
	return t / step * step
}

// headCut is backfillCut of db for a write starting now; a remote store
// (db nil) takes every sample through its engine.
func (s *Store) headCut(db *ptsdb.DB) int64 {
	if db == nil {
		return math.MinInt64
	}
	return backfillCut(db, s.now().UnixMilli())
}

// backfillRows gathers the block part of a write's rows, in rows order:
// next starts the part of the next row.
type backfillRows struct {
	rows  []bfRow
	fresh bool // the last row of rows is not the current row's yet
}

func (b *backfillRows) next() { b.fresh = true }

func (b *backfillRows) cur(ls labels.Labels) *bfRow {
	if b.fresh {
		b.rows = append(b.rows, bfRow{ls: ls})
		b.fresh = false
	}
	return &b.rows[len(b.rows)-1]
}

func (b *backfillRows) add(ls labels.Labels, t int64, v float64) {
	r := b.cur(ls)
	r.ts, r.vs = append(r.ts, t), append(r.vs, v)
}

func (b *backfillRows) addHistogram(ls labels.Labels, h HistogramSample) {
	r := b.cur(ls)
	r.hs = append(r.hs, h)
}

// bfRow is the part of one row that goes to blocks: its samples below
// the cut that are not stored yet.
type bfRow struct {
	ls labels.Labels
	ts []int64
	vs []float64
	hs []HistogramSample
}

// writeBackfill writes rows as one block per UTC day they touch, each
// ending at the day's end or cutMs, whichever is first, and loads them.
// When it returns nil every sample is on disk and readable. On an error
// blocks written before it may stay (a retry stores the rest once).
func (s *Store) writeBackfill(ctx context.Context, rows []bfRow, cutMs int64) error {
	var days []int64
	for _, r := range rows {
		for _, t := range r.ts {
			days = append(days, alignDown(t, backfillDayMs))
		}
		for _, h := range r.hs {
			days = append(days, alignDown(h.T, backfillDayMs))
		}
	}
	if len(days) == 0 {
		return nil
	}
	slices.Sort(days)
	days = slices.Compact(days)
	written := 0
	for _, day := range days {
		n, err := s.writeDayBlock(ctx, rows, day, min(day+backfillDayMs, cutMs))
		if err != nil {
			return blockWriteErr(fmt.Errorf("write backfill block of %s: %w", time.UnixMilli(day).UTC().Format(time.DateOnly), err)) // diskspace.go
		}
		written += n
	}
	if written == 0 {
		return nil
	}
	if err := s.loadBlocks(ctx); err != nil {
		return fmt.Errorf("load backfill blocks: %w", err)
	}
	return nil
}

// writeDayBlock writes the samples of rows in [mint, maxt) as one block
// and returns how many blocks it wrote (0 or 1).
func (s *Store) writeDayBlock(ctx context.Context, rows []bfRow, mint, maxt int64) (int, error) {
	tmp, err := os.MkdirTemp(s.db.Dir(), backfillTmpPrefix)
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	opts := ptsdb.DefaultHeadOptions()
	// Twice the span, so that no sample of the span is out of bounds for
	// the head, whatever order the rows come in.
	opts.ChunkRange = 2 * backfillDayMs
	opts.ChunkDirRoot = tmp
	opts.StripeSize = 256 // one write's series, not a server's
	h, err := ptsdb.NewHead(nil, slog.New(slog.DiscardHandler), nil, nil, opts, nil)
	if err != nil {
		return 0, fmt.Errorf("create head: %w", err)
	}
	defer func() { _ = h.Close() }()
	if err := h.Init(math.MinInt64); err != nil {
		return 0, fmt.Errorf("init head: %w", err)
	}
	app := h.Appender(ctx)
	n := 0
	for _, r := range rows {
		lo := sort.Search(len(r.ts), func(i int) bool { return r.ts[i] >= mint })
		hi := sort.Search(len(r.ts), func(i int) bool { return r.ts[i] >= maxt })
		var ref storage.SeriesRef
		for i := lo; i < hi; i++ {
			if ref, err = app.Append(ref, r.ls, r.ts[i], r.vs[i]); err != nil {
				_ = app.Rollback()
				return 0, fmt.Errorf("append sample of %s at %d: %w", r.ls, r.ts[i], err)
			}
			n++
		}
		for _, hs := range r.hs {
			if hs.T < mint || hs.T >= maxt {
				continue
			}
			if ref, err = app.AppendHistogram(ref, r.ls, hs.T, hs.H, hs.FH); err != nil {
				_ = app.Rollback()
				return 0, fmt.Errorf("append histogram of %s at %d: %w", r.ls, hs.T, err)
			}
			n++
		}
	}
	if err := app.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	base := &ptsdb.BlockMeta{}
	base.Compaction.SetOutOfOrder()
	ids, err := s.compactor.Write(s.db.Dir(), ptsdb.NewRangeHead(h, mint, maxt-1), mint, maxt, base)
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

// loadBlocks makes the DB load the blocks in its directory. Prometheus
// exports no reload; a head compaction of an empty range does one and
// nothing else (the store's compactor writes no block for it, and the
// head is not truncated below its oldest sample). An empty head would
// take that range's end as its oldest time, so there the out-of-order
// compaction reloads instead: with no in-order sample there is nothing
// out of order either.
//
// The reload reads every block's meta, which the delete pass writes when
// it compacts a block into nothing: both hold queryMu, the reload shared.
func (s *Store) loadBlocks(ctx context.Context) error {
	s.queryMu.RLock()
	defer s.queryMu.RUnlock()
	h := s.db.Head()
	if h.MinTime() == math.MaxInt64 {
		return s.db.CompactOOOHead(ctx)
	}
	return s.db.CompactHead(ptsdb.NewRangeHead(h, math.MinInt64+1, math.MinInt64))
}

// removeBackfillLeftovers removes the throw-away heads of writes that a
// crash interrupted.
func removeBackfillLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), backfillTmpPrefix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// compactor is the TSDB's compactor, with two changes. Its context is
// cancelled by Store.Close, so that no compaction in flight keeps a
// closing store open. And it writes nothing for an empty interval or for
// a stretch of the out-of-order head that holds no sample: Prometheus's
// out-of-order compaction walks the head's whole out-of-order span in
// steps of one block range, which for a store written before backfill
// blocks (old jobs in the out-of-order head) meant tens of thousands of
// empty steps, each reading every series.
type compactor struct {
	*ptsdb.LeveledCompactor

	mu sync.Mutex
	// oooKey identifies the out-of-order compaction head that oooRanges
	// was computed for: its last WBL file and m-map ref.
	oooKey    [2]uint64
	oooRanges map[int64]struct{} // block ranges (by start) holding a chunk
}

func newCompactorFunc(stop context.Context, out **compactor) ptsdb.NewCompactorFunc {
	return func(ctx context.Context, r prometheus.Registerer, l *slog.Logger, ranges []int64, pool chunkenc.Pool, opts *ptsdb.Options) (ptsdb.Compactor, error) {
		ctx, cancel := context.WithCancel(ctx)
		context.AfterFunc(stop, cancel)
		lc, err := ptsdb.NewLeveledCompactorWithOptions(ctx, r, l, ranges, pool, ptsdb.LeveledCompactorOptions{
			MaxBlockChunkSegmentSize:    opts.MaxBlockChunkSegmentSize,
			EnableOverlappingCompaction: opts.EnableOverlappingCompaction,
			PD:                          opts.PostingsDecoderFactory,
			UseUncachedIO:               opts.UseUncachedIO,
			BlockExcludeFilter:          opts.BlockCompactionExcludeFunc,
		})
		if err != nil {
			cancel()
			return nil, err
		}
		*out = &compactor{LeveledCompactor: lc}
		return *out, nil
	}
}

func (c *compactor) Write(dest string, b ptsdb.BlockReader, mint, maxt int64, base *ptsdb.BlockMeta) ([]ulid.ULID, error) {
	if maxt <= mint {
		return nil, nil
	}
	var has bool
	var err error
	switch v := b.(type) {
	case *ptsdb.OOOCompactionHead:
		has, err = c.oooHas(v, mint, maxt)
	case *ptsdb.SelectedSeriesHead:
		// A delete's eviction of a few series walks the head's whole span,
		// which after the replay of an old store's out-of-order samples
		// starts years back.
		has, err = hasChunk(v, mint, maxt)
	default:
		has = true
	}
	if err != nil || !has {
		return nil, err
	}
	return c.LeveledCompactor.Write(dest, b, mint, maxt, base)
}

// hasChunk reports whether a series of b has a chunk overlapping
// [mint, maxt).
func hasChunk(b ptsdb.BlockReader, mint, maxt int64) (bool, error) {
	found := false
	err := eachChunk(b, func(m chunks.Meta) bool {
		found = m.MinTime < maxt && m.MaxTime >= mint
		return !found
	})
	return found, err
}

// eachChunk calls f with the meta of every chunk of every series of b
// until f returns false.
func eachChunk(b ptsdb.BlockReader, f func(chunks.Meta) bool) error {
	ir, err := b.Index()
	if err != nil {
		return err
	}
	defer ir.Close()
	name, value := index.AllPostingsKey()
	p, err := ir.Postings(context.Background(), name, value)
	if err != nil {
		return err
	}
	var sb labels.ScratchBuilder
	var chks []chunks.Meta
	for p.Next() {
		if err := ir.Series(p.At(), &sb, &chks); err != nil {
			return err
		}
		for _, m := range chks {
			if !f(m) {
				return nil
			}
		}
	}
	return p.Err()
}

// oooHas reports whether a chunk of the out-of-order compaction head
// overlaps [mint, maxt). The chunks are listed once per compaction head,
// whose stretches the compaction writes one after the other.
func (c *compactor) oooHas(ooo *ptsdb.OOOCompactionHead, mint, maxt int64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]uint64{uint64(ooo.LastWBLFile()), uint64(ooo.LastMmapRef())}
	if c.oooRanges == nil || c.oooKey != key {
		ranges, err := oooChunkRanges(ooo)
		if err != nil {
			return false, err
		}
		c.oooKey, c.oooRanges = key, ranges
	}
	for start := alignDown(mint, blockRangeMs); start < maxt; start += blockRangeMs {
		if _, ok := c.oooRanges[start]; ok {
			return true, nil
		}
	}
	return false, nil
}

// oooChunkRanges lists the block ranges that a chunk of the whole
// out-of-order compaction head overlaps.
func oooChunkRanges(ooo *ptsdb.OOOCompactionHead) (map[int64]struct{}, error) {
	out := map[int64]struct{}{}
	err := eachChunk(ooo.CloneForTimeRange(math.MinInt64, math.MaxInt64), func(m chunks.Meta) bool {
		for start := alignDown(m.MinTime, blockRangeMs); start <= m.MaxTime; start += blockRangeMs {
			out[start] = struct{}{}
		}
		return true
	})
	return out, err
}
