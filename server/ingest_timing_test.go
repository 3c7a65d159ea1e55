package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIngestDecode reads a collector's batch as POST /api/v1/ingest
// does, gunzip and decode into pooled columns, without the store: 12
// series of 834 samples (cpu with 3 decimals, memory bytes, PIDs; times
// 250 ms apart with ±3 ms of jitter), gzip at the default level as the
// collector sends it. cpu-ns/sample is the process's CPU time:
//
//	go test -run '^$' -bench BenchmarkIngestDecode -benchmem ./server/
func BenchmarkIngestDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := ingestBatch{JobID: "4711", Tasks: []ingestTask{{Counter: 3, UUID: "0242ac11-0002-e8b1-3f00-000000000017", Name: "install packages", Start: 1796009975979}},
		LastEvent: &ingestEvent{Counter: 40, Time: 1796009977000}}
	t0 := int64(1796009976000)
	samples := 0
	for i := range 12 {
		sr := ingestSeries{Resource: []string{"cpu", "memory", "pids"}[i%3], Counter: 3, UUID: in.Tasks[0].UUID, Task: in.Tasks[0].Name}
		for k := range 834 {
			sr.T = append(sr.T, t0+int64(i/3*834+k)*250+rng.Int64N(7)-3)
			switch sr.Resource {
			case "cpu":
				sr.V = append(sr.V, sampleValue(math.Round(rng.Float64()*100_000)/1000))
			case "memory":
				sr.V = append(sr.V, sampleValue(100_000_000+rng.IntN(50_000_000)))
			default:
				sr.V = append(sr.V, sampleValue(1+rng.IntN(30)))
			}
		}
		samples += len(sr.T)
		in.Series = append(in.Series, sr)
	}
	raw, err := json.Marshal(&in)
	if err != nil {
		b.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(raw)
	zw.Close()
	body := zbuf.Bytes()
	if !decodeBatchFast(raw, &ingestBatch{}, nil) {
		b.Fatal("the batch is not one the fast reader takes")
	}
	var docs writeBuffers
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	c0 := processCPU()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/api/v1/ingest", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		rc, err := requestBody(req, "application/json", 64<<20)
		if err != nil {
			b.Fatal(err)
		}
		var got ingestBatch
		wb := docs.get()
		if err := decodeBatch(rc, &got, 64<<20, wb); err != nil {
			b.Fatal(err)
		}
		if len(got.Series) != len(in.Series) || len(got.Series[11].V) != 834 {
			b.Fatalf("decoded %d series", len(got.Series))
		}
		docs.put(wb)
		rc.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N*samples), "cpu-ns/sample")
}

// processCPU is the CPU time this process has used: on a shared machine
// it tells a benchmark's cost apart from the time it waited for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
