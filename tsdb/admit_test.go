package tsdb

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

var testNow = time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)

func openAt(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	opts.Now = func() time.Time { return testNow }
	s, err := Open(dir, opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Every time of a batch must lie in [2000-01-01, now + skew] (and, with
// a retention, after now - retention); a refused batch stores nothing
// and says what unit the number looks like.
func TestAdmissionWindow(t *testing.T) {
	ctx := context.Background()
	start := testNow.Add(-time.Hour).UnixMilli()
	nowMs := testNow.UnixMilli()
	plain := openAt(t, t.TempDir(), Options{})
	kept := openAt(t, t.TempDir(), Options{Retention: 24 * time.Hour})
	f := func(s *Store, mutate func(b *Batch), want string) {
		t.Helper()
		b := exampleBatch("w", start)
		mutate(b)
		_, err := s.Append(ctx, b)
		var ref *Refusal
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &ref) || err.Error() != "invalid batch: "+want {
			t.Fatalf("append = %v, want ErrInvalid: %s", err, want)
		}
		if _, err := s.ReadJob(ctx, "w", minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("a refused batch stored something: %v", err)
		}
	}
	f(plain, func(b *Batch) { b.Series[2].Ts[7] = 1796010000000000 }, "series[2].t[7]: 1796010000000000 looks like microseconds; send unix milliseconds")
	f(plain, func(b *Batch) { b.Series[4].Ts[7] = 1796010000000000000 }, "series[4].t[7]: 1796010000000000000 looks like nanoseconds; send unix milliseconds")
	f(plain, func(b *Batch) { b.Tasks[1].StartMs = 1796010000 }, "tasks[1].start: 1796010000 looks like seconds; send unix milliseconds")
	f(plain, func(b *Batch) { b.Series[0].Ts[7] = 300_000_000_000_000 }, "series[0].t[7]: 300000000000000 is past the year 9999 as unix milliseconds; send unix milliseconds")
	f(plain, func(b *Batch) { b.LastEvent.TimeMs = nowMs + 10*60_000 + 1 },
		"last_event.time: 1796051400001 (2026-11-30T15:10:00.001Z) is more than --max-future-skew 10m0s ahead of the server's clock (2026-11-30T15:00:00Z)")
	f(plain, func(b *Batch) { b.Series[0].Ts[0] = 946684799999 }, "series[0].t[0]: 946684799999 is before 2000-01-01T00:00:00Z; send unix milliseconds")
	f(kept, func(b *Batch) { b.Series[0].Ts[0] = nowMs - 25*3600_000 },
		"series[0].t[0]: 1795960800000 (2026-11-29T14:00:00.000Z) is older than --retention 24h0m0s allows (before 2026-11-29T15:00:00.000Z)")

	// The edges are inside.
	b := exampleBatch("edge", start)
	b.LastEvent.TimeMs = nowMs + 10*60_000
	b.Series[0].Ts[0] = nowMs - 24*3600_000
	if res, err := kept.Append(ctx, b); err != nil || res.Samples != 72 {
		t.Fatalf("append at the edges = %+v, %v", res, err)
	}
	if res, err := plain.Append(ctx, exampleBatch("2000", earliestMs)); err != nil || res.Samples != 72 {
		t.Fatalf("append at 2000-01-01 = %+v, %v", res, err)
	}
}

// A batch in microseconds once moved the head past every later append
// ("too old sample", for good); now it is refused and the store keeps
// taking batches, also after a restart.
func TestMicrosecondBatchLeavesStoreWritable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	start := testNow.Add(-time.Hour).UnixMilli()
	micro := &Batch{JobID: "µ", Series: []SeriesData{{Resource: "cpu", Counter: 1, UUID: "u", Task: "t", Ts: []int64{1796010000000000}, Vs: []float64{1}}}}
	if _, err := s.Append(ctx, micro); !errors.Is(err, ErrInvalid) {
		t.Fatalf("append of microseconds = %v, want ErrInvalid", err)
	}
	for round, id := range []string{"a", "b"} {
		if res, err := s.Append(ctx, exampleBatch(id, start)); err != nil || res.Samples != 72 {
			t.Fatalf("round %d: append after the refusal = %+v, %v", round, res, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openAt(t, dir, Options{})
	}
}

// A refusal of the Prometheus head is the client's mistake (ErrInvalid,
// with the reason), never a fault of the store.
func TestStorageRefusal(t *testing.T) {
	f := func(err error, reason string) {
		t.Helper()
		got := storageRefusal("series[1].t[2]", errors.Join(errors.New("append sample"), err))
		var ref *Refusal
		if !errors.Is(got, ErrInvalid) || !errors.As(got, &ref) || ref.Reason != reason {
			t.Fatalf("storageRefusal(%v) = %v, want a Refusal for %s", err, got, reason)
		}
	}
	f(storage.ErrOutOfOrderSample, ReasonOutOfOrder)
	f(storage.ErrOutOfBounds, ReasonOutOfBounds)
	f(storage.ErrTooOldSample, ReasonTooOld)
	f(storage.ErrDuplicateSampleForTimestamp, ReasonDuplicate)
	other := errors.New("disk full")
	if got := storageRefusal("x", other); got != other {
		t.Fatalf("storageRefusal(disk full) = %v, want it unchanged", got)
	}
}

// Non-finite values written to a Peakline series before writes refused
// them are skipped on read: summaries and peaks stay finite and the
// summary encodes as JSON.
func TestNonFiniteOnDiskSkipped(t *testing.T) {
	s := openAt(t, t.TempDir(), Options{})
	ctx := context.Background()
	start := testNow.Add(-time.Hour).UnixMilli()
	if _, err := s.Append(ctx, exampleBatch("inf", start)); err != nil {
		t.Fatal(err)
	}
	sb := labels.NewScratchBuilder(5)
	app := s.db.Appender(ctx)
	cpu := taskLabels(&sb, MetricCPU, "inf", 9, "uuid-say hello", "say hello")
	for i, v := range []float64{math.Inf(1), math.NaN(), math.Inf(-1), math.Float64frombits(value.StaleNaN)} {
		if _, err := app.Append(0, cpu, start+5000+int64(i), v); err != nil {
			t.Fatal(err)
		}
	}
	start2 := taskLabels(&sb, MetricTaskStart, "inf", 15, "u15", "nan start")
	if _, err := app.Append(0, start2, start+1, math.NaN()); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	sum, err := s.Summary(ctx, "inf")
	if err != nil {
		t.Fatal(err)
	}
	if r := sum.Resources[0]; r.Samples != 24 || r.Peak != 307 || r.PeakMs != start+4000+10+7*250 {
		t.Fatalf("cpu summary = %+v, want 24 samples, peak 307 at %d", r, start+4000+10+7*250)
	}
	if sum.Tasks != 3 {
		t.Fatalf("tasks = %d, want 3 (a task whose only record is NaN has no start)", sum.Tasks)
	}
	if _, err := json.Marshal(sum); err != nil {
		t.Fatalf("summary does not encode: %v", err)
	}
}
