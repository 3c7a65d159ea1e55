package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/tsdb"
)

var (
	errTooLarge         = errors.New("request too large")
	errUnsupportedMedia = errors.New("unsupported media type")
)

// ingestBatch is the JSON ingest document (docs/CONTRACTS.md) as the
// server decodes it; collectors encode it with types of their own
// (collector/ship). testdata/batch.golden.json, the same bytes as
// collector/ship's, pins what it decodes to (ingest_golden_test.go). A new
// field goes here, into the fast reader (decodeBatchFast), toBatch and
// the golden file.
type ingestBatch struct {
	JobID     string         `json:"job_id"`
	Tasks     []ingestTask   `json:"tasks"`
	LastEvent *ingestEvent   `json:"last_event"`
	Series    []ingestSeries `json:"series"`
	// The job's template and AWX identity (tsdb.JobInfo); each optional.
	TemplateID   string `json:"template_id"`
	TemplateName string `json:"template_name"`
	Status       string `json:"status"`
	Playbook     string `json:"playbook"`
	Measured     string `json:"measured"` // "cgroup", "process-tree" or ""
	// What sizes the job (tsdb.JobInfo's Forks …); 0 or "" unknown.
	Forks            int64  `json:"forks"`
	Hosts            int64  `json:"hosts"`
	MemoryLimitBytes int64  `json:"memory_limit_bytes"`
	OOMKills         int64  `json:"oom_kills"`
	OOMCounter       int64  `json:"oom_counter"`
	ProjectRevision  string `json:"project_revision"`
	EEImage          string `json:"ee_image"`
}

