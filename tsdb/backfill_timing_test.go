package tsdb

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"
)

// benchJob is a three-task job of n samples per resource and task, one a
// second from startMs.
func benchJob(id string, startMs int64, n int) *Batch {
	b := &Batch{JobID: id, LastEvent: &Event{Counter: 20, TimeMs: startMs + int64(3*n*1000)}}
	for k := range 3 {
		t0 := startMs + int64(k*n*1000)
		name := fmt.Sprintf("task %d", k)
		b.Tasks = append(b.Tasks, Task{Counter: int64(3 + k), UUID: name, Name: name, StartMs: t0})
		for _, res := range []string{"cpu", "memory", "pids"} {
			sd := SeriesData{Resource: res, Counter: int64(3 + k), UUID: name, Task: name}
			for j := range n {
				sd.Ts = append(sd.Ts, t0+int64(j*1000)+10)
				sd.Vs = append(sd.Vs, float64(100*k+j%97))
			}
			b.Series = append(b.Series, sd)
		}
	}
	return b
}

func dirBytes(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// backfilledStore is a store of 300 jobs spread over 2005-2025 (one
// every 25 days, 3,600 samples each) and 20 recent ones.
func backfilledStore(b *testing.B) (string, *logBuffer, *Store) {
	b.Helper()
	dir := b.TempDir()
	logs := &logBuffer{}
	s, err := Open(dir, Options{}, logs.logger(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	first := time.Date(2005, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range 20 {
		if _, err := s.Append(ctx, benchJob(fmt.Sprintf("new-%02d", i), time.Now().Add(-time.Duration(90-2*i)*time.Minute).UnixMilli(), 400)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 300 {
		if _, err := s.Append(ctx, benchJob(fmt.Sprintf("old-%03d", i), first.AddDate(0, 0, 25*i).UnixMilli(), 400)); err != nil {
			b.Fatal(err)
		}
	}
	return dir, logs, s
}

// BenchmarkBackfillDelete deletes one job of a backfilled store (an old
// one, held in a day block, or a recent one, in the head) and reports
// the cleanup pass's time, its log lines and the disk before and after;
// close=during-pass deletes 100 old jobs and reports how long Close takes
// when it lands in their cleanup (what SIGTERM costs `serve`).
//
//	go test -run '^$' -bench BackfillDelete -benchtime 1x ./tsdb/
func BenchmarkBackfillDelete(b *testing.B) {
	ctx := context.Background()
	for _, job := range []string{"old-150", "new-10"} {
		b.Run("job="+job[:3], func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				dir, logs, s := backfilledStore(b)
				if err := s.Compact(ctx); err != nil { // the recent jobs into blocks as well
					b.Fatal(err)
				}
				before, lines := dirBytes(b, dir), len(logs.lines())
				b.StartTimer()
				start := time.Now()
				if err := s.Delete(ctx, job); err != nil {
					b.Fatal(err)
				}
				if err := s.WaitDeletes(ctx); err != nil {
					b.Fatal(err)
				}
				pass := time.Since(start)
				b.StopTimer()
				if n := rawStoreSamples(b, s, job); n != 0 {
					b.Fatalf("%s: %d samples left", job, n)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(pass.Milliseconds()), "pass_ms")
				b.ReportMetric(float64(len(logs.lines())-lines), "log_lines")
				b.ReportMetric(float64(before)/1e6, "disk_before_MB")
				b.ReportMetric(float64(dirBytes(b, dir))/1e6, "disk_after_MB")
			}
		})
	}
	b.Run("close=during-pass", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			_, _, s := backfilledStore(b)
			for i := range 100 {
				if err := s.Delete(ctx, fmt.Sprintf("old-%03d", 3*i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			start := time.Now()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds()), "close_ms")
		}
	})
}

// BenchmarkBackfillSameDay imports 50 jobs of one old day (50 overlapping
// day blocks) and reports what Prometheus's compaction takes to merge
// them into one.
//
//	go test -run '^$' -bench BackfillSameDay -benchtime 1x ./tsdb/
func BenchmarkBackfillSameDay(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s, err := Open(b.TempDir(), Options{}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		day := time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC)
		for i := range 50 {
			if _, err := s.Append(ctx, benchJob(fmt.Sprintf("job-%02d", i), day.Add(time.Duration(i)*20*time.Minute).UnixMilli(), 400)); err != nil {
				b.Fatal(err)
			}
		}
		if n := len(s.db.Blocks()); n != 50 {
			b.Fatalf("%d blocks before the merge, want 50", n)
		}
		b.StartTimer()
		start := time.Now()
		if err := s.db.Compact(ctx); err != nil {
			b.Fatal(err)
		}
		merge := time.Since(start)
		b.StopTimer()
		if n := len(s.db.Blocks()); n != 1 {
			b.Fatalf("%d blocks after the merge, want 1", n)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(merge.Milliseconds()), "merge_ms")
	}
}
