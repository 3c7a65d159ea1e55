package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// checkSpans compares every span with the job's summary, read in full.
func checkSpans(t *testing.T, s *Store, wantJobs int) []Span {
	t.Helper()
	ctx := context.Background()
	spans, err := s.Spans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.JobIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != wantJobs || len(ids) != wantJobs {
		t.Fatalf("%d spans of %d jobs, want %d", len(spans), len(ids), wantJobs)
	}
	for i, sp := range spans {
		sum, err := s.Summary(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if sp.ID != ids[i] || sp.FirstMs != sum.FirstMs || sp.LastMs != sum.LastMs {
			t.Errorf("span %+v, want job %s from %d to %d as its summary says", sp, ids[i], sum.FirstMs, sum.LastMs)
		}
	}
	return spans
}

// Spans read from chunk bounds equal the summaries' first and last
// times, in the head and in blocks, in one pass over many jobs and job
// by job, and follow writes.
func TestSpansMatchSummaries(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).UnixMilli()
	// Few jobs: read job by job. An old job (out-of-order path), a job
	// with tasks only, one whose last event comes after its samples.
	add := func(b *Batch) {
		t.Helper()
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	add(exampleBatch("recent", now))
	add(exampleBatch("old", now-400*24*3600*1000))
	add(&Batch{JobID: "tasks-only", Tasks: []Task{{Counter: 3, UUID: "u", Name: "a", StartMs: now + 5}, {Counter: 6, UUID: "v", Name: "b", StartMs: now + 900}}})
	checkSpans(t, s, 3)

	// Into blocks, then enough jobs that one pass reads them all.
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range spanPassAt + 6 {
		add(exampleBatch(fmt.Sprintf("many-%03d", i), now+int64(i)*60_000))
	}
	s.cache.drop("recent") // uncached again: the pass reads it from a block
	spans := checkSpans(t, s, spanPassAt+9)

	// A write moves the span: a later last event and an earlier task.
	add(&Batch{JobID: "many-003", LastEvent: &Event{Counter: 99, TimeMs: now + 3_600_000}, Tasks: []Task{{Counter: 1, UUID: "w", Name: "first", StartMs: now - 5}}})
	after := checkSpans(t, s, spanPassAt+9)
	for i := range after {
		if after[i].ID == "many-003" {
			if after[i].FirstMs != now-5 || after[i].LastMs != now+3_600_000 {
				t.Errorf("after a write many-003 spans %+v, want %d..%d", after[i], now-5, now+3_600_000)
			}
			if after[i] == spans[i] {
				t.Errorf("the write did not change the span %+v", spans[i])
			}
		}
	}
}
