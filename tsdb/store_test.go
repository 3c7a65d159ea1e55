package tsdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

// exampleBatch is a three-task job starting at startMs with 4 Hz samples.
func exampleBatch(jobID string, startMs int64) *Batch {
	b := &Batch{JobID: jobID, LastEvent: &Event{Counter: 12, TimeMs: startMs + 6000}}
	names := []string{"burn some cpu", "allocate memory", "say hello"}
	for i, name := range names {
		counter := int64(3 + 3*i)
		uuid := "uuid-" + name
		t0 := startMs + int64(i)*2000
		b.Tasks = append(b.Tasks, Task{Counter: counter, UUID: uuid, Name: name, StartMs: t0})
		for _, res := range []string{"cpu", "memory", "pids"} {
			sd := SeriesData{Resource: res, Counter: counter, UUID: uuid, Task: name}
			for k := int64(0); k < 8; k++ {
				sd.Ts = append(sd.Ts, t0+10+k*250)
				sd.Vs = append(sd.Vs, float64(int64(i+1)*100+k))
			}
			b.Series = append(b.Series, sd)
		}
	}
	return b
}

func TestAppendReadRoundTrip(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 3, 39, 35, 0, time.UTC).UnixMilli()
	res, err := s.Append(ctx, exampleBatch("42", start))
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 72 || res.Tasks != 4 || res.Duplicates != 0 {
		t.Fatalf("append result = %+v, want 72 samples, 3 tasks + 1 last event", res)
	}
	job, err := s.ReadJob(ctx, "42", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Tasks) != 3 {
		t.Fatalf("tasks = %d, want 3", len(job.Tasks))
	}
	wantEnds := []int64{start + 2000, start + 4000, start + 6000}
	for i, task := range job.Tasks {
		if task.Counter != int64(3+3*i) || task.StartMs != start+int64(i)*2000 || task.EndMs != wantEnds[i] {
			t.Errorf("task %d = %+v, want counter %d start %d end %d", i, task, 3+3*i, start+int64(i)*2000, wantEnds[i])
		}
	}
	if job.LastEvent == nil || job.LastEvent.Counter != 12 {
		t.Fatalf("last event = %+v, want counter 12", job.LastEvent)
	}
	if len(job.Columns) != 3 {
		t.Fatalf("columns = %d, want 3", len(job.Columns))
	}
	for _, c := range job.Columns {
		if len(c.Ts) != 24 {
			t.Fatalf("%s has %d samples, want 24", c.Resource.Name, len(c.Ts))
		}
		for i := range c.Ts {
			if i > 0 && c.Ts[i] <= c.Ts[i-1] {
				t.Fatalf("%s times not increasing at %d", c.Resource.Name, i)
			}
			task := job.Tasks[c.Task[i]]
			if want := float64((task.Counter/3)*100 + int64(i%8)); c.Vs[i] != want {
				t.Fatalf("%s[%d] = %v of task %d, want %v", c.Resource.Name, i, c.Vs[i], task.Counter, want)
			}
		}
	}
	// A window read keeps only samples in [from, to].
	win, err := s.ReadJob(ctx, "42", start+2000, start+2500)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(win.Columns[0].Ts); got != 2 {
		t.Fatalf("window holds %d cpu samples, want 2 (t=+2010, +2260)", got)
	}
	if len(win.Tasks) != 3 {
		t.Fatalf("window read lost tasks: %d", len(win.Tasks))
	}
}

func TestAppendTwiceStoresOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UnixMilli()
	if _, err := s.Append(ctx, exampleBatch("j", start)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, exampleBatch("j", start))
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 0 || res.Tasks != 0 || res.Duplicates != 72 {
		t.Fatalf("second append = %+v, want only duplicates", res)
	}
	job, err := s.ReadJob(ctx, "j", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range job.Columns {
		if len(c.Ts) != 24 {
			t.Fatalf("%s has %d samples after a repeated append, want 24", c.Resource.Name, len(c.Ts))
		}
	}
}

