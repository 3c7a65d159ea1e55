package tsdb

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// seriesRun is one sample series of a job while the job is read: its
// chunks, the slot of the resource's column its samples are decoded into,
// and what decoding found.
type seriesRun struct {
	task   *taskAcc
	labels labels.Labels // orders runs of one task (see rank); valid while the querier is open
	chunks []chunks.Meta
	minMs  int64 // MinTime of the first chunk: where the slot goes
	size   int   // samples the chunks say they hold: the slot's length

	// Set by placeRuns: the slot, columns' [off, off+size).
	off     int
	dstTs   []int64
	dstVs   []float64
	colTs   []int64 // the whole column the slot is part of
	colVs   []float64
	taskIdx int32 // index in Job.Tasks, set once tasks are ordered
	rank    int   // order among the runs of its resource (see finishColumn)

	// Set by decode.
	n               int // finite float samples written to the slot (<= size)
	extraTs         []int64
	extraVs         []float64 // samples past the slot: a chunk held more than it said
	firstMs, lastMs int64     // earliest and latest sample time; maxTime, minTime for none
	ordered         bool      // times strictly increase
	err             error
}

// collect takes the series' chunks and their sample counts. Chunks handed
// out by a chunk querier stay valid until it is closed.
func (r *seriesRun) collect(cs storage.ChunkSeries) error {
	it := cs.Iterator(nil)
	for it.Next() {
		m := it.At()
		if m.Chunk == nil {
			return fmt.Errorf("chunk %d of %d-%d not loaded by the querier", m.Ref, m.MinTime, m.MaxTime)
		}
		if len(r.chunks) == 0 {
			r.minMs = m.MinTime
		}
		r.chunks = append(r.chunks, m)
		r.size += m.Chunk.NumSamples()
	}
	return it.Err()
}

// placeRuns sorts the runs of one resource by their first chunk's time
// and gives each its slot in a column sized for all of their samples.
func placeRuns(runs []*seriesRun) Column {
	slices.SortStableFunc(runs, func(a, b *seriesRun) int { return cmp.Compare(a.minMs, b.minMs) })
	total := 0
	for _, r := range runs {
		total += r.size
	}
	c := Column{Ts: make([]int64, total), Vs: make([]float64, total)}
	off := 0
	for _, r := range runs {
		r.off = off
		r.dstTs, r.dstVs = c.Ts[off:off+r.size:off+r.size], c.Vs[off:off+r.size:off+r.size]
		r.colTs, r.colVs = c.Ts, c.Vs
		off += r.size
	}
	return c
}

// decodeRuns decodes every run into its slot, the largest first, on up to
// GOMAXPROCS goroutines: each run writes only its own slot.
func decodeRuns(ctx context.Context, runs []*seriesRun) error {
	order := slices.Clone(runs)
	slices.SortStableFunc(order, func(a, b *seriesRun) int { return cmp.Compare(b.size, a.size) })
	var next atomic.Int64
	work := func() {
		var it chunkenc.Iterator
		for {
			i := int(next.Add(1)) - 1
			if i >= len(order) || ctx.Err() != nil {
				return
			}
			it = order[i].decode(it)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(order))
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("read %s: %w", r.labels, r.err)
		}
	}
	return nil
}

// decode writes the run's finite float samples to its slot, in the order
// its chunks hold them, and returns it for reuse.
func (r *seriesRun) decode(it chunkenc.Iterator) chunkenc.Iterator {
	dstTs, dstVs := r.dstTs, r.dstVs
	n := 0
	first, last, prev := int64(maxTime), int64(minTime), int64(minTime)
	ordered := true
	for _, m := range r.chunks {
		if xc, ok := m.Chunk.(*chunkenc.XORChunk); ok && n+xorSamples(xc.Bytes()) <= len(dstTs) {
			// Decoded straight into the slot, then compacted in place
			// past non-finite values.
			k, err := decodeXOR(xc.Bytes(), dstTs[n:], dstVs[n:])
			if err != nil {
				r.err = err
				break
			}
			w := n
			for j := n; j < n+k; j++ {
				t, v := dstTs[j], dstVs[j]
				if !finite(v) {
					continue
				}
				if w > 0 && t <= prev {
					ordered = false
				}
				prev = t
				first, last = min(first, t), max(last, t)
				dstTs[w], dstVs[w] = t, v
				w++
			}
			n = w
			continue
		}
		it = m.Chunk.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			t, v := it.At()
			if !finite(v) {
				continue // written before remote write refused them
			}
			if n > 0 && t <= prev {
				ordered = false
			}
			prev = t
			first, last = min(first, t), max(last, t)
			if n < len(dstTs) {
				dstTs[n], dstVs[n] = t, v
			} else {
				r.extraTs = append(r.extraTs, t)
				r.extraVs = append(r.extraVs, v)
			}
			n++
		}
		if err := it.Err(); err != nil {
			r.err = err
			break
		}
	}
	r.n = min(n, len(dstTs))
	r.firstMs, r.lastMs, r.ordered = first, last, ordered
	return it
}

