package tsdb

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// headAppended is how many samples the head of the store behind reg has
// taken, in order and out of order (the out-of-order ones are counted in
// both counters of the head; this one is their sum): what a write
// physically stored.
func headAppended(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "prometheus_tsdb_head_samples_appended_total":
			for _, m := range mf.GetMetric() {
				n += metricValue(m)
			}
		}
	}
	return int(n)
}

func metricValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// retryStore is a store that reopens on request and counts what its
// heads took over every open.
type retryStore struct {
	t        *testing.T
	dir      string
	s        *Store
	reg      *prometheus.Registry
	appended int // by the heads closed so far
}

func openRetryStore(t *testing.T) *retryStore {
	rs := &retryStore{t: t, dir: t.TempDir()}
	rs.open()
	t.Cleanup(func() { _ = rs.s.Close() })
	return rs
}

func (rs *retryStore) open() {
	rs.reg = prometheus.NewRegistry()
	s, err := Open(rs.dir, Options{Now: func() time.Time { return testNow }}, nil, rs.reg)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.s = s
}

func (rs *retryStore) reopen() {
	rs.appended += headAppended(rs.t, rs.reg)
	if err := rs.s.Close(); err != nil {
		rs.t.Fatal(err)
	}
	rs.open()
}

func (rs *retryStore) headAppended() int { return rs.appended + headAppended(rs.t, rs.reg) }

// renamed is b with its tasks' uuids changed: series of their own.
func renamed(b *Batch, suffix string) *Batch {
	for i := range b.Tasks {
		b.Tasks[i].UUID += suffix
	}
	for i := range b.Series {
		b.Series[i].UUID += suffix
	}
	return b
}

// shifted is b with every value raised by dv: a conflict at each time.
func shifted(b *Batch, dv float64) *Batch {
	for i := range b.Series {
		for k := range b.Series[i].Vs {
			b.Series[i].Vs[k] += dv
		}
	}
	return b
}

