package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/index"
)

// passStats is what one cleanup pass did, for its log line.
type passStats struct {
	rewritten int // blocks holding a deleted job, rewritten or dropped
	blocks    int // blocks of the store after the pass
}

// removeJobs removes every sample of ids from the heads and blocks, in
// the order explained at deleter, and marks each job removed as soon as
// no block holds it any more. Prometheus's own compactions and
// Store.Compact's merges wait meanwhile, so that no merge in flight
// carries a job's samples past the pass into a new block. It returns
// ctx's error when the store closes between blocks.
func (s *Store) removeJobs(ctx context.Context, ids []string) (passStats, error) {
	var st passStats
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = regexp.QuoteMeta(id)
	}
	match := labels.MustNewMatcher(labels.MatchRegexp, LabelJob, strings.Join(quoted, "|"))
	// The pass holds off a reopen (relog.go); one waiting makes the
	// pass's next querier fail, and the pass is retried.
	_, release, err := s.acquireDB()
	if err != nil {
		return st, err
	}
	defer release()
	s.db.DisableCompactions()
	defer s.db.EnableCompactions()
	s.mergeMu.Lock() // and Compact's (mergeBlocks)
	defer s.mergeMu.Unlock()
	if err := s.evictSeries(ctx, match); err != nil {
		return st, err
	}
	// A block replaced while the pass holds it (by a backfill's reload)
	// is found again by the next round.
	const rounds = 3
	for range rounds {
		targets, err := s.blocksWith(ctx, match)
		if err != nil {
			return st, err
		}
		left := map[string]int{}
		for _, t := range targets {
			for _, id := range t.jobs {
				left[id]++
			}
		}
		if err := s.finishFree(ids, left); err != nil {
			return st, err
		}
		if len(targets) == 0 {
			st.blocks = len(s.db.Blocks())
			return st, nil
		}
		for _, t := range targets {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if err := s.removeFromBlock(ctx, t.block, match); err != nil {
				return st, err
			}
			st.rewritten++
			if s.afterBlock != nil {
				s.afterBlock(ctx, st.rewritten)
			}
			for _, id := range t.jobs {
				left[id]--
			}
			if err := s.finishFree(ids, left); err != nil {
				return st, err
			}
		}
	}
	return st, fmt.Errorf("series of deleted jobs are still stored after %d rounds", rounds)
}

// finishFree marks removed every job of ids that no block holds (left is
// 0 or absent) and is still pending, and wakes its writers.
func (s *Store) finishFree(ids []string, left map[string]int) error {
	var free []string
	for _, id := range ids {
		if left[id] == 0 && s.deletes.pendingJob(id) {
			free = append(free, id)
		}
	}
	if len(free) == 0 {
		return nil
	}
	return s.deletes.finish(free, s.now())
}

// blockTarget is a block holding series of deleted jobs.
type blockTarget struct {
	block *ptsdb.Block
	jobs  []string // the deleted jobs it holds
}

// blocksWith lists the blocks whose index holds a series matching m,
// oldest first. It reads only each block's postings of the job label.
func (s *Store) blocksWith(ctx context.Context, m *labels.Matcher) ([]blockTarget, error) {
	var out []blockTarget
	for _, b := range s.db.Blocks() {
		ir, err := b.Index()
		if errors.Is(err, ptsdb.ErrClosing) {
			continue // replaced meanwhile: its successor is listed next round
		}
		if err != nil {
			return nil, fmt.Errorf("open index of block %s: %w", b.Meta().ULID, err)
		}
		vals, err := ir.LabelValues(ctx, LabelJob, nil, m)
		if err == nil && len(vals) > 0 {
			t := blockTarget{block: b}
			for _, v := range vals {
				t.jobs = append(t.jobs, strings.Clone(v))
			}
			slices.Sort(t.jobs)
			out = append(out, t)
		}
		_ = ir.Close()
		if err != nil {
			return nil, fmt.Errorf("look up deleted jobs in block %s: %w", b.Meta().ULID, err)
		}
	}
	return out, nil
}

// removeFromBlock rewrites b without the series matching m, or marks it
// for removal when nothing else is left, and reloads the blocks: the
// rewrite names b as its parent, and Prometheus drops a parent (or a
// block marked deletable) at the reload. A crash before the reload
// leaves b with its tombstone, listed again by the next pass.
func (s *Store) removeFromBlock(ctx context.Context, b *ptsdb.Block, m *labels.Matcher) error {
	s.queryMu.Lock()
	err := b.Delete(ctx, math.MinInt64, math.MaxInt64, m)
	s.queryMu.Unlock()
	if errors.Is(err, ptsdb.ErrClosing) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write tombstone of block %s: %w", b.Meta().ULID, err)
	}
	whole, err := onlyMatching(ctx, b, m)
	if err != nil {
		return err
	}
	// Compacting a block into nothing marks it deletable by writing its
	// meta, which opening a querier reads (see queryMu).
	if whole {
		s.queryMu.Lock()
	}
	_, err = s.compactor.Compact(s.db.Dir(), []string{b.Dir()}, s.db.Blocks())
	if whole {
		s.queryMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("rewrite block %s: %w", b.Meta().ULID, err)
	}
	if err := s.loadBlocks(ctx); err != nil {
		return fmt.Errorf("reload blocks after rewriting %s: %w", b.Meta().ULID, err)
	}
	return nil
}

// logPass writes the one line of a cleanup pass and the summary of the
// TSDB's block records it caused.
func (s *Store) logPass(ids []string, st passStats, start time.Time) {
	s.blockLog.flush()
	s.logger.Info("removed deleted jobs", "jobs", len(ids), "blocks_rewritten", st.rewritten,
		"blocks", st.blocks, "duration", time.Since(start))
}

// onlyMatching reports whether every series of b matches m.
func onlyMatching(ctx context.Context, b *ptsdb.Block, m *labels.Matcher) (bool, error) {
	ir, err := b.Index()
	if err != nil {
		return false, fmt.Errorf("open index of block %s: %w", b.Meta().ULID, err)
	}
	defer ir.Close()
	name, value := index.AllPostingsKey()
	all, err := ir.Postings(ctx, name, value)
	if err != nil {
		return false, fmt.Errorf("read postings of block %s: %w", b.Meta().ULID, err)
	}
	matching, err := ptsdb.PostingsForMatchers(ctx, ir, m)
	if err != nil {
		return false, fmt.Errorf("read postings of block %s: %w", b.Meta().ULID, err)
	}
	for all.Next() {
		if !matching.Next() || matching.At() != all.At() {
			return false, nil
		}
	}
	return all.Err() == nil && matching.Err() == nil, errors.Join(all.Err(), matching.Err())
}