// finishColumn turns the decoded slots of one resource into its column:
// times strictly increasing, each sample with its task. Where several
// runs hold a sample at the same millisecond, the one of the later task
// (in Job.Tasks order) is kept, and between runs of one task the one
// whose labels sort last; within one run, the last.
//
// In the common case the slots are already in time order and nothing
// moves: a run is copied only to close the gap a shorter run left (NaNs
// skipped), and only runs overlapping in time are merged. Runs out of
// time order or longer than their chunks said are merged as a whole.
func finishColumn(c Column, runs []*seriesRun) Column {
	// Rank the runs for the tie rule.
	byRank := slices.Clone(runs)
	slices.SortFunc(byRank, func(a, b *seriesRun) int {
		return cmp.Or(cmp.Compare(a.taskIdx, b.taskIdx), labels.Compare(a.labels, b.labels))
	})
	for i, r := range byRank {
		r.rank = i
	}
	live := runs[:0:0]
	inPlace := true
	for _, r := range runs {
		if r.n == 0 && len(r.extraTs) == 0 {
			continue
		}
		if !r.ordered || len(r.extraTs) > 0 || len(live) > 0 && r.firstMs < live[len(live)-1].firstMs {
			inPlace = false
		}
		live = append(live, r)
	}
	if !inPlace {
		n := 0
		for _, r := range live {
			n += r.n + len(r.extraTs)
		}
		out := Column{Ts: make([]int64, n), Vs: make([]float64, n), Task: make([]int32, n)}
		n = mergeRuns(live, out.Ts, out.Vs, out.Task)
		return Column{Ts: out.Ts[:n], Vs: out.Vs[:n], Task: out.Task[:n]}
	}
	c.Task = make([]int32, len(c.Ts))
	w := 0
	for i := 0; i < len(live); {
		// live[i:j] is a cluster: runs overlapping in time, no later
		// run reaching back into it (starts are in order).
		j, hi := i+1, live[i].lastMs
		for j < len(live) && live[j].firstMs <= hi {
			hi = max(hi, live[j].lastMs)
			j++
		}
		if j == i+1 {
			r := live[i]
			if r.off != w {
				copy(c.Ts[w:], c.Ts[r.off:r.off+r.n])
				copy(c.Vs[w:], c.Vs[r.off:r.off+r.n])
			}
			fill(c.Task[w:w+r.n], r.taskIdx)
			w += r.n
		} else {
			w += mergeRuns(live[i:j], c.Ts[w:], c.Vs[w:], c.Task[w:])
		}
		i = j
	}
	return Column{Ts: c.Ts[:w], Vs: c.Vs[:w], Task: c.Task[:w]}
}

// mergeRuns writes the samples of runs to dst in time order under the tie
// rule of finishColumn and returns how many it wrote. It reads all of the
// runs' samples before writing, so dst may overlap their slots.
func mergeRuns(runs []*seriesRun, dstTs []int64, dstVs []float64, dstTask []int32) int {
	type sample struct {
		t    int64
		v    float64
		rank int
		task int32
	}
	var all []sample
	for _, r := range runs {
		for k := range r.n {
			all = append(all, sample{r.colTs[r.off+k], r.colVs[r.off+k], r.rank, r.taskIdx})
		}
		for k := range r.extraTs {
			all = append(all, sample{r.extraTs[k], r.extraVs[k], r.rank, r.taskIdx})
		}
	}
	// Stable: of one run's samples at one millisecond, the last stays last.
	slices.SortStableFunc(all, func(a, b sample) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.rank, b.rank)) })
	w := 0
	for _, s := range all {
		if w > 0 && dstTs[w-1] == s.t {
			w--
		}
		dstTs[w], dstVs[w], dstTask[w] = s.t, s.v, s.task
		w++
	}
	return w
}

func fill(dst []int32, v int32) {
	for i := range dst {
		dst[i] = v
	}
}
