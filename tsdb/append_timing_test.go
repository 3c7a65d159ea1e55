package tsdb

import (
	"context"
	"fmt"
	"testing"
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
