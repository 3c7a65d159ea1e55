package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// referenceReadJob is what readJob must return, in the plainest form:
// every finite float sample of every series through the sample querier,
// tasks gathered as the package doc of ReadJob says, and each resource's
// samples sorted by time, keeping of samples sharing a millisecond the
// one of the later task, then of the series whose labels sort last, then
// the last read.
func referenceReadJob(ctx context.Context, q storage.Querier, jobID string) (*Job, error) {
	type sample struct {
		t    int64
		v    float64
		key  taskKey
		ls   labels.Labels
		seq  int
		task int32
	}
	type acc struct {
		task                 Task
		recorded             bool
		firstSample, lastMax int64
	}
	job := &Job{ID: jobID}
	tasks := map[taskKey]*acc{}
	get := func(k taskKey, name string) *acc {
		if tasks[k] == nil {
			tasks[k] = &acc{task: Task{Counter: k.counter, UUID: strings.Clone(k.uuid), Name: strings.Clone(name)}, firstSample: math.MaxInt64, lastMax: math.MinInt64}
		}
		return tasks[k]
	}
	samples := make([][]sample, len(Resources))
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, jobID))
	found, seq := false, 0
	for set.Next() {
		found = true
		ls := set.At().Labels()
		metric := ls.Get(labels.MetricName)
		ri := metricIndex(metric)
		if ri < 0 && metric != MetricTaskStart && metric != MetricLastEvent {
			continue
		}
		var key taskKey
		if metric != MetricLastEvent {
			var err error
			if key, err = keyOf(ls); err != nil {
				return nil, err
			}
		}
		var a *acc
		if ri >= 0 {
			a = get(key, ls.Get(LabelTask))
		}
		it := set.At().Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue
			}
			t, v := it.At()
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			switch {
			case metric == MetricLastEvent:
				if job.LastEvent == nil || t >= job.LastEvent.TimeMs {
					job.LastEvent = &Event{Counter: int64(v), TimeMs: t}
				}
			case metric == MetricTaskStart:
				if ta := get(key, ls.Get(LabelTask)); !ta.recorded || t < ta.task.StartMs {
					ta.task.StartMs, ta.recorded = t, true
				}
			default:
				samples[ri] = append(samples[ri], sample{t: t, v: v, key: key, ls: ls, seq: seq})
				seq++
				a.firstSample, a.lastMax = min(a.firstSample, t), max(a.lastMax, t)
			}
			if metric == MetricTaskStart {
				break
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	if err := set.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrJobNotFound
	}
	var list []*acc
	for _, a := range tasks {
		if !a.recorded {
			a.task.StartMs = a.firstSample
		}
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *acc) int {
		return cmp.Or(cmp.Compare(a.task.StartMs, b.task.StartMs), cmp.Compare(a.task.Counter, b.task.Counter), cmp.Compare(a.task.UUID, b.task.UUID))
	})
	index := map[taskKey]int32{}
	for i, a := range list {
		index[taskKey{a.task.Counter, a.task.UUID}] = int32(i)
		end := a.lastMax
		if i+1 < len(list) {
			end = list[i+1].task.StartMs
		} else {
			if job.LastEvent != nil {
				end = max(end, job.LastEvent.TimeMs)
			}
			end = max(end, a.task.StartMs)
		}
		a.task.EndMs = end
		job.Tasks = append(job.Tasks, a.task)
	}
	for ri, ss := range samples {
		for i := range ss {
			ss[i].task = index[ss[i].key]
		}
		slices.SortFunc(ss, func(a, b sample) int {
			return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.task, b.task), labels.Compare(a.ls, b.ls), cmp.Compare(a.seq, b.seq))
		})
		var c Column
		for _, s := range ss {
			if n := len(c.Ts); n > 0 && c.Ts[n-1] == s.t {
				c.Vs[n-1], c.Task[n-1] = s.v, s.task
				continue
			}
			c.Ts, c.Vs, c.Task = append(c.Ts, s.t), append(c.Vs, s.v), append(c.Task, s.task)
		}
		if len(c.Ts) > 0 {
			c.Resource = Resources[ri]
			job.Columns = append(job.Columns, c)
		}
	}
	return job, nil
}

