package tsdb

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// Span is the time range one job shows, in unix ms: from its first to
// its last stored sample of any of its series (task starts, the last
// event, resource samples). It equals the FirstMs and LastMs of the job's
// Summary, without reading the samples.
type Span struct {
	ID      string
	FirstMs int64
	LastMs  int64
}

// spanPassAt is the number of uncached spans from which Spans reads the
// chunk bounds of every series in one pass rather than job by job.
const spanPassAt = 64

// Spans returns the span of every stored job, in JobIDs order. It reads
// only chunk bounds (each chunk's min and max time, no samples), so
// listing jobs newest first costs the index and chunk references, not
// the samples, when nothing is cached. Spans are cached until their job
// is written or deleted. Safe for concurrent use.
func (s *Store) Spans(ctx context.Context) ([]Span, error) {
	ids, err := s.JobIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Span, 0, len(ids))
	var missing []int // indices into out
	for _, id := range ids {
		sp, ok := s.cache.span(id)
		if !ok {
			missing = append(missing, len(out))
			sp = Span{ID: id}
		}
		out = append(out, sp)
	}
	switch {
	case s.remote != nil && len(missing) > 0:
		gen := s.cache.generation()
		want := make([]string, len(missing))
		for k, i := range missing {
			want[k] = ids[i]
		}
		all, err := s.remoteSpans(ctx, want) // remote.go
		if err != nil {
			return nil, err
		}
		// A job whose name the engine lists but whose samples it does
		// not show (deleted series an engine still names, or samples it
		// has not made searchable yet) is not listed, and not cached: it
		// shows once its samples do.
		gone := map[int]bool{}
		for _, i := range missing {
			sp, ok := all[out[i].ID]
			if !ok || (sp.FirstMs == 0 && sp.LastMs == 0) {
				gone[i] = true
				continue
			}
			out[i] = sp
			out[i].ID = ids[i]
			s.cache.putSpan(out[i], gen)
		}
		if len(gone) > 0 {
			kept := out[:0]
			for i, sp := range out {
				if !gone[i] {
					kept = append(kept, sp)
				}
			}
			out = kept
		}
	case len(missing) >= spanPassAt:
		gen := s.cache.generation()
		all, err := s.readSpans(ctx, labels.MustNewMatcher(labels.MatchRegexp, LabelJob, ".+"))
		if err != nil {
			return nil, err
		}
		for _, i := range missing {
			out[i] = all[out[i].ID]
			out[i].ID = ids[i]
			s.cache.putSpan(out[i], gen)
		}
	default:
		for _, i := range missing {
			gen := s.cache.generation()
			one, err := s.readSpans(ctx, labels.MustNewMatcher(labels.MatchEqual, LabelJob, ids[i]))
			if err != nil {
				return nil, err
			}
			out[i] = one[ids[i]]
			out[i].ID = ids[i]
			s.cache.putSpan(out[i], gen)
		}
	}
	return out, nil
}

// readSpans reads the spans of the jobs of the series m selects from
// their chunk bounds. The ids are copied: they outlive the querier.
func (s *Store) readSpans(ctx context.Context, m *labels.Matcher) (map[string]Span, error) {
	q, err := s.chunkQuerier(minTime, maxTime)
	if err != nil {
		return nil, fmt.Errorf("open chunk querier: %w", err)
	}
	defer q.Close()
	out := map[string]Span{}
	set := q.Select(ctx, false, &storage.SelectHints{Start: minTime, End: maxTime}, m)
	var it chunks.Iterator
	for set.Next() {
		series := set.At()
		id := series.Labels().Get(LabelJob)
		sp, ok := out[id]
		if !ok {
			sp = Span{FirstMs: math.MaxInt64, LastMs: math.MinInt64}
		}
		it = series.Iterator(it)
		for it.Next() {
			meta := it.At()
			sp.FirstMs = min(sp.FirstMs, meta.MinTime)
			sp.LastMs = max(sp.LastMs, meta.MaxTime)
		}
		if err := it.Err(); err != nil {
			// A damaged chunk must not hide every other job: the span
			// keeps the bounds read so far, and reading the job itself
			// reports the damage.
			s.logger.Warn("read chunk bounds of a job", "job", id, "err", err)
		}
		if !ok {
			id = strings.Clone(id)
		}
		out[id] = sp
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("read job spans: %w", err)
	}
	for id, sp := range out {
		if sp.FirstMs > sp.LastMs { // series without chunks
			out[id] = Span{}
		}
	}
	return out, nil
}

// generation is the token for putSpan of a span read after this call.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

func (c *cache) span(id string) (Span, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(id)
	sp, ok := c.spans[id]
	return sp, ok
}

// putSpan caches sp unless its job was written or deleted since the
// token gen was handed out.
func (c *cache) putSpan(sp Span, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fresh(sp.ID, gen) {
		return
	}
	if c.spans == nil {
		c.spans = map[string]Span{}
	}
	c.spans[sp.ID] = sp
	c.stamp(sp.ID)
}