// A job from 2019 imports after a recent one, and re-importing it after a
// restart and a compaction still stores it once.
func TestOldJobsImport(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	recent := time.Now().Add(-time.Minute).UnixMilli()
	old := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, b := range []*Batch{exampleBatch("new", recent), exampleBatch("old", old)} {
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatalf("append %s: %v", b.JobID, err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, exampleBatch("old", old)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"old", "new"} {
		job, err := s.ReadJob(ctx, id, minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		if len(job.Columns) != 3 || len(job.Columns[1].Ts) != 24 || len(job.Tasks) != 3 {
			t.Fatalf("job %s: %d columns, %d tasks", id, len(job.Columns), len(job.Tasks))
		}
	}
	ids, err := s.JobIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "new,old" {
		t.Fatalf("job ids = %v", ids)
	}
}

func TestDeleteThenReimport(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-10 * time.Minute).UnixMilli()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for _, b := range []*Batch{exampleBatch("a", start), exampleBatch("b", start), exampleBatch("c", old)} {
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "c"} {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadJob(ctx, id, minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("read of deleted job %s: %v, want ErrJobNotFound", id, err)
		}
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("second delete: %v, want ErrJobNotFound", err)
	}
	if sum, err := s.Summary(ctx, "b"); err != nil || sum.Resources[0].Samples != 24 {
		t.Fatalf("job b after deleting a: %+v %v", sum, err)
	}
	for _, b := range []*Batch{exampleBatch("a", start), exampleBatch("c", old)} {
		if _, err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		job, err := s.ReadJob(ctx, b.JobID, minTime, maxTime)
		if err != nil {
			t.Fatalf("re-imported job %s: %v", b.JobID, err)
		}
		if got := len(job.Columns[0].Ts); got != 24 {
			t.Fatalf("re-imported job %s has %d cpu samples, want 24", b.JobID, got)
		}
	}
}

func TestValidate(t *testing.T) {
	f := func(mutate func(b *Batch), wantField string) {
		t.Helper()
		b := exampleBatch("v", 1796009975000)
		mutate(b)
		err := b.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wantField) {
			t.Fatalf("Validate() = %v, want ErrInvalid naming %q", err, wantField)
		}
	}
	f(func(b *Batch) { b.JobID = "" }, "job_id: is required")
	f(func(b *Batch) { b.JobID = strings.Repeat("x", MaxJobIDLen+1) }, "job_id: is 257 bytes long")
	f(func(b *Batch) { b.Series[1].Resource = "disk" }, "series[1].resource")
	f(func(b *Batch) { b.Series[2].Vs = b.Series[2].Vs[:3] }, "series[2]: t has 8 values but v has 3")
	f(func(b *Batch) { b.Series[0].Ts[3] = b.Series[0].Ts[2] }, "series[0].t[3]: times must strictly increase")
	f(func(b *Batch) { b.Series[0].Vs[5] = nan() }, "series[0].v[5]: must be a finite number")
	f(func(b *Batch) { b.Series[0].Ts[0] = 0 }, "series[0].t[0]")
	f(func(b *Batch) { b.Tasks[2].Name = strings.Repeat("n", MaxTaskNameLen+1) }, "tasks[2].name")
	f(func(b *Batch) { b.Tasks[0].Counter = -1 }, "tasks[0].counter")
	f(func(b *Batch) { b.LastEvent.TimeMs = -5 }, "last_event.time")
	f(func(b *Batch) { b.Series[0].Task = "\xff" }, "series[0].task: is not valid UTF-8")
}

// A refused batch leaves what is stored untouched.
func TestInvalidBatchStoresNothing(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	b := exampleBatch("x", 1796009975000)
	b.Series[8].Vs[7] = nan()
	if _, err := s.Append(ctx, b); !errors.Is(err, ErrInvalid) {
		t.Fatalf("append = %v, want ErrInvalid", err)
	}
	if _, err := s.ReadJob(ctx, "x", minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("a refused batch stored something: %v", err)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// A cached job is dropped when it is written to or deleted.
func TestCacheFollowsWrites(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Hour).UnixMilli()
	if _, err := s.Append(ctx, exampleBatch("live", start)); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		job, err := s.ReadJob(ctx, "live", minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(job.Columns[0].Ts); got != 24+round-1 {
			t.Fatalf("round %d: %d cpu samples, want %d", round, got, 24+round-1)
		}
		sum, err := s.Summary(ctx, "live")
		if err != nil || sum.Resources[0].Samples != 24+round-1 {
			t.Fatalf("round %d: summary %+v %v", round, sum, err)
		}
		more := &Batch{JobID: "live", Series: []SeriesData{{Resource: "cpu", Counter: 9, UUID: "uuid-say hello", Task: "say hello",
			Ts: []int64{start + 10_000 + int64(round)}, Vs: []float64{1}}}}
		if _, err := s.Append(ctx, more); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadJob(ctx, "live", minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
}

// Compact leaves nothing for the TSDB's own loop to compact later, on
// every path a write takes: jobs of the last hours (the head), written
// newest first (the out-of-order head), and days old (a backfill block
// per job and day, overlapping). Before, the loop merged them a minute
// on, beside whatever a test or a benchmark was measuring.
func TestCompactLeavesNothingPlanned(t *testing.T) {
	for _, tc := range []struct {
		name        string
		end         time.Duration // before now, of the newest job
		oldestFirst bool
	}{
		{"recent, newest first", time.Minute, false},
		{"days old, oldest first", 100 * time.Hour, true},
		{"days old, newest first", 100 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compactLeavesNothingPlanned(t, time.Now().Add(-tc.end).UnixMilli(), tc.oldestFirst)
		})
	}
}

func compactLeavesNothingPlanned(t *testing.T, end int64, oldestFirst bool) {
	s, dir := openTest(t)
	ctx := t.Context()
	const runs = 100
	for i := range runs {
		h := i
		if oldestFirst {
			h = runs - 1 - i
		}
		if _, err := s.Append(ctx, exampleBatch(fmt.Sprintf("run-%03d", h), end-int64(h)*3_600_000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	plan, err := s.compactor.Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 0 {
		t.Errorf("after Compact the compactor still plans to merge %d blocks", len(plan))
	}
	if n := s.db.Head().NumSeries(); n != 0 {
		t.Errorf("after Compact the head holds %d series", n)
	}
	for h := range runs {
		id := fmt.Sprintf("run-%03d", h)
		job, err := s.ReadJob(ctx, id, minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		if len(job.Columns) != 3 || len(job.Columns[1].Ts) != 24 || len(job.Tasks) != 3 {
			t.Fatalf("job %s after Compact: %d columns, %d tasks", id, len(job.Columns), len(job.Tasks))
		}
	}
}
