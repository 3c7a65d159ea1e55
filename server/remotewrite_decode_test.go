package server

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/tsdb"
)

// sameBatch fails unless got holds exactly want's series (labels, times,
// values by their bits, histograms), metadata and sample count.
func sameBatch(t *testing.T, got, want *writeBatch) {
	t.Helper()
	if got.total != want.total || len(got.series) != len(want.series) {
		t.Fatalf("decoded %d series of %d samples, want %d of %d", len(got.series), got.total, len(want.series), want.total)
	}
	for i := range want.series {
		g, w := got.series[i], want.series[i]
		if !labels.Equal(g.Labels, w.Labels) || !slices.Equal(g.Ts, w.Ts) || len(g.Vs) != len(w.Vs) || !reflect.DeepEqual(g.Hs, w.Hs) {
			t.Fatalf("series %d = %v %v %v %v, want %v %v %v %v", i, g.Labels, g.Ts, g.Vs, g.Hs, w.Labels, w.Ts, w.Vs, w.Hs)
		}
		for k := range w.Vs {
			if math.Float64bits(g.Vs[k]) != math.Float64bits(w.Vs[k]) {
				t.Fatalf("series %d value %d = %v, want %v", i, k, g.Vs[k], w.Vs[k])
			}
		}
	}
	if !reflect.DeepEqual(got.metadata, want.metadata) && (len(got.metadata) != 0 || len(want.metadata) != 0) {
		t.Fatalf("metadata = %+v, want %+v", got.metadata, want.metadata)
	}
}

// FuzzRemoteWriteFastDecode decodes arbitrary protobuf as a remote-write
// request both ways: whenever the fast reader takes it, prompb decodes
// it too, to the same series; and the server's decoding (fast, or prompb
// for what the fast reader leaves) refuses exactly what prompb refuses.
// Run with: go test -run '^$' -fuzz FuzzRemoteWriteFastDecode -fuzztime 2m ./server/
func FuzzRemoteWriteFastDecode(f *testing.F) {
	cpu := []prompb.Label{{Name: "__name__", Value: tsdb.MetricCPU}, {Name: tsdb.LabelTask, Value: "t"}, {Name: tsdb.LabelJob, Value: "42"}, {Name: tsdb.LabelCounter, Value: "3"}}
	for _, req := range []*prompb.WriteRequest{
		{Timeseries: []prompb.TimeSeries{
			{Labels: cpu, Samples: []prompb.Sample{{Value: 1.5, Timestamp: 1796009976236}, {Value: math.Inf(-1), Timestamp: -1}, {}}},
			{Labels: []prompb.Label{{Name: "b", Value: ""}, {Name: "a", Value: "x"}}},
		}, Metadata: []prompb.MetricMetadata{{MetricFamilyName: tsdb.MetricCPU, Type: prompb.MetricMetadata_GAUGE, Help: "h", Unit: "u"}}},
		{Timeseries: []prompb.TimeSeries{{Labels: cpu, Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 3}, Schema: 1,
			PositiveSpans: []prompb.BucketSpan{{Offset: 0, Length: 2}}, PositiveDeltas: []int64{1, 1}, Timestamp: 1796009976236}}}}},
		{Timeseries: []prompb.TimeSeries{{Labels: cpu, Samples: []prompb.Sample{{Value: 2, Timestamp: 5}},
			Exemplars: []prompb.Exemplar{{Labels: cpu[:1], Value: 1, Timestamp: 5}}}}}, // left to prompb
		{},
	} {
		raw, err := req.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0x0a, 0x05, 0x12, 0x03, 0x08, 0x01, 0x00}) // a sample with a varint where the value's fixed64 belongs
	f.Add([]byte{0x0a, 0x04, 0x2a, 0x02, 0x08, 0x01})       // an unknown field of a series
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 0x0a})             // a label cut short
	f.Add([]byte{0x12, 0x00})                               // the reserved field 2 of the request
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req prompb.WriteRequest
		refErr := req.Unmarshal(raw)
		var b labels.ScratchBuilder
		wb := &writeBuf{}
		fast, err := decodeFast(raw, wb, &b)
		if err == nil {
			if refErr != nil {
				t.Fatalf("the fast reader took a request prompb refuses: %v", refErr)
			}
			sameBatch(t, fast, batchOf(&req, &writeBuf{}, &b))
		}
		body := snappy.Encode(nil, raw)
		got, err := decodeWrite(body, 1<<30, &writeBuf{ts: []int64{7}, vs: []float64{7}, series: make([]tsdb.LabeledSeries, 0, 1)})
		ref, refErr := decodeWriteRequest(body, 1<<30)
		switch {
		case (err == nil) != (refErr == nil):
			t.Fatalf("decodeWrite: %v; prompb: %v", err, refErr)
		case err == nil:
			sameBatch(t, got, batchOf(ref, &writeBuf{}, &b))
		}
	})
}

// The buffers of one request are reused by the next, which decodes the
// same as with fresh ones, and a pooled body is read whole whatever the
// size the request claimed.
func TestWriteBuffersReused(t *testing.T) {
	var pool writeBuffers
	var b labels.ScratchBuilder
	reqs := []*prompb.WriteRequest{
		{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1}, {Value: 2, Timestamp: 2}, {Value: 3, Timestamp: 3}}}}},
		{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "b"}}, Samples: []prompb.Sample{{Value: 4, Timestamp: 4}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "c"}}, Samples: []prompb.Sample{{Value: 5, Timestamp: 5}}}}},
	}
	for round := range 3 {
		for _, req := range reqs {
			raw, err := req.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			body := snappy.Encode(nil, raw)
			wb := pool.get()
			// A wrong Content-Length (short, long or none) only sizes the buffer.
			read, err := readBody(bytes.NewReader(body), int64(len(body)*(round-1)), wb.body[:0])
			if err != nil || !bytes.Equal(read, body) {
				t.Fatalf("readBody = %d bytes, %v, want the %d of the body", len(read), err, len(body))
			}
			wb.body = read
			got, err := decodeWrite(read, 1<<20, wb)
			if err != nil {
				t.Fatal(err)
			}
			sameBatch(t, got, batchOf(req, &writeBuf{}, &b))
			pool.put(wb)
		}
	}
}
