package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/golang/snappy"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/tsdb"
)

// Prometheus remote write 1.0 in: a snappy-compressed (block format)
// protobuf prompb.WriteRequest. Its errors are Peakline's ({"error"}),
// which remote-write senders log as they are.

// A snappy block expands at most 64 bytes per 3: its densest element, a
// 3-byte copy, writes 64 bytes. A body whose header claims more is
// corrupt, and is refused before anything is allocated.
const snappyCopyIn, snappyCopyOut = 3, 64

// Reasons a remote-written sample is refused (the reason label of
// peakline_remote_write_rejected_samples_total) are the store's
// (tsdb.Reason*), and staleness markers of Peakline series, which are
// dropped: their series hold finite values only.
const rejectStale = "stale_marker"

// remoteWrite answers POST /prometheus/api/v1/write and /api/v1/write.
//
// A batch goes through the store's one write path: a series with bad
// labels or a sample outside the admission window (too old, too far
// ahead, not in milliseconds, a non-finite value in a Peakline series)
// refuses the whole batch with 400 naming the series, sample and value,
// and nothing of it is stored (a sender must not retry a 400). Otherwise
// the answer is 204 once the batch is in the write-ahead log; samples
// already stored are skipped (another value at a stored time keeps the
// stored one, counted as duplicate_timestamp), so a retried batch is
// harmless. A batch of which nothing new could be stored because every
// sample conflicts is a 400 listing the counts.
func (a *promAPI) remoteWrite(c echo.Context) error {
	r := c.Request()
	if err := checkRemoteWriteHeaders(r.Header); err != nil {
		return err
	}
	wb := a.bufs.get()
	defer a.bufs.put(wb)
	body, err := readBody(r.Body, r.ContentLength, wb.body[:0])
	wb.body = body
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he // over --max-body-bytes
		}
		return badRequest("body: read: %v", err)
	}
	wr, err := decodeWrite(body, a.s.cfg.MaxDecodedBytes, wb)
	if err != nil {
		return err
	}
	st, err := a.appendWrite(r, wr)
	if err != nil {
		return err
	}
	a.rw.samples.Add(float64(st.stored))
	a.s.metrics.ingestedSamples.Add(float64(st.stored))
	a.s.metrics.ingestedDups.Add(float64(st.duplicates))
	for reason, n := range st.rejected {
		a.rw.rejected.WithLabelValues(reason).Add(float64(n))
	}
	if len(st.rejected) > 0 {
		a.s.logger.Warn("remote write: samples refused", "stored", st.stored, "refused", st.rejectedText())
		if st.stored == 0 && st.rejected[tsdb.ReasonDuplicate] > 0 {
			return badRequest("stored none of the %d samples: %s", st.total, st.rejectedText())
		}
	}
	return c.NoContent(http.StatusNoContent)
}

// checkRemoteWriteHeaders accepts remote write 1.0: Content-Encoding
// snappy and Content-Type application/x-protobuf (either may be absent,
// as Prometheus allows).
func checkRemoteWriteHeaders(h http.Header) error {
	if enc := strings.TrimSpace(h.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "snappy") {
		return fmt.Errorf("%w: Content-Encoding must be snappy (Prometheus remote write 1.0), got %q", errUnsupportedMedia, enc)
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/x-protobuf" {
		return fmt.Errorf("%w: Content-Type must be application/x-protobuf (Prometheus remote write 1.0), got %q", errUnsupportedMedia, ct)
	}
	if p, ok := params["proto"]; ok && p != "prometheus.WriteRequest" {
		return fmt.Errorf("%w: Content-Type: proto=%s is not accepted; send prometheus.WriteRequest (remote write 1.0)", errUnsupportedMedia, p)
	}
	return nil
}

