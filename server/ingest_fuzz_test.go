package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/peakline/peakline/tsdb"
)

// storeDump is every float sample of a store: series labels → time → value.
type storeDump map[string]map[int64]float64

func dumpStore(t *testing.T, store *tsdb.Store) storeDump {
	t.Helper()
	q, err := store.Queryable().Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := storeDump{}
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	for set.Next() {
		samples := map[int64]float64{}
		it := set.At().Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt == chunkenc.ValFloat {
				ts, v := it.At()
				samples[ts] = v
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		out[set.At().Labels().String()] = samples
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameDump(a, b storeDump) bool {
	return maps.EqualFunc(a, b, func(x, y map[int64]float64) bool { return maps.Equal(x, y) })
}

// fuzzIngestSeeds are ingest bodies: valid, and each refused for one reason.
var fuzzIngestSeeds = []string{
	`{"job_id":"42","tasks":[{"counter":3,"uuid":"u1","name":"burn","start":1796009975979}],"last_event":{"counter":12,"time":1796009981831},` +
		`"series":[{"resource":"cpu","counter":3,"uuid":"u1","task":"burn","t":[1796009976236,1796009976486],"v":[93.46,102.17]}]}`,
	`{"job_id":"42","series":[{"resource":"memory","counter":3,"uuid":"u1","task":"burn","t":[1796009976236],"v":[1e9]},{"resource":"pids","t":[1796009976000,1796009976001],"v":[3,4]}]}`,
	`{"job_id":"42","series":[{"resource":"cpu","t":[1796009976236,1796009976236],"v":[1,2]}]}`,
	`{"job_id":"42","series":[{"resource":"disk","t":[1796009976236],"v":[1]}]}`,
	`{"job_id":"","tasks":[{"counter":-1,"uuid":"u","name":"n","start":5}]}`,
	`{"job_id":"x","series":[{"resource":"cpu","t":[1,2],"v":[1]}]}`,
	`{"job_id":"x","extra":1}`,
	`{"job_id":"x"} {"job_id":"y"}`,
	``,
	`[`,
}

// FuzzIngestJSON posts arbitrary bodies to the JSON ingest of a real
// store: no body panics or fails the server (5xx); a refused batch leaves
// the store exactly as it was (all or nothing); an accepted batch's every
// sample is stored under its series, with its value unless the answer
// counts conflicts. Run with: go test -run '^$' -fuzz FuzzIngestJSON -fuzztime 2m ./server/
func FuzzIngestJSON(f *testing.F) {
	for _, s := range fuzzIngestSeeds {
		f.Add([]byte(s))
	}
	var (
		store *tsdb.Store
		srv   *Server
		dir   string
		runs  int
	)
	// A fresh store every 500 inputs keeps each dump small.
	open := func(t *testing.T) {
		if store != nil {
			_ = store.Close()
			_ = os.RemoveAll(dir)
		}
		var err error
		if dir, err = os.MkdirTemp("", "fuzz-ingest"); err != nil {
			t.Fatal(err)
		}
		if store, err = tsdb.Open(dir, tsdb.Options{}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if srv, err = New(Config{MaxBatchSeries: 64, MaxBatchTasks: 64, MaxBatchSamples: 4096, MaxDecodedBytes: 1 << 20}, store, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.Cleanup(func() {
		if store != nil {
			_ = store.Close()
			_ = os.RemoveAll(dir)
		}
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		if runs%500 == 0 {
			open(t)
		}
		runs++
		before := dumpStore(t, store)
		req := httptest.NewRequest(http.MethodPost, "/api/v1/ingest", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		after := dumpStore(t, store)
		if rec.Code != http.StatusOK {
			if rec.Code >= 500 {
				t.Fatalf("body %q: %d %s, want a client error", body, rec.Code, rec.Body)
			}
			if !sameDump(before, after) {
				t.Fatalf("body %q was refused (%d %s) but the store changed", body, rec.Code, rec.Body)
			}
			return
		}
		var in ingestBatch
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("accepted body %q does not decode: %v", body, err)
		}
		var ans ingestAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatal(err)
		}
		b := labels.NewScratchBuilder(5)
		for _, sr := range in.Series {
			metric := map[string]string{"cpu": tsdb.MetricCPU, "memory": tsdb.MetricMemory, "pids": tsdb.MetricPIDs}[sr.Resource]
			b.Reset()
			for _, l := range [][2]string{{labels.MetricName, metric}, {tsdb.LabelJob, in.JobID}, {tsdb.LabelCounter, fmt.Sprint(sr.Counter)},
				{tsdb.LabelTaskUUID, sr.UUID}, {tsdb.LabelTask, sr.Task}} {
				if l[1] != "" { // an empty label value is no label
					b.Add(l[0], l[1])
				}
			}
			b.Sort()
			key := b.Labels().String()
			for i, ts := range sr.T {
				v, ok := after[key][ts]
				if !ok || (v != float64(sr.V[i]) && ans.Conflicts == 0) {
					t.Fatalf("accepted body %q: sample %s @%d = %v is stored as %v (present %v)", body, key, ts, sr.V[i], v, ok)
				}
			}
		}
	})
}

// fuzzMaxDecoded is the decoded-size limit of FuzzRemoteWriteDecode: small,
// so that bodies the fuzzer makes can cross it.
const fuzzMaxDecoded = 256 << 10

// FuzzRemoteWriteDecode decodes arbitrary bodies as remote write: no panic,
// every refusal is a client error (400 or 413), and no body makes the
// decoder allocate more than a few times the decoded-size limit.
// Run with: go test -run '^$' -fuzz FuzzRemoteWriteDecode -fuzztime 2m ./server/
func FuzzRemoteWriteDecode(f *testing.F) {
	valid := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: tsdb.MetricCPU}, {Name: tsdb.LabelJob, Value: "42"}, {Name: tsdb.LabelCounter, Value: "3"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 1796009976236}, {Value: 2, Timestamp: 1796009976486}},
		Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 3}, Schema: 1, PositiveSpans: []prompb.BucketSpan{{Offset: 0, Length: 2}},
			PositiveDeltas: []int64{1, 1}, Timestamp: 1796009976236}},
	}}, Metadata: []prompb.MetricMetadata{{MetricFamilyName: tsdb.MetricCPU, Type: prompb.MetricMetadata_GAUGE}}}
	raw, err := valid.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snappy.Encode(nil, raw))
	f.Add(snappy.Encode(nil, bytes.Repeat([]byte{0x0a, 0x00}, 4096))) // many empty series
	f.Add(snappy.Encode(nil, bytes.Repeat([]byte{0x0a, 0x02, 0x12, 0x00}, 2048)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}) // claims 4 GiB
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		req, err := decodeWriteRequest(body, fuzzMaxDecoded)
		runtime.ReadMemStats(&ms)
		if alloc := ms.TotalAlloc - before; alloc > 4*fuzzMaxDecoded+64<<10 {
			t.Fatalf("decoding %d bytes allocated %d bytes, more than 4 × the %d limit (err %v)", len(body), alloc, fuzzMaxDecoded, err)
		}
		if err != nil {
			if code := statusOf(err); code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
				t.Fatalf("refusal %v maps to %d, want 400 or 413", err, code)
			}
			if !errors.Is(err, errBadRequest) && !errors.Is(err, errTooLarge) {
				t.Fatalf("refusal %v is neither a bad request nor too large", err)
			}
			return
		}
		if req == nil {
			t.Fatalf("no error and no request")
		}
	})
}
