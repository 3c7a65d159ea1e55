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
	"time"

	"github.com/golang/snappy"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"

	"github.com/peakline/peakline/tsdb"
)

// Prometheus remote write 1.0 in: a snappy-compressed (block format)
// protobuf prompb.WriteRequest. Its errors are Peakline's ({"error"}),
// which remote-write senders log as they are.

// maxAhead is how far in the future a sample may be, as in Prometheus.
const maxAhead = 10 * time.Minute

// A snappy block expands at most 64 bytes per 3: its densest element, a
// 3-byte copy, writes 64 bytes. A body whose header claims more is
// corrupt, and is refused before anything is allocated.
const snappyCopyIn, snappyCopyOut = 3, 64

// Reasons a remote-written sample is refused (the reason label of
// peakline_remote_write_rejected_samples_total).
const (
	rejectInvalidLabels   = "invalid_labels"
	rejectPeaklineLabels  = "invalid_peakline_labels"
	rejectTooFarInFuture  = "too_far_in_future"
	rejectOutOfOrder      = "out_of_order"
	rejectOutOfBounds     = "out_of_bounds"
	rejectTooOld          = "too_old"
	rejectDuplicate       = "duplicate_timestamp"
	rejectInvalidHistogam = "invalid_histogram"
)

// remoteWrite answers POST /prometheus/api/v1/write and /api/v1/write.
//
// Every sample is appended on its own; those the store refuses
// (out-of-order, too old, a second value at a stored time, too far in the
// future, bad labels) are counted by reason and logged, and never keep the
// rest of the batch out. The answer is 204 once the batch is in the
// write-ahead log, or 400 listing the counts when nothing could be stored
// (a sender must not retry such a batch). Unlike Prometheus' own receiver,
// which refuses a whole batch on its first out-of-order sample, this lets
// a batch of an old job with a few overlapping samples land.
func (a *promAPI) remoteWrite(c echo.Context) error {
	r := c.Request()
	if err := checkRemoteWriteHeaders(r.Header); err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he // over --max-body-bytes
		}
		return badRequest("body: read: %v", err)
	}
	req, err := decodeWriteRequest(body, a.s.cfg.MaxDecodedBytes)
	if err != nil {
		return err
	}
	st, err := a.appendWrite(r, req)
	if err != nil {
		return err
	}
	a.rw.samples.Add(float64(st.stored))
	a.s.metrics.ingestedSamples.Add(float64(st.stored))
	for reason, n := range st.rejected {
		a.rw.rejected.WithLabelValues(reason).Add(float64(n))
	}
	if len(st.rejected) > 0 {
		a.s.logger.Warn("remote write: samples refused", "stored", st.stored, "refused", st.rejectedText())
		if st.stored == 0 {
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
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return nil, badRequest("body: is not snappy-compressed (block format): %v", err)
	}
	switch {
	case int64(n) > maxDecoded:
		return nil, fmt.Errorf("%w: body: decodes to %d bytes, more than the %d allowed; send smaller batches", errTooLarge, n, maxDecoded)
	case int64(n)*snappyCopyIn > int64(len(body))*snappyCopyOut+snappyCopyIn*64:
		return nil, badRequest("body: is corrupt snappy: its header claims %d bytes, more than %d compressed bytes can hold", n, len(body))
	}
	buf, err := snappy.Decode(make([]byte, n), body)
	if err != nil {
		return nil, badRequest("body: is not snappy-compressed (block format): %v", err)
	}
	held, err := writeRequestMemory(buf)
	if err != nil {
		return nil, badRequest("body: is not a Prometheus remote write request (prompb.WriteRequest): %v", err)
	}
	if held > maxDecoded {
		return nil, fmt.Errorf("%w: body: decodes to %d bytes that would hold about %d bytes in memory, more than the %d allowed (serve --max-decoded-bytes); send smaller batches", errTooLarge, n, held, maxDecoded)
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(buf); err != nil {
		return nil, badRequest("body: is not a Prometheus remote write request (prompb.WriteRequest): %v", err)
	}
	return &req, nil
}

// writeStats counts what a remote-write batch did.
type writeStats struct {
	total    int            // samples and histogram samples received
	stored   int            // of which appended
	rejected map[string]int // of which refused, by reason
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

// appendWrite appends a decoded batch in one transaction and refreshes
// the summaries of the jobs it touched.
func (a *promAPI) appendWrite(r *http.Request, req *prompb.WriteRequest) (writeStats, error) {
	var st writeStats
	maxT := a.cfg.Now().Add(maxAhead).UnixMilli()
	app := a.s.store.Appendable().Appender(r.Context())
	jobs := map[string]struct{}{}
	b := labels.NewScratchBuilder(0)
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		n := len(ts.Samples) + len(ts.Histograms)
		st.total += n
		ls := ts.ToLabels(&b, nil)
		if reason := checkSeriesLabels(ls); reason != "" {
			st.reject(reason, n)
			continue
		}
		stored := st.stored
		var ref storage.SeriesRef
		for _, s := range ts.Samples {
			if s.Timestamp > maxT {
				st.reject(rejectTooFarInFuture, 1)
				continue
			}
			var err error
			ref, err = app.Append(ref, ls, s.Timestamp, s.Value)
			if err := st.count(err); err != nil {
				_ = app.Rollback()
				return writeStats{}, fmt.Errorf("append sample of %s at %d: %w", ls, s.Timestamp, err)
			}
		}
		for _, h := range ts.Histograms {
			if h.Timestamp > maxT {
				st.reject(rejectTooFarInFuture, 1)
				continue
			}
			var err error
			if h.IsFloatHistogram() {
				ref, err = app.AppendHistogram(ref, ls, h.Timestamp, nil, h.ToFloatHistogram())
			} else {
				ref, err = app.AppendHistogram(ref, ls, h.Timestamp, h.ToIntHistogram(), nil)
			}
			if err := st.count(err); err != nil {
				_ = app.Rollback()
				return writeStats{}, fmt.Errorf("append histogram of %s at %d: %w", ls, h.Timestamp, err)
			}
		}
		if st.stored > stored {
			if job := ls.Get(tsdb.LabelJob); job != "" {
				jobs[job] = struct{}{}
			}
		}
	}
	if err := app.Commit(); err != nil {
		return writeStats{}, fmt.Errorf("commit remote write batch: %w", err)
	}
	for job := range jobs {
		a.s.store.Invalidate(job)
	}
	for _, m := range req.Metadata {
		if m.MetricFamilyName != "" {
			a.meta.put(m.MetricFamilyName, metadataEntry{Type: strings.ToLower(m.Type.String()), Help: m.Help, Unit: m.Unit})
		}
	}
	return st, nil
}

// count records the outcome of one append: stored, refused for a reason
// the sender must hear of, or (returned) a fault of the store.
func (st *writeStats) count(err error) error {
	var reason string
	switch {
	case err == nil:
		st.stored++
		return nil
	case errors.Is(err, storage.ErrOutOfOrderSample):
		reason = rejectOutOfOrder
	case errors.Is(err, storage.ErrOutOfBounds):
		reason = rejectOutOfBounds
	case errors.Is(err, storage.ErrTooOldSample):
		reason = rejectTooOld
	case errors.Is(err, storage.ErrDuplicateSampleForTimestamp):
		reason = rejectDuplicate
	default:
		var he histogram.Error
		if !errors.As(err, &he) {
			return err
		}
		reason = rejectInvalidHistogam
	}
	st.reject(reason, 1)
	return nil
}

// checkSeriesLabels returns why a series' labels are refused, or "".
// Series of the Peakline schema must also carry the labels the job graph
// reads (a decimal counter), or one bad series would break its job.
func checkSeriesLabels(ls labels.Labels) string {
	if !ls.Has(labels.MetricName) || !ls.IsValid(model.UTF8Validation) {
		return rejectInvalidLabels
	}
	if _, dup := ls.HasDuplicateLabelNames(); dup {
		return rejectInvalidLabels
	}
	switch ls.Get(labels.MetricName) {
	case tsdb.MetricCPU, tsdb.MetricMemory, tsdb.MetricPIDs, tsdb.MetricTaskStart:
		job := ls.Get(tsdb.LabelJob)
		if job == "" || len(job) > tsdb.MaxJobIDLen ||
			len(ls.Get(tsdb.LabelTaskUUID)) > tsdb.MaxUUIDLen || len(ls.Get(tsdb.LabelTask)) > tsdb.MaxTaskNameLen {
			return rejectPeaklineLabels
		}
		if c, err := strconv.ParseInt(ls.Get(tsdb.LabelCounter), 10, 64); err != nil || c < 0 {
			return rejectPeaklineLabels
		}
	case tsdb.MetricLastEvent:
		if job := ls.Get(tsdb.LabelJob); job == "" || len(job) > tsdb.MaxJobIDLen {
			return rejectPeaklineLabels
		}
	}
	return ""
}