// decodeWriteRequest decompresses and decodes a remote-write body,
// checking the decoded length against maxDecoded before allocating, and
// the memory the decoded request will hold (writeRequestMemory) against
// maxDecoded before unmarshalling it: a protobuf element of a few bytes
// becomes a struct of tens, so a body within the size limit could
// otherwise hold many times it.
func decodeWriteRequest(body []byte, maxDecoded int64) (*prompb.WriteRequest, error) {
	buf, err := decompressWrite(body, maxDecoded, nil)
	if err != nil {
		return nil, err
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(buf); err != nil {
		return nil, badRequest("body: is not a Prometheus remote write request (prompb.WriteRequest): %v", err)
	}
	return &req, nil
}

// decodeWrite is decodeWriteRequest into the store's series, in wb's
// memory: the fast reader's (remotewrite_decode.go), or prompb's for a
// request it leaves.
func decodeWrite(body []byte, maxDecoded int64, wb *writeBuf) (*writeBatch, error) {
	buf, err := decompressWrite(body, maxDecoded, wb.raw[:0])
	wb.raw = buf
	if err != nil {
		return nil, err
	}
	b := labels.NewScratchBuilder(8)
	wr, err := decodeFast(buf, wb, &b)
	if err == nil {
		return wr, nil
	}
	wb.ts, wb.vs, wb.series = wb.ts[:0], wb.vs[:0], wb.series[:0]
	var req prompb.WriteRequest
	if err := req.Unmarshal(buf); err != nil {
		return nil, badRequest("body: is not a Prometheus remote write request (prompb.WriteRequest): %v", err)
	}
	return batchOf(&req, wb, &b), nil
}

// decompressWrite checks a remote-write body's decoded size and memory
// (see decodeWriteRequest) and decodes it into dst's memory when it is
// large enough.
func decompressWrite(body []byte, maxDecoded int64, dst []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return dst, badRequest("body: is not snappy-compressed (block format): %v", err)
	}
	switch {
	case int64(n) > maxDecoded:
		return dst, fmt.Errorf("%w: body: decodes to %d bytes, more than the %d allowed; send smaller batches", errTooLarge, n, maxDecoded)
	case int64(n)*snappyCopyIn > int64(len(body))*snappyCopyOut+snappyCopyIn*64:
		return dst, badRequest("body: is corrupt snappy: its header claims %d bytes, more than %d compressed bytes can hold", n, len(body))
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	buf, err := snappy.Decode(dst[:n], body)
	if err != nil {
		return dst, badRequest("body: is not snappy-compressed (block format): %v", err)
	}
	held, err := writeRequestMemory(buf)
	if err != nil {
		return buf, badRequest("body: is not a Prometheus remote write request (prompb.WriteRequest): %v", err)
	}
	if held > maxDecoded {
		return buf, fmt.Errorf("%w: body: decodes to %d bytes that would hold about %d bytes in memory, more than the %d allowed (serve --max-decoded-bytes); send smaller batches", errTooLarge, n, held, maxDecoded)
	}
	return buf, nil
}

// readBody reads a request body into dst's memory, sized up front from
// the request's Content-Length (which the body limit has checked).
func readBody(body io.Reader, size int64, dst []byte) ([]byte, error) {
	if size > 0 && int64(cap(dst)) <= size {
		dst = make([]byte, 0, min(size, maxPooledBytes)+1)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := body.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if errors.Is(err, io.EOF) {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// writeStats counts what a remote-write batch did.
type writeStats struct {
	total      int            // samples and histogram samples received
	stored     int            // of which appended
	duplicates int            // of which already stored with the same value
	rejected   map[string]int // of which refused, by reason
}

func (st *writeStats) reject(reason string, n int) {
	if n == 0 {
		return
	}
	if st.rejected == nil {
		st.rejected = map[string]int{}
	}
	st.rejected[reason] += n
}

// rejectedText lists the refusals, e.g. "2 duplicate_timestamp, 1 too_old".
func (st *writeStats) rejectedText() string {
	reasons := make([]string, 0, len(st.rejected))
	for r := range st.rejected {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = strconv.Itoa(st.rejected[r]) + " " + r
	}
	return strings.Join(parts, ", ")
}

// appendWrite stores a decoded batch through the store's one write path
// (Store.AppendSeries: admission, duplicate rule, job locks, cache) and
// counts what it did.
func (a *promAPI) appendWrite(r *http.Request, req *writeBatch) (writeStats, error) {
	st := writeStats{total: req.total}
	res, err := a.s.store.AppendSeries(r.Context(), req.series)
	if err != nil {
		// A refused batch is refused whole: all its samples count
		// under the reason that refused it.
		var ref *tsdb.Refusal
		if errors.As(err, &ref) {
			st.reject(ref.Reason, st.total)
			a.rw.rejected.WithLabelValues(ref.Reason).Add(float64(st.total))
		}
		return writeStats{}, err
	}
	st.stored = res.Samples + res.Records + res.Histograms
	st.duplicates = res.Duplicates
	st.reject(tsdb.ReasonDuplicate, res.Conflicts)
	st.reject(rejectStale, res.Stale)
	for _, m := range req.metadata {
		if m.MetricFamilyName != "" {
			a.meta.put(m.MetricFamilyName, metadataEntry{Type: strings.ToLower(m.Type.String()), Help: m.Help, Unit: m.Unit})
		}
	}
	return st, nil
}
