package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/tsdb"
)

// newLimitServer serves a fresh on-disk store with cfg over loopback.
func newLimitServer(t *testing.T, cfg Config) (*Server, *httptest.Server, *tsdb.Store) {
	t.Helper()
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = store.Close()
	})
	return srv, hs, store
}

// doPost posts body with the given headers and returns the status, the
// body and the Retry-After header.
func doPost(t *testing.T, url string, body io.Reader, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

var jsonHeader = map[string]string{"Content-Type": "application/json"}

// sizedBatch is a valid batch of job "sized" with the given numbers of
// tasks and of one-sample CPU series.
func sizedBatch(tasks, series int) []byte {
	var b strings.Builder
	b.WriteString(`{"job_id":"sized","tasks":[`)
	for i := range tasks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"counter":%d,"uuid":"u%d","name":"t%d","start":%d}`, i+1, i, i, 1_700_000_000_000+int64(i))
	}
	b.WriteString(`],"series":[`)
	for i := range series {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"resource":"cpu","counter":%d,"uuid":"u%d","task":"t%d","t":[%d],"v":[1]}`, i+1, i, i, 1_700_000_000_000+int64(i))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// Series, tasks and samples per batch are refused past their limits with
// 413 naming the field and the flag, and nothing of the batch is stored.
func TestIngestBatchLimits(t *testing.T) {
	_, hs, store := newLimitServer(t, Config{MaxBatchSeries: 3, MaxBatchTasks: 2, MaxBatchSamples: 4})
	f := func(body []byte, wantCode int, wantMsg string) {
		t.Helper()
		code, got, _ := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(body), jsonHeader)
		if code != wantCode || !strings.Contains(got, wantMsg) {
			t.Errorf("POST %.80s…: %d %s, want %d containing %q", body, code, got, wantCode, wantMsg)
		}
	}
	f(sizedBatch(2, 4), 413, `series: 4 series in one batch, at most 3 allowed (serve --max-batch-series)`)
	f(sizedBatch(3, 1), 413, `tasks: 3 tasks in one batch, at most 2 allowed (serve --max-batch-tasks)`)
	f([]byte(`{"job_id":"sized","series":[{"resource":"cpu","t":[1,2,3,4,5],"v":[1,2,3,4,5]}]}`), 413,
		`series: 5 samples in one batch, at most 4 allowed (serve --max-batch-samples)`)
	ids, err := store.JobIDs(t.Context())
	if err != nil || len(ids) != 0 {
		t.Fatalf("after refused batches the store holds jobs %q (%v), want none", ids, err)
	}
	f(sizedBatch(2, 3), 200, `"samples":3`)
}

// waitIngests spins until n ingest requests hold a slot. No sleep: the
// requests are on their way, and the slots are the server's own state.
func waitIngests(s *Server, n int) {
	for len(s.ingests) != n {
		runtime.Gosched()
	}
}

