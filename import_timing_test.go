package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// BenchmarkImport measures reading a synthetic ansible-runner tree and
// storing it, per job size:
//
//	go test -run '^$' -bench BenchmarkImport -benchmem . | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkImport(b *testing.B) {
	for _, size := range []int{10_000, 300_000} {
		job := workload.AnsibleJob("bench", workload.JobSpec{Tasks: 100, SamplesPerResource: size, StartMs: 1796009960000}, 1)
		tree := b.TempDir()
		if _, err := workload.WriteRunnerTree(tree, job); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("samples=%.0e/read", float64(size)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				jobs, err := ansible.Read(tree, ansible.ReadOptions{})
				if err != nil || len(jobs) != 1 || jobs[0].Samples() != 3*size {
					b.Fatalf("read: %v", err)
				}
			}
			b.ReportMetric(float64(3*size)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
		b.Run(fmt.Sprintf("samples=%.0e/read+store", float64(size)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				// The store's clock stands two days after the synthetic
				// job's start, past its end.
				now := func() time.Time { return time.UnixMilli(1796009960000).Add(48 * time.Hour) }
				srv, err := server.Open(server.Setup{DataDir: b.TempDir(), Store: tsdb.Options{Now: now}}, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				jobs, err := ansible.Read(tree, ansible.ReadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				res, err := ingestJob(context.Background(), srv, jobs[0])
				if err != nil || res.Samples != 3*size {
					b.Fatalf("store: %+v %v", res, err)
				}
				b.StopTimer()
				srv.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(3*size)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