// randomJob writes a job of overlapping tasks to s in several rounds: the
// first compacted into blocks, the later ones (earlier, later and equal
// times, out of order) partly compacted, partly left in the head. Some
// series are written raw, with an extra label (a second series of the
// same task and resource, on the same milliseconds), with NaN, infinite
// and stale values, or without a task record.
func randomJob(t *testing.T, s *Store, rng *rand.Rand, id string, baseMs int64) {
	t.Helper()
	ctx := context.Background()
	nTasks := 1 + rng.IntN(6)
	type task struct {
		Task
		spanMs int64
	}
	var tasks []task
	at := baseMs
	for i := range nTasks {
		tk := task{Task: Task{Counter: int64(3 + 2*i), UUID: fmt.Sprintf("u-%d", i), Name: fmt.Sprintf("task %d", i), StartMs: at}, spanMs: 200 + rng.Int64N(2000)}
		if rng.IntN(8) == 0 {
			tk.Counter = 0 // no events: told apart by uuid
		}
		tasks = append(tasks, tk)
		at += tk.spanMs - rng.Int64N(300) // the next may start before this one's samples end
	}
	// times draws sorted, distinct times on a 10 ms grid, so that series
	// of different tasks meet on the same milliseconds.
	times := func(tk task, n int) []int64 {
		seen := map[int64]bool{}
		var ts []int64
		for range n {
			t := tk.StartMs - 200 + 10*rng.Int64N((tk.spanMs+400)/10)
			if !seen[t] {
				seen[t] = true
				ts = append(ts, t)
			}
		}
		slices.Sort(ts)
		return ts
	}
	rounds := 1 + rng.IntN(3)
	for round := range rounds {
		b := &Batch{JobID: id}
		if round == rounds-1 {
			b.LastEvent = &Event{Counter: int64(3 + 2*nTasks), TimeMs: at + rng.Int64N(500)}
		}
		for _, tk := range tasks {
			if round == 0 && rng.IntN(5) != 0 {
				b.Tasks = append(b.Tasks, tk.Task)
			}
			for _, res := range Resources {
				if rng.IntN(4) == 0 {
					continue
				}
				ts := times(tk, rng.IntN(40))
				vs := make([]float64, len(ts))
				for i := range vs {
					vs[i] = float64(rng.IntN(1000)) / 8
				}
				b.Series = append(b.Series, SeriesData{Resource: res.Name, Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name, Ts: ts, Vs: vs})
			}
		}
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		// Raw series: an extra label, and values the store's write path
		// refuses.
		app := s.Appendable().Appender(ctx)
		var sb labels.ScratchBuilder
		for _, tk := range tasks {
			if rng.IntN(3) != 0 {
				continue
			}
			res := Resources[rng.IntN(len(Resources))]
			// A new series each round: one series never gets two values
			// at one millisecond.
			lb := labels.NewBuilder(taskLabels(&sb, res.Metric, id, tk.Counter, tk.UUID, tk.Name))
			lb.Set("instance", fmt.Sprintf("node-%d-%d", round, rng.IntN(2)))
			ls := lb.Labels()
			for _, ts := range times(tk, rng.IntN(30)) {
				v := float64(rng.IntN(1000)) / 4
				switch rng.IntN(12) {
				case 0:
					v = math.NaN()
				case 1:
					v = math.Inf(1)
				case 2:
					v = math.Float64frombits(value.StaleNaN)
				}
				if _, err := app.Append(0, ls, ts, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		if round < rounds-1 || rng.IntN(2) == 0 {
			if err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// twistedQuerier hands out the chunks of q altered as mode says, as
// another backend might: "undercount" chunks that say they hold fewer
// samples than they do, "overcount" more, "reversed" a series' chunks in
// reverse time order.
type twistedQuerier struct {
	storage.ChunkQuerier
	mode string
}

func (q twistedQuerier) Select(ctx context.Context, sorted bool, h *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	return twistedSet{q.ChunkQuerier.Select(ctx, sorted, h, ms...), q.mode}
}

type twistedSet struct {
	storage.ChunkSeriesSet
	mode string
}

func (s twistedSet) At() storage.ChunkSeries { return twistedSeries{s.ChunkSeriesSet.At(), s.mode} }

type twistedSeries struct {
	storage.ChunkSeries
	mode string
}

func (s twistedSeries) Iterator(chunks.Iterator) chunks.Iterator {
	var metas []chunks.Meta
	it := s.ChunkSeries.Iterator(nil)
	for it.Next() {
		m := it.At()
		switch s.mode {
		case "undercount":
			m.Chunk = countedChunk{m.Chunk, m.Chunk.NumSamples() / 2}
		case "overcount":
			m.Chunk = countedChunk{m.Chunk, m.Chunk.NumSamples() + 3}
		case "broken":
			m.Chunk = brokenChunk{m.Chunk}
		case "unloaded":
			m.Chunk = nil
		}
		metas = append(metas, m)
	}
	if s.mode == "reversed" {
		slices.Reverse(metas)
	}
	return storage.NewListChunkSeriesIterator(metas...)
}

// countedChunk is a chunk that says it holds n samples.
type countedChunk struct {
	chunkenc.Chunk
	n int
}

func (c countedChunk) NumSamples() int { return c.n }

// brokenChunk is a chunk whose bytes fail to decode.
type brokenChunk struct{ chunkenc.Chunk }

func (brokenChunk) Iterator(chunkenc.Iterator) chunkenc.Iterator { return brokenIterator{} }

type brokenIterator struct{ chunkenc.Iterator }

var errBroken = errors.New("corrupt chunk")

func (brokenIterator) Next() chunkenc.ValueType { return chunkenc.ValNone }
func (brokenIterator) Err() error               { return errBroken }

// TestReadJobFromFailsOnBadChunks checks that a chunk that fails to decode
// or was never loaded fails the read, naming the series, instead of
// reading as a job without those samples.
func TestReadJobFromFailsOnBadChunks(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	start := time.Date(2026, 11, 30, 3, 39, 35, 0, time.UTC).UnixMilli()
	if _, err := s.Append(ctx, exampleBatch("42", start)); err != nil {
		t.Fatal(err)
	}
	// A job of task records and its last event only: their series are
	// read apart from the sample series.
	records := exampleBatch("records", start)
	records.Series = nil
	if _, err := s.Append(ctx, records); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"42", "records"} {
		for mode, want := range map[string]string{"broken": "corrupt chunk", "unloaded": "not loaded by the querier"} {
			cq, err := s.chunkQuerier(minTime, maxTime)
			if err != nil {
				t.Fatal(err)
			}
			job, err := readJobFrom(ctx, twistedQuerier{cq, mode}, id)
			cq.Close()
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("job_id=%q", id)) {
				t.Fatalf("job %s, %s: readJobFrom = %v, %v; want an error naming the series and %q", id, mode, job, err, want)
			}
		}
	}
}

// TestReadJobMatchesReference compares readJob with referenceReadJob on
// random jobs of overlapping, out-of-order and duplicate samples spread
// over blocks and the head, through the TSDB's own chunk querier and
// through ones whose chunks lie about their size or come out of order.
func TestReadJobMatchesReference(t *testing.T) {
	ctx := context.Background()
	baseMs := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).UnixMilli()
	seeds := 24
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			s, err := Open(t.TempDir(), Options{CacheSamples: -1, Now: func() time.Time { return time.UnixMilli(baseMs).Add(time.Hour) }}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ids := []string{"a", "b"}
			for i, id := range ids {
				randomJob(t, s, rng, id, baseMs+int64(i)*500)
			}
			sq, err := s.querier(minTime, maxTime)
			if err != nil {
				t.Fatal(err)
			}
			defer sq.Close()
			for _, id := range ids {
				want, err := referenceReadJob(ctx, sq, id)
				if err != nil {
					t.Fatal(err)
				}
				checkJobInvariants(t, want)
				got, err := s.readJob(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				compareJobs(t, "readJob", got, want)
				for _, mode := range []string{"undercount", "overcount", "reversed"} {
					cq, err := s.chunkQuerier(minTime, maxTime)
					if err != nil {
						t.Fatal(err)
					}
					got, err := readJobFrom(ctx, twistedQuerier{cq, mode}, id)
					cq.Close()
					if err != nil {
						t.Fatal(err)
					}
					compareJobs(t, mode, got, want)
				}
			}
		})
	}
}

// checkJobInvariants checks what every read job holds, whatever its data.
func checkJobInvariants(t *testing.T, job *Job) {
	t.Helper()
	for _, c := range job.Columns {
		if len(c.Ts) != len(c.Vs) || len(c.Ts) != len(c.Task) {
			t.Fatalf("%s: %d times, %d values, %d tasks", c.Resource.Name, len(c.Ts), len(c.Vs), len(c.Task))
		}
		for i := range c.Ts {
			if i > 0 && c.Ts[i] <= c.Ts[i-1] {
				t.Fatalf("%s: time %d at %d after %d", c.Resource.Name, c.Ts[i], i, c.Ts[i-1])
			}
			if c.Task[i] < 0 || int(c.Task[i]) >= len(job.Tasks) {
				t.Fatalf("%s: task %d of %d", c.Resource.Name, c.Task[i], len(job.Tasks))
			}
		}
	}
}

// compareJobs fails unless got and want are equal: tasks, last event,
// columns, and the per-task sample count, max and mean of every resource.
func compareJobs(t *testing.T, name string, got, want *Job) {
	t.Helper()
	if !reflect.DeepEqual(got.Tasks, want.Tasks) {
		t.Fatalf("%s: tasks\n got %+v\nwant %+v", name, got.Tasks, want.Tasks)
	}
	if !reflect.DeepEqual(got.LastEvent, want.LastEvent) {
		t.Fatalf("%s: last event %+v, want %+v", name, got.LastEvent, want.LastEvent)
	}
	if len(got.Columns) != len(want.Columns) {
		t.Fatalf("%s: %d columns, want %d", name, len(got.Columns), len(want.Columns))
	}
	for i, g := range got.Columns {
		w := want.Columns[i]
		if g.Resource != w.Resource || len(g.Ts) != len(w.Ts) || len(g.Vs) != len(w.Vs) || len(g.Task) != len(w.Task) {
			t.Fatalf("%s: column %s of %d/%d/%d samples, want %s of %d", name, g.Resource.Name, len(g.Ts), len(g.Vs), len(g.Task), w.Resource.Name, len(w.Ts))
		}
		for k := range w.Ts {
			// Values compare bit for bit: NaNs never get here.
			if g.Ts[k] != w.Ts[k] || g.Vs[k] != w.Vs[k] || g.Task[k] != w.Task[k] {
				t.Fatalf("%s: %s sample %d is (t %d, v %v, task %d), want (t %d, v %v, task %d)", name, w.Resource.Name, k, g.Ts[k], g.Vs[k], g.Task[k], w.Ts[k], w.Vs[k], w.Task[k])
			}
		}
		if gs, ws := taskStats(g, len(got.Tasks)), taskStats(w, len(want.Tasks)); !reflect.DeepEqual(gs, ws) {
			t.Fatalf("%s: %s per-task stats %v, want %v", name, w.Resource.Name, gs, ws)
		}
	}
	if !reflect.DeepEqual(Summarize(got), Summarize(want)) {
		t.Fatalf("%s: summary %+v, want %+v", name, Summarize(got), Summarize(want))
	}
}

// taskStats is each task's sample count, max and mean in a column.
func taskStats(c Column, tasks int) [][3]float64 {
	out := make([][3]float64, tasks)
	for i := range out {
		out[i][1] = math.Inf(-1)
	}
	for i, v := range c.Vs {
		s := &out[c.Task[i]]
		s[0]++
		s[1] = max(s[1], v)
		s[2] += v
	}
	for i := range out {
		if out[i][0] > 0 {
			out[i][2] /= out[i][0]
		}
	}
	return out
}