// Past --max-concurrent-ingest an ingest request (JSON or remote write)
// whose body is in is refused at once with 429 and Retry-After, not
// queued, while other routes still answer; once a slot frees, ingest
// works again. The slots are taken here as two requests being decoded
// would take them (a request holds one only once its body is in: see
// TestIngestSlowBodiesHoldNoSlot).
func TestIngestConcurrencyLimit(t *testing.T) {
	s, hs, _ := newLimitServer(t, Config{MaxConcurrentIngest: 2})
	body := sizedBatch(1, 1)
	s.ingests <- struct{}{}
	s.ingests <- struct{}{}
	f := func(path string, header map[string]string) {
		t.Helper()
		code, got, retry := doPost(t, hs.URL+path, bytes.NewReader(body), header)
		want := "2 ingest requests are being served, at most 2 at once (serve --max-concurrent-ingest)"
		if code != http.StatusTooManyRequests || retry != "1" || !strings.Contains(got, want) {
			t.Errorf("POST %s with every slot taken: %d, Retry-After %q, %s; want 429, Retry-After 1, %q", path, code, retry, got, want)
		}
	}
	f("/api/v1/ingest", jsonHeader)
	f("/api/v1/write", map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy"})
	f("/prometheus/api/v1/write", map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy"})
	if code := getStatus(t, hs.URL+"/api/v1/jobs"); code != http.StatusOK {
		t.Errorf("GET /api/v1/jobs while ingest is full: %d, want 200", code)
	}
	if n := s.bodies.reserved.Load(); n != 0 {
		t.Errorf("refused requests still hold %d bytes of bodies", n)
	}
	<-s.ingests
	if code, got, _ := doPost(t, hs.URL+"/api/v1/ingest", bytes.NewReader(body), jsonHeader); code != http.StatusOK {
		t.Errorf("ingest after a slot freed: %d %s, want 200", code, got)
	}
	<-s.ingests
	waitIngests(s, 0)
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A gzip body is bounded by its decoded size as it streams: decoding
// stops just past the limit, having read a small part of the compressed
// body, and never holds more than the limit.
func TestRequestBodyStopsAtDecodedLimit(t *testing.T) {
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	if _, err := zw.Write(make([]byte, 32<<20)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	compressed := &countingReader{r: bytes.NewReader(zbuf.Bytes())}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/ingest", compressed)
	req.Header.Set("Content-Encoding", "gzip")
	const limit = 64 << 10
	body, err := requestBody(req, "application/json", limit)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, body)
	if !errors.Is(err, errDecodedTooLarge) || n != limit {
		t.Fatalf("read %d decoded bytes, err %v; want exactly %d and errDecodedTooLarge", n, err, limit)
	}
	// 32 MiB of zeros compress about 1000:1 (32 KiB); the limit is 1/512
	// of the decoded size, which the reader passes within its first 4 KiB
	// buffer of compressed bytes.
	if total := int64(zbuf.Len()); compressed.n > 8<<10 || total < 24<<10 {
		t.Errorf("decoding read %d of %d compressed bytes, want at most 8 KiB", compressed.n, total)
	}
}

// checkBatchSize counts samples by the longer of t and v, so a batch
// whose v outgrows t cannot pass the sample limit unseen.
func TestCheckBatchSizeCountsLongerColumn(t *testing.T) {
	cfg := Config{}
	cfg.setDefaults()
	cfg.MaxBatchSamples = 2
	in := ingestBatch{JobID: "x", Series: []ingestSeries{{Resource: "cpu", T: []int64{1}, V: []sampleValue{1, 2, 3}}}}
	err := checkBatchSize(&in, cfg)
	if !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), "3 samples in one batch, at most 2") {
		t.Fatalf("checkBatchSize: %v", err)
	}
}

// writeRequestMemory bounds what unmarshalling allocates, for requests
// heavy in samples, in labels, in empty series and in histogram buckets.
func TestWriteRequestMemoryBoundsUnmarshal(t *testing.T) {
	f := func(name string, req *prompb.WriteRequest) {
		t.Helper()
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		est, err := writeRequestMemory(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		var got prompb.WriteRequest
		if err := got.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		if alloc := int64(ms.TotalAlloc - before); alloc > est || est > 8*alloc {
			t.Errorf("%s: unmarshalling %d bytes allocated %d, estimate %d: want alloc <= estimate <= 8 × alloc", name, len(raw), alloc, est)
		}
	}
	samples := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "m"}}}
	for i := range 20000 {
		samples.Samples = append(samples.Samples, prompb.Sample{Value: float64(i), Timestamp: int64(i)})
	}
	f("samples", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{samples}})
	var manyLabels prompb.TimeSeries
	for i := range 5000 {
		manyLabels.Labels = append(manyLabels.Labels, prompb.Label{Name: fmt.Sprint("l", i), Value: "v"})
	}
	f("labels", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{manyLabels}})
	f("empty series", &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 20000)})
	h := prompb.Histogram{Count: &prompb.Histogram_CountInt{CountInt: 1}, PositiveSpans: []prompb.BucketSpan{{Offset: 0, Length: 5000}}}
	for range 5000 {
		h.PositiveDeltas = append(h.PositiveDeltas, 1)
	}
	f("histogram", &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Histograms: []prompb.Histogram{h, h, h}}}})
}

// A remote-write body within the decoded size whose request would hold
// more than the limit in memory is refused with 413 before unmarshalling.
func TestRemoteWriteRefusesAmplifiedBody(t *testing.T) {
	_, hs, _ := newLimitServer(t, Config{MaxDecodedBytes: 1 << 20})
	raw := bytes.Repeat([]byte{0x0a, 0x00}, 200_000) // 200,000 empty series in 400 kB
	code, got, _ := doPost(t, hs.URL+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)), map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy"})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(got, "decodes to 400000 bytes that would hold about") || !strings.Contains(got, "serve --max-decoded-bytes") {
		t.Fatalf("amplified remote write: %d %s, want 413 naming the memory and --max-decoded-bytes", code, got)
	}
}