type ingestTask struct {
	Counter int64  `json:"counter"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Start   int64  `json:"start"`
	Play    string `json:"play"`
	Role    string `json:"role"`
	Path    string `json:"task_path"`
}

type ingestEvent struct {
	Counter int64 `json:"counter"`
	Time    int64 `json:"time"`
}

type ingestSeries struct {
	Resource string        `json:"resource"`
	Counter  int64         `json:"counter"`
	UUID     string        `json:"uuid"`
	Task     string        `json:"task"`
	T        []int64       `json:"t"`
	V        []sampleValue `json:"v"`
}

// sampleValue is one value of a series' "v": a JSON number. encoding/json
// would decode null into a float64 as 0, storing a value nobody sent.
type sampleValue float64

func (v *sampleValue) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errNullValue
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("must be a number, got %s", b)
	}
	*v = sampleValue(f)
	return nil
}

var errNullValue = errors.New("must be a number, got null")

// sampleValues is vs as float64s: the same memory, no copy.
func sampleValues(vs []sampleValue) []float64 {
	if len(vs) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&vs[0])), len(vs))
}

// asSampleValues is vs as sampleValues: the same memory, no copy.
func asSampleValues(vs []float64) []sampleValue {
	if len(vs) == 0 {
		return nil
	}
	return unsafe.Slice((*sampleValue)(unsafe.Pointer(&vs[0])), len(vs))
}

// ingestAnswer acknowledges a batch once it is in the write-ahead log.
type ingestAnswer struct {
	JobID      string `json:"job_id"`
	Samples    int    `json:"samples"`
	Tasks      int    `json:"tasks"`
	Duplicates int    `json:"duplicates"`
	Conflicts  int    `json:"conflicts"`
}

// ingest answers POST /api/v1/ingest.
func (s *Server) ingest(c echo.Context) error {
	body, err := requestBody(c.Request(), "application/json", s.cfg.MaxDecodedBytes)
	if err != nil {
		return err
	}
	defer body.Close()
	jobID, res, err := s.ingestJSON(c.Request().Context(), body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ingestAnswer{JobID: jobID, Samples: res.Samples, Tasks: res.Tasks, Duplicates: res.Duplicates, Conflicts: res.Conflicts})
}

// Ingest stores one JSON ingest batch (the body of POST /api/v1/ingest,
// not compressed) as the API does: the same decoding, limits and store
// write. import --data uses it, so that a tree imported into a store
// directory takes the path of one posted to a server.
func (s *Server) Ingest(ctx context.Context, body io.Reader) (tsdb.AppendResult, error) {
	_, res, err := s.ingestJSON(ctx, &limitedBody{r: io.NopCloser(body), left: s.cfg.MaxDecodedBytes})
	return res, err
}

// MaxBatchSamples is the most samples Ingest takes in one batch
// (Config.MaxBatchSamples).
func (s *Server) MaxBatchSamples() int { return s.cfg.MaxBatchSamples }

// ingestJSON decodes a batch from body (already bounded), checks its size
// and stores it.
func (s *Server) ingestJSON(ctx context.Context, body io.Reader) (string, tsdb.AppendResult, error) {
	var in ingestBatch
	wb := s.docs.get()
	defer s.docs.put(wb)
	if err := decodeBatch(body, &in, s.cfg.MaxDecodedBytes, wb); err != nil {
		return "", tsdb.AppendResult{}, err
	}
	if err := checkBatchSize(&in, s.cfg); err != nil {
		return "", tsdb.AppendResult{}, err
	}
	res, err := s.store.Append(ctx, toBatch(&in))
	if err != nil {
		return "", tsdb.AppendResult{}, err
	}
	s.metrics.ingestedSamples.Add(float64(res.Samples))
	s.metrics.ingestedDups.Add(float64(res.Duplicates))
	return in.JobID, res, nil
}

// decodeBatch decodes one batch from body into in, reading the body into
// wb's memory (in keeps none of it): by the fast reader (ingest_decode.go)
// when it takes the whole body, else by encoding/json, which reads the
// same bytes and the same read error, if any, after them.
func decodeBatch(body io.Reader, in *ingestBatch, limit int64, wb *writeBuf) error {
	doc, readErr := readBody(body, 0, wb.body[:0])
	wb.body = doc
	if readErr == nil && decodeBatchFast(doc, in, wb) {
		return nil
	}
	*in = ingestBatch{}
	var r io.Reader = bytes.NewReader(doc)
	if readErr != nil {
		r = io.MultiReader(r, errReader{readErr})
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return jsonError(err, limit)
	}
	// Only white space may follow the batch. (dec.More is false before a
	// stray '}' or ']', so it cannot tell.)
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if errors.Is(err, errDecodedTooLarge) {
			return jsonError(err, limit)
		}
		return badRequest("body: must hold one JSON object, found more after it")
	}
	return nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// checkBatchSize refuses a batch whose series, tasks or samples pass the
// configured limits, before the store does any work for it. The decoded
// size (--max-decoded-bytes) already bounded what decoding it held.
func checkBatchSize(in *ingestBatch, cfg Config) error {
	if n := len(in.Series); n > cfg.MaxBatchSeries {
		return fmt.Errorf("%w: series: %d series in one batch, at most %d allowed (serve --max-batch-series); split the batch", errTooLarge, n, cfg.MaxBatchSeries)
	}
	if n := len(in.Tasks); n > cfg.MaxBatchTasks {
		return fmt.Errorf("%w: tasks: %d tasks in one batch, at most %d allowed (serve --max-batch-tasks); split the batch", errTooLarge, n, cfg.MaxBatchTasks)
	}
	total := 0
	for _, sr := range in.Series {
		total += max(len(sr.T), len(sr.V))
	}
	if total > cfg.MaxBatchSamples {
		return fmt.Errorf("%w: series: %d samples in one batch, at most %d allowed (serve --max-batch-samples); split the batch", errTooLarge, total, cfg.MaxBatchSamples)
	}
	return nil
}

func toBatch(in *ingestBatch) *tsdb.Batch {
	// A number goes to the store as its decimal text (0: unknown); the
	// store refuses a negative one, naming the field.
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	b := &tsdb.Batch{JobID: in.JobID, Info: tsdb.JobInfo{TemplateID: in.TemplateID, TemplateName: in.TemplateName, Status: in.Status, Playbook: in.Playbook, Measured: in.Measured,
		Forks: num(in.Forks), Hosts: num(in.Hosts), MemoryLimit: num(in.MemoryLimitBytes), OOMKills: num(in.OOMKills), OOMCounter: num(in.OOMCounter),
		ProjectRevision: in.ProjectRevision, EEImage: in.EEImage}}
	for _, t := range in.Tasks {
		b.Tasks = append(b.Tasks, tsdb.Task{Counter: t.Counter, UUID: t.UUID, Name: t.Name, StartMs: t.Start, Play: t.Play, Role: t.Role, Path: t.Path})
	}
	if e := in.LastEvent; e != nil {
		b.LastEvent = &tsdb.Event{Counter: e.Counter, TimeMs: e.Time}
	}
	for _, sr := range in.Series {
		b.Series = append(b.Series, tsdb.SeriesData{Resource: sr.Resource, Counter: sr.Counter, UUID: sr.UUID, Task: sr.Task, Ts: sr.T, Vs: sampleValues(sr.V)})
	}
	return b
}

// requestBody checks the media type and returns the body decompressed
// (gzip when Content-Encoding says so) and bounded to limit bytes. The
// bound applies to the decoded stream as it is read: a small gzip body
// that inflates past limit fails at limit+1 decoded bytes, having held
// no more than the reader's buffer of them.
func requestBody(r *http.Request, mediaType string, limit int64) (io.ReadCloser, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != mediaType {
			return nil, fmt.Errorf("%w: Content-Type must be %s, got %q", errUnsupportedMedia, mediaType, ct)
		}
	}
	var rc io.ReadCloser = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := newGzipReader(r.Body)
		if err != nil {
			return nil, badRequest("body: Content-Encoding is gzip but the body is not: %v", err)
		}
		rc = zr
	default:
		return nil, fmt.Errorf("%w: Content-Encoding must be gzip or identity, got %q", errUnsupportedMedia, enc)
	}
	return &limitedBody{r: rc, left: limit}, nil
}

// gzipReaders are gzip readers to reuse: each holds a decompressor's
// tables and window, tens of KB a request would allocate anew.
var gzipReaders sync.Pool

// pooledGzip is a gzip reader that goes back to gzipReaders on its
// first Close; it reads nothing after.
type pooledGzip struct{ zr *gzip.Reader }

// newGzipReader returns a gzip reader of r, reused when one is free.
func newGzipReader(r io.Reader) (io.ReadCloser, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	if zr == nil {
		zr = new(gzip.Reader)
	}
	if err := zr.Reset(r); err != nil {
		gzipReaders.Put(zr)
		return nil, err
	}
	return &pooledGzip{zr}, nil
}

func (z *pooledGzip) Read(p []byte) (int, error) {
	if z.zr == nil {
		return 0, errors.New("read of a closed gzip body")
	}
	return z.zr.Read(p)
}

func (z *pooledGzip) Close() error {
	if z.zr == nil {
		return nil
	}
	err := z.zr.Close()
	gzipReaders.Put(z.zr)
	z.zr = nil
	return err
}

// limitedBody fails a read past its limit instead of truncating quietly.
type limitedBody struct {
	r    io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errDecodedTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.r.Close() }

var errDecodedTooLarge = errors.New("decoded body exceeds the limit")

// jsonError turns a decoding error into a client error naming the field.
func jsonError(err error, limit int64) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.Is(err, errDecodedTooLarge):
		return fmt.Errorf("%w: body: decoded size exceeds %d bytes; split the batch", errTooLarge, limit)
	case errors.As(err, &te):
		return badRequest("%s: must be %s, got JSON %s", te.Field, te.Type, te.Value)
	case errors.As(err, &se):
		return badRequest("body: invalid JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.EOF):
		return badRequest("body: is empty, want a JSON batch")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body: JSON ends early")
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: body: more than %d bytes", errTooLarge, mbe.Limit)
	}
	if strings.HasPrefix(err.Error(), "json: unknown field") {
		return badRequest("body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return badRequest("body: %v", err)
}
