package remote

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkDecode measures the streaming decoders on answers of 100k
// samples held in memory, per shape:
//
//	go test -run '^$' -bench Decode -count 6 ./tsdb/remote/ | benchstat -
func BenchmarkDecode(b *testing.B) {
	const n = 100_000
	var export, matrix bytes.Buffer
	export.WriteString(`{"metric":{"__name__":"peakline_cpu_percent","job_id":"42","counter":"3"},"values":[`)
	matrix.WriteString(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"peakline_cpu_percent","job_id":"42","counter":"3"},"values":[`)
	for i := range n {
		if i > 0 {
			export.WriteByte(',')
			matrix.WriteByte(',')
		}
		export.WriteString(strconv.FormatFloat(100+float64(i%1000)/8, 'f', -1, 64))
		matrix.WriteString("[" + strconv.Itoa(1796009960+i/1000) + "." + strconv.Itoa(100+i%900) + `,"104.88"]`)
	}
	export.WriteString(`],"timestamps":[`)
	for i := range n {
		if i > 0 {
			export.WriteByte(',')
		}
		export.WriteString(strconv.Itoa(1796009960000 + i))
	}
	export.WriteString("]}\n")
	matrix.WriteString("]}]}}")
	bud := newBudget(1<<30, time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	f := func(name string, body []byte, decode func(*jsonStream, *reservation) (int, error)) {
		b.Run("shape="+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				res, _ := bud.reserve(context.Background(), "bench")
				got, err := decode(newJSONStream(bytes.NewReader(body)), res)
				res.release()
				if err != nil || got != n {
					b.Fatalf("decoded %d samples, %v; want %d", got, err, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
	f("export", export.Bytes(), func(s *jsonStream, res *reservation) (int, error) {
		out, err := decodeExport(s, res)
		if err != nil || len(out) != 1 {
			return 0, err
		}
		return len(out[0].ts), nil
	})
	f("matrix", matrix.Bytes(), func(s *jsonStream, res *reservation) (int, error) {
		got := 0
		err := s.object(func(key string) error {
			if key != "data" {
				return s.skip()
			}
			_, out, err := decodeResult(s, res)
			for _, sr := range out {
				got += len(sr.ts)
			}
			return err
		})
		return got, err
	})
}
