package tsdb

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// Retention drops exactly the jobs whose newest sample, task or event is
// older than the clock minus Retention, whatever timestamps other jobs
// carry.
func TestRetentionByJobAgainstClock(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var nowMs atomic.Int64
	nowMs.Store(t0.UnixMilli())
	clock := func() time.Time { return time.UnixMilli(nowMs.Load()) }
	const day = 24 * time.Hour
	dir := t.TempDir()
	s, err := Open(dir, Options{Retention: day, Now: clock}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()

	hour := int64(time.Hour / time.Millisecond)
	base := t0.UnixMilli()
	// exampleBatch's newest time is its last event, at start + 6000.
	fx := map[string]*Batch{
		"old":    exampleBatch("old", base-20*hour),
		"edge":   exampleBatch("edge", base-10*hour),
		"one":    exampleBatch("one", base-20*hour),
		"future": exampleBatch("future", base-20*hour),
	}
	for _, id := range []string{"old", "edge", "one", "future"} {
		if _, err := s.Append(ctx, fx[id]); err != nil {
			t.Fatal(err)
		}
	}
	// One recent sample keeps "one".
	oneRecent := base - hour
	if _, err := s.Append(ctx, &Batch{JobID: "one", Series: []SeriesData{{Resource: "cpu", Counter: 9, UUID: "uuid-say hello",
		Task: "say hello", Ts: []int64{oneRecent}, Vs: []float64{5}}}}); err != nil {
		t.Fatal(err)
	}
	// A sample five days ahead (five retentions), written past the
	// store's admission as a store of an older version may hold it. Not
	// years: Prometheus compacts a head in steps of two hours.
	app := s.db.Appender(ctx)
	far := base + 5*int64(day/time.Millisecond)
	if _, err := app.Append(0, labels.FromStrings(labels.MetricName, MetricCPU, LabelJob, "future", LabelCounter, "3",
		LabelTaskUUID, "uuid-burn some cpu", LabelTask, "burn some cpu"), far, 1); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	step := func(at int64, wantDeleted, wantLeft []string) {
		t.Helper()
		nowMs.Store(at)
		got, err := s.applyRetention(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, wantDeleted) {
			t.Fatalf("retention at %v deleted %v, want %v", time.UnixMilli(at).UTC(), got, wantDeleted)
		}
		if err := s.WaitDeletes(ctx); err != nil {
			t.Fatal(err)
		}
		ids, err := s.JobIDs(ctx)
		if err != nil || !slices.Equal(ids, wantLeft) {
			t.Fatalf("jobs left at %v = %v, %v, want %v", time.UnixMilli(at).UTC(), ids, err, wantLeft)
		}
		for _, id := range wantDeleted {
			if n := rawStoreSamples(t, s, id); n != 0 {
				t.Fatalf("%s: %d samples left after retention", id, n)
			}
		}
	}
	d := int64(day / time.Millisecond)
	edgeNewest := base - 10*hour + 6000
	step(base, nil, []string{"edge", "future", "old", "one"})
	// The limit lands exactly on edge's newest event: it stays.
	step(edgeNewest+d, []string{"old"}, []string{"edge", "future", "one"})
	step(edgeNewest+d+1, []string{"edge"}, []string{"future", "one"})
	step(oneRecent+d, nil, []string{"future", "one"})
	step(oneRecent+d+1, []string{"one"}, []string{"future"})
	// The far-future sample keeps its own job and nothing else; a reopen
	// (Prometheus's block retention is off) changes nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{Retention: day, Now: clock}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(readSamples(t, s, "future")); got != 73 {
		t.Fatalf("future after reopen: %d samples, want 72 + 1", got)
	}
}

func TestRetentionInterval(t *testing.T) {
	f := func(retention, want time.Duration) {
		t.Helper()
		if got := retentionInterval(retention); got != want {
			t.Fatalf("retentionInterval(%v) = %v, want %v", retention, got, want)
		}
	}
	f(30*24*time.Hour, time.Hour)
	f(5*time.Hour, 30*time.Minute)
	f(5*time.Second, time.Second)
}
