package tsdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Strings handed out by the store stay valid after compaction rewrites
// and unmaps the blocks they were read from: job ids from JobIDs, and
// task names and uuids of a cached job.
func TestStringsOutliveCompaction(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("job-%02d", i)
		want = append(want, id)
		if _, err := s.Append(ctx, exampleBatch(id, start+int64(i)*10_000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	ids, err := s.JobIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.ReadJob(ctx, "job-19", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	// Each delete compacts and rewrites the blocks without the job; the
	// blocks the strings above were read from are closed and unmapped.
	for _, id := range []string{"job-00", "job-01"} {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(ids, ","); got != strings.Join(want, ",") {
		t.Fatalf("job ids read before the deletes = %s, want %s", got, strings.Join(want, ","))
	}
	var names []string
	for _, task := range kept.Tasks {
		names = append(names, task.UUID+"/"+task.Name)
	}
	if got, w := strings.Join(names, ","), "uuid-burn some cpu/burn some cpu,uuid-allocate memory/allocate memory,uuid-say hello/say hello"; got != w {
		t.Fatalf("tasks of the job read before the deletes = %s, want %s", got, w)
	}
	again, err := s.ReadJob(ctx, "job-19", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Tasks, kept.Tasks) {
		t.Fatalf("cached tasks %+v differ from %+v", again.Tasks, kept.Tasks)
	}
}

// A write to one job never keeps another job from being cached, and a
// job read before a write of it is not cached after the write.
func TestCacheGenerationsPerJob(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UnixMilli()
	for _, id := range []string{"A", "B"} {
		if _, err := s.Append(ctx, exampleBatch(id, start)); err != nil {
			t.Fatal(err)
		}
	}
	writes := 0
	writeA := func() {
		writes++
		more := &Batch{JobID: "A", Series: []SeriesData{{Resource: "cpu", Counter: 9, UUID: "uuid-say hello", Task: "say hello",
			Ts: []int64{start + 10_000 + int64(writes)}, Vs: []float64{float64(writes)}}}}
		if _, err := s.Append(ctx, more); err != nil {
			t.Error(err)
		}
	}
	// Every miss of either job is followed by a write to A before the
	// job is read from the TSDB and put in the cache.
	s.cache.afterMiss = func(string) { writeA() }

	decoded := func(f func() error, want uint64) {
		t.Helper()
		before := s.cache.decoded.Load()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if got := s.cache.decoded.Load() - before; got != want {
			t.Fatalf("decoded %d jobs, want %d", got, want)
		}
	}
	readB := func() error { _, err := s.ReadJob(ctx, "B", minTime, maxTime); return err }
	decoded(readB, 1)
	decoded(readB, 0) // B was cached despite the write to A during its fill
	sumB := func() error {
		sum, err := s.Summary(ctx, "B")
		if err == nil && sum.Resources[0].Samples != 24 {
			t.Fatalf("summary of B = %+v", sum)
		}
		return err
	}
	decoded(sumB, 0) // the summary misses, but B's job is cached
	decoded(sumB, 0)
	if writes != 1+1 {
		t.Fatalf("writes = %d, want 2 (one per miss)", writes)
	}

	readA := func() error { _, err := s.ReadJob(ctx, "A", minTime, maxTime); return err }
	decoded(readA, 1) // read before the write of its miss: not cached
	decoded(readA, 1)
	s.cache.afterMiss = nil
	decoded(readA, 1)
	decoded(readA, 0)
	job, err := s.ReadJob(ctx, "A", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(job.Columns[0].Ts); got != 24+writes {
		t.Fatalf("A has %d cpu samples, want %d", got, 24+writes)
	}
}

// The cache's per-job stamps: exact outcomes of put after drop, also
// across forgetting the stamps.
func TestCacheTokens(t *testing.T) {
	c := newCache(100)
	job := &Job{ID: "x"}
	_, tok, _ := c.job("B")
	c.drop("A")
	c.putJob("B", job, tok)
	if _, _, ok := c.job("B"); !ok {
		t.Fatal("B not cached after a drop of A")
	}
	_, tok, _ = c.job("A")
	c.drop("A")
	c.putJob("A", job, tok)
	if _, _, ok := c.job("A"); ok {
		t.Fatal("A cached after its own drop")
	}
	_, tok, _ = c.job("C")
	for i := range maxDropped + 1 {
		c.drop(fmt.Sprint("other", i))
	}
	c.putJob("C", job, tok)
	if _, _, ok := c.job("C"); ok {
		t.Fatal("C cached with a token older than the forgotten stamps")
	}
	if len(c.dropped) > maxDropped {
		t.Fatalf("%d stamps kept, at most %d", len(c.dropped), maxDropped)
	}
	_, tok, _ = c.job("C")
	c.putJob("C", job, tok)
	if _, _, ok := c.job("C"); !ok {
		t.Fatal("C not cached with a fresh token")
	}
}
