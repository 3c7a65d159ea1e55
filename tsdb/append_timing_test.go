package tsdb

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/bench/workload"
)

// BenchmarkAppend measures storing a whole job in one batch into a fresh
// store, and the same batch again (every sample a duplicate):
//
//	go test -run '^$' -bench BenchmarkAppend -benchmem ./tsdb/
func BenchmarkAppend(b *testing.B) {
	for _, perTask := range []int{1000, 10000} {
		batch := exampleBatch("bench", 1796009960000)
		for i := range batch.Series {
			s := &batch.Series[i]
			s.Ts, s.Vs = s.Ts[:0], s.Vs[:0]
			t0 := batch.Tasks[i/3].StartMs + 10
			for k := 0; k < perTask; k++ {
				s.Ts = append(s.Ts, t0+int64(k)*250)
				s.Vs = append(s.Vs, float64(k%97))
			}
		}
		for i := range batch.Tasks {
			batch.Tasks[i].StartMs += int64(i) * int64(perTask) * 250
			for r := 0; r < 3; r++ {
				s := &batch.Series[i*3+r]
				for k := range s.Ts {
					s.Ts[k] += int64(i) * int64(perTask) * 250
				}
			}
		}
		samples := 9 * perTask
		b.Run(fmt.Sprintf("samples=%d/fresh", samples), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s, err := Open(b.TempDir(), Options{}, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := s.Append(context.Background(), batch)
				if err != nil || res.Samples != samples {
					b.Fatalf("append: %+v %v", res, err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
		b.Run(fmt.Sprintf("samples=%d/again", samples), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Append(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.Append(context.Background(), batch)
				if err != nil || res.Duplicates != samples {
					b.Fatalf("append again: %+v %v", res, err)
				}
			}
			b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// manySeriesBatch is one job whose batch holds n series of one sample
// each: n tasks with one cpu sample apiece.
func manySeriesBatch(jobID string, startMs int64, n int) *Batch {
	b := &Batch{JobID: jobID}
	for i := range n {
		b.Series = append(b.Series, SeriesData{Resource: "cpu", Counter: int64(i + 1), UUID: fmt.Sprintf("uuid-%d", i), Task: "task",
			Ts: []int64{startMs + int64(i)}, Vs: []float64{float64(i % 100)}})
	}
	return b
}

// cpuTime is the CPU time the process has used: on a shared machine it
// shows the cost of the work where wall time shows the neighbours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendSeriesCount measures the cost per series of a write of
// many one-sample series, by JSON batch (Append) and by labeled series
// (AppendSeries, remote write), into a fresh store, into a store holding
// a sample 5 hours newer (the head's out-of-order path, which was
// quadratic in one transaction), and again (every sample a duplicate).
// The cost per series must stay flat as the write grows:
//
//	go test -run '^$' -bench BenchmarkAppendSeriesCount -benchtime 3x ./tsdb/
func BenchmarkAppendSeriesCount(b *testing.B) {
	start := time.Now().Add(-5 * time.Hour).UnixMilli()
	for _, path := range []string{"batch", "series"} {
		for _, n := range []int{5_000, 20_000, 80_000} {
			batch := manySeriesBatch("many", start, n)
			series := batchSeries(batch)
			write := func(s *Store) (int, int, error) {
				if path == "batch" {
					res, err := s.Append(context.Background(), batch)
					return res.Samples, res.Duplicates, err
				}
				res, err := s.AppendSeries(context.Background(), series)
				return res.Samples, res.Duplicates, err
			}
			for _, phase := range []string{"fresh", "old", "again"} {
				b.Run(fmt.Sprintf("path=%s/series=%d/%s", path, n, phase), func(b *testing.B) {
					b.ReportAllocs()
					var cpu time.Duration
					for b.Loop() {
						b.StopTimer()
						s, err := Open(b.TempDir(), Options{}, nil, nil)
						if err != nil {
							b.Fatal(err)
						}
						switch phase {
						case "again":
							if _, _, err := write(s); err != nil {
								b.Fatal(err)
							}
						case "old":
							// A newer sample puts the write on the head's
							// out-of-order path.
							if _, err := s.Append(context.Background(), manySeriesBatch("recent", start+5*3600_000, 1)); err != nil {
								b.Fatal(err)
							}
						}
						c0 := cpuTime()
						b.StartTimer()
						stored, dups, err := write(s)
						b.StopTimer()
						cpu += cpuTime() - c0
						if err != nil || (phase != "again" && stored != n) || (phase == "again" && dups != n) {
							b.Fatalf("write: %d stored, %d duplicates, %v", stored, dups, err)
						}
						s.Close()
						b.StartTimer()
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/series")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/series")
				})
			}
		}
	}
}

// streamWrites is jobs live jobs of perJob samples per resource over
// tasks tasks, as remote-write requests of about batch samples that
// interleave the jobs in time order (what a Prometheus remote-write queue
// sends), split over writers senders by series as the queue shards them.
// The store's clock must stand at or after the returned newest time.
func streamWrites(jobs, perJob, tasks, batch, writers int) (w [][][]LabeledSeries, samples int, newestMs int64) {
	streams := make([]*workload.Stream, jobs)
	for i := range streams {
		streams[i] = workload.NewStream(fmt.Sprintf("live-%d", i), workload.JobSpec{Tasks: tasks, SamplesPerResource: perJob, StartMs: workload.Start}, int64(i+1))
	}
	w = make([][][]LabeledSeries, writers)
	pending := make([][]LabeledSeries, writers)
	counts := make([]int, writers)
	sb := labels.NewScratchBuilder(5)
	add := func(ls labels.Labels, ts []int64, vs []float64) {
		k := int(ls.Hash() % uint64(writers))
		pending[k] = append(pending[k], LabeledSeries{Labels: ls, Ts: ts, Vs: vs})
		counts[k] += len(ts)
		samples += len(ts)
		newestMs = max(newestMs, ts[len(ts)-1])
		if counts[k] >= batch {
			w[k], pending[k], counts[k] = append(w[k], pending[k]), nil, 0
		}
	}
	var c workload.Chunk
	nextTask := make([]int, jobs)
	for live := jobs; live > 0; {
		live = 0
		for j, s := range streams {
			if !s.Next(&c, max(batch/(3*jobs), 10)) {
				continue
			}
			live++
			for ; nextTask[j] <= c.Task; nextTask[j]++ {
				tk := s.Tasks[nextTask[j]]
				add(taskLabels(&sb, MetricTaskStart, s.ID, tk.Counter, tk.UUID, tk.Name), []int64{tk.StartMs}, []float64{float64(tk.Counter)})
			}
			tk := s.Tasks[c.Task]
			for r, res := range c.Resources {
				add(taskLabels(&sb, Resources[resourceIndex(res)].Metric, s.ID, tk.Counter, tk.UUID, tk.Name), slices.Clone(c.Ts), slices.Clone(c.Vs[r]))
			}
		}
	}
	for k := range pending {
		if len(pending[k]) > 0 {
			w[k] = append(w[k], pending[k])
		}
	}
	return w, samples, newestMs
}

// BenchmarkAppendStream measures live remote write into the store: 20
// jobs sending at once, in writes of 10,000 samples interleaving the
// jobs, from one writer and from two at once (series sharded between
// them), into a fresh store (shape=live: each write newer than what is
// stored of its series) and the same writes again (shape=retried: every
// sample a duplicate, so every write reads what is stored):
//
//	go test -run '^$' -bench BenchmarkAppendStream -benchtime 5x ./tsdb/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkAppendStream(b *testing.B) {
	ctx := context.Background()
	for _, writers := range []int{1, 2} {
		writes, n, newestMs := streamWrites(20, 5000, 20, 10_000, writers)
		now := func() time.Time { return time.UnixMilli(newestMs) }
		run := func(s *Store) (stored, dups int) {
			var (
				wg sync.WaitGroup
				mu sync.Mutex
			)
			for _, ws := range writes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, w := range ws {
						res, err := s.AppendSeries(ctx, w)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						stored, dups = stored+res.Samples+res.Records, dups+res.Duplicates+res.Records
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			return stored, dups
		}
		for _, shape := range []string{"live", "retried"} {
			b.Run(fmt.Sprintf("shape=%s/writers=%d/n=%d", shape, writers, n), func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					s, err := Open(b.TempDir(), Options{Now: now}, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					if shape == "retried" {
						if stored, _ := run(s); stored != n {
							b.Fatalf("stored %d of %d samples", stored, n)
						}
					}
					c0 := cpuTime()
					b.StartTimer()
					stored, dups := run(s)
					b.StopTimer()
					cpu += cpuTime() - c0
					if (shape == "live" && stored != n) || (shape == "retried" && (stored != 0 || dups == 0)) {
						b.Fatalf("%s: %d stored, %d duplicates of %d samples", shape, stored, dups, n)
					}
					s.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/sample")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/sample")
			})
		}
	}
}