// Whatever the order of writes, restarts, compactions and deletes, a
// retried batch is stored once and counted as duplicates, another value
// at a stored time is a conflict (the stored one kept), and the head
// takes exactly the samples each write reports as new. The newest-time
// index decides which writes read what is stored: every case here has a
// write that it must not wave through.
func TestRetriesStoredOnce(t *testing.T) {
	ctx := context.Background()
	start := testNow.Add(-time.Hour).UnixMilli()
	b := func(i int) *Batch { return exampleBatch("j", start+int64(i)*6000) }
	type step struct {
		do    string // "append", "series" (as remote write), "reopen", "compact", "delete"
		batch *Batch
		want  AppendResult
	}
	fresh := AppendResult{Samples: 72, Tasks: 4}
	dups := AppendResult{Duplicates: 72}
	for _, tc := range []struct {
		name  string
		steps []step
		// want is every sample the job holds at the end.
		want []*Batch
	}{
		{"retry of the newest batch", []step{{"append", b(0), fresh}, {"append", b(1), fresh}, {"append", b(1), dups}}, []*Batch{b(0), b(1)}},
		{"retry of an older batch", []step{{"append", b(0), fresh}, {"append", b(1), fresh}, {"append", b(0), dups}}, []*Batch{b(0), b(1)}},
		{"retry as remote write", []step{{"append", b(0), fresh}, {"series", b(0), dups}, {"series", b(1), fresh}, {"append", b(1), dups}}, []*Batch{b(0), b(1)}},
		{"another value at stored times", []step{{"append", b(0), fresh}, {"append", shifted(b(0), 0.5), AppendResult{Conflicts: 72}}}, []*Batch{b(0)}},
		// Shifted by 1 s: the last 4 samples of each series fall on stored
		// times with other values, 4 are new; tasks and last event too.
		{"overlapping the newest samples", []step{{"append", b(0), fresh}, {"append", exampleBatch("j", start+1000), AppendResult{Samples: 36, Tasks: 4, Conflicts: 36}}},
			[]*Batch{b(0), exampleBatch("j", start+1000)}},
		{"retry after a restart", []step{{"append", b(0), fresh}, {"append", b(1), fresh}, {"reopen", nil, AppendResult{}}, {"append", b(1), dups}, {"append", b(0), dups}}, []*Batch{b(0), b(1)}},
		{"retry after compaction and a restart", []step{{"append", b(0), fresh}, {"compact", nil, AppendResult{}}, {"reopen", nil, AppendResult{}}, {"append", b(0), dups}, {"append", b(1), fresh}}, []*Batch{b(0), b(1)}},
		{"new series older than the job's newest", []step{{"append", b(1), fresh}, {"append", renamed(b(0), "-x"), fresh}, {"append", renamed(b(0), "-x"), dups}}, []*Batch{b(1), renamed(b(0), "-x")}},
		{"rewrite after a delete", []step{{"append", b(0), fresh}, {"append", b(1), fresh}, {"delete", nil, AppendResult{}}, {"append", b(0), fresh}, {"append", b(0), dups}}, []*Batch{b(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := openRetryStore(t)
			reported := 0
			for i, st := range tc.steps {
				var (
					res AppendResult
					err error
				)
				switch st.do {
				case "append":
					res, err = rs.s.Append(ctx, st.batch)
				case "series":
					var wr WriteResult
					wr, err = rs.s.AppendSeries(ctx, batchSeries(st.batch))
					res = AppendResult{Samples: wr.Samples, Tasks: wr.Records, Duplicates: wr.Duplicates, Conflicts: wr.Conflicts}
				case "reopen":
					rs.reopen()
				case "compact":
					err = rs.s.Compact(ctx)
				case "delete":
					if err = rs.s.Delete(ctx, "j"); err == nil {
						err = rs.s.WaitDeletes(ctx)
					}
				}
				if err != nil || res != st.want {
					t.Fatalf("step %d (%s) = %+v, %v, want %+v", i, st.do, res, err, st.want)
				}
				reported += res.Samples + res.Tasks
			}
			if got := rs.headAppended(); got != reported {
				t.Fatalf("the head took %d samples, the writes reported %d new", got, reported)
			}
			got := readSamples(t, rs.s, "j")
			// The first value written at a time is the one kept.
			var want []sampleKey
			for _, w := range tc.want {
				for _, k := range wantSamples([]*Batch{w}) {
					if !slices.ContainsFunc(want, func(o sampleKey) bool { return cmpSample(o, k) == 0 }) {
						want = append(want, k)
					}
				}
			}
			slices.SortFunc(want, cmpSample)
			if !slices.Equal(got, want) {
				t.Fatalf("job holds %d samples, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}
}

// Writers sending the same batches at once (a sender retrying while its
// first try is still being written, two senders of one job) store each
// sample once: the head takes exactly one copy, and the writes report
// it new once and a duplicate every other time.
func TestConcurrentRetriesStoredOnce(t *testing.T) {
	ctx := context.Background()
	rs := openRetryStore(t)
	const writers, batches = 4, 30
	start := testNow.Add(-time.Hour).UnixMilli()
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		samples, dup int
		firstErr     error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				// Half the writers send remote-write series, half batches;
				// every writer also sends one other job of its own.
				var (
					res WriteResult
					err error
				)
				b := exampleBatch("shared", start+int64(i)*6000)
				if w%2 == 0 {
					res, err = rs.s.AppendSeries(ctx, append(batchSeries(b), batchSeries(exampleBatch(fmt.Sprintf("own-%d", w), start+int64(i)*6000))...))
				} else {
					var ar AppendResult
					ar, err = rs.s.Append(ctx, b)
					res = WriteResult{Samples: ar.Samples, Records: ar.Tasks, Duplicates: ar.Duplicates}
				}
				mu.Lock()
				samples += res.Samples + res.Records
				dup += res.Duplicates
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	own := writers / 2 * batches * 76
	if want := batches*76 + own; samples != want || dup != (writers-1)*batches*72 {
		t.Fatalf("writes reported %d new samples and %d duplicates, want %d and %d", samples, dup, want, (writers-1)*batches*72)
	}
	if got := rs.headAppended(); got != samples {
		t.Fatalf("the head took %d samples, the writes reported %d new", got, samples)
	}
}

// The index says a series may hold a sample at or after a time until its
// job is loaded; loading and raising only move its bounds up.
func TestNewestTimesBounds(t *testing.T) {
	jt := &jobTimes{newest: map[uint64]int64{}}
	if !jt.mayHold(1, 100) {
		t.Fatal("an unloaded job must be read")
	}
	jt.raise(1, 500) // a write committed while the job was loading
	if !jt.startLoad() || jt.startLoad() {
		t.Fatal("one write loads a job at a time")
	}
	jt.finishLoad(map[uint64]int64{1: 300, 2: 200}, true)
	f := func(h uint64, lo int64, want bool) {
		t.Helper()
		if got := jt.mayHold(h, lo); got != want {
			t.Errorf("mayHold(%d, %d) = %v, want %v", h, lo, got, want)
		}
	}
	f(1, 500, true) // the raise is kept over the older read
	f(1, 501, false)
	f(2, 200, true)
	f(2, 201, false)
	f(3, 0, false)   // a series not stored
	jt.raise(2, 100) // an older write leaves the bound
	f(2, 200, true)
	f(2, 201, false)
	jt.unload()
	f(3, 0, true)
	jt.finishLoad(nil, false) // a failed read leaves it unloaded
	f(3, 0, true)
	if !jt.startLoad() {
		t.Fatal("an unloaded job is loaded again")
	}
	jt.finishLoad(map[uint64]int64{}, true)
	f(1, 501, false) // the bounds survived the unload
	f(1, 500, true)
}
