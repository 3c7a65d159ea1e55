package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
)

// BenchmarkReadJob measures decoding a whole synthetic job (200 tasks, the
// three resources) compacted into blocks, as an uncached graph request of
// a finished job does (wall time, and CPU time for a shared machine):
//
//	go test -run '^$' -bench BenchmarkReadJob -benchmem -benchtime 20x ./tsdb/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkReadJob(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{100_000, 1_000_000} {
		job := workload.AnsibleJob("bench", workload.JobSpec{Tasks: 200, SamplesPerResource: size, StartMs: workload.Start}, 1)
		// The store's clock stands at the job's end: a long synthetic job
		// reaches past the wall clock, beyond the admission window.
		jobEnd := time.UnixMilli(job.LastEventMs)
		s, err := Open(b.TempDir(), Options{CacheSamples: -1, Now: func() time.Time { return jobEnd }}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, workloadBatch(job)); err != nil {
			b.Fatal(err)
		}
		if err := s.Compact(ctx); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("n=%.0e", float64(size)), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				got, err := s.readJob(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, c := range got.Columns {
					n += len(c.Ts)
				}
				if n != 3*size || len(got.Tasks) != 200 {
					b.Fatalf("read %d samples and %d tasks, want %d and 200", n, len(got.Tasks), 3*size)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(3*size), "ns/sample")
			// CPU time shows the cost of the work on a shared machine,
			// where wall time shows the neighbours; a parallel decode
			// spends more of it than wall time on an idle one.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
		})
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// workloadBatch is a synthetic job as one batch.
func workloadBatch(j *workload.Job) *Batch {
	b := &Batch{JobID: j.ID, LastEvent: &Event{Counter: j.LastCounter, TimeMs: j.LastEventMs}}
	for _, tk := range j.Tasks {
		b.Tasks = append(b.Tasks, Task{Counter: tk.Counter, UUID: tk.UUID, Name: tk.Name, StartMs: tk.StartMs})
	}
	for _, s := range j.Series {
		tk := j.Tasks[s.Task]
		b.Series = append(b.Series, SeriesData{Resource: s.Resource, Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name, Ts: s.Ts, Vs: s.Vs})
	}
	return b
}
