package remote

import (
	"context"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
)

// Appender gathers samples and sends them to the engine in one remote
// write request at Commit: the engine stores the request as it stores
// any remote write (VictoriaMetrics and Prometheus take all of it or,
// refusing it, none), so a Commit that returns nil has every sample in
// the engine. It has the methods of storage.Appender that writes use.
// Not safe for concurrent use.
type Appender struct {
	c      *Client
	ctx    context.Context
	series []prompb.TimeSeries
}

// Appender starts a write; ctx bounds its Commit.
func (c *Client) Appender(ctx context.Context) *Appender {
	return &Appender{c: c, ctx: ctx}
}

// slot returns the series of ls, reusing ref from an earlier call for
// the same labels. Labels with an empty value are left out: to
// Prometheus an empty label is an absent one (VictoriaMetrics drops
// them on write), and Thanos receive drops a whole series that carries
// one ("empty label name or value") while answering the write 200.
func (a *Appender) slot(ref storage.SeriesRef, ls labels.Labels) (storage.SeriesRef, *prompb.TimeSeries) {
	if ref > 0 && int(ref) <= len(a.series) {
		return ref, &a.series[ref-1]
	}
	pls := make([]prompb.Label, 0, ls.Len())
	ls.Range(func(l labels.Label) {
		if l.Value != "" {
			pls = append(pls, prompb.Label{Name: l.Name, Value: l.Value})
		}
	})
	a.series = append(a.series, prompb.TimeSeries{Labels: pls})
	return storage.SeriesRef(len(a.series)), &a.series[len(a.series)-1]
}

// Append adds a float sample; ref is the one an earlier Append of the
// same labels returned (0 the first time).
func (a *Appender) Append(ref storage.SeriesRef, ls labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	ref, s := a.slot(ref, ls)
	s.Samples = append(s.Samples, prompb.Sample{Timestamp: t, Value: v})
	return ref, nil
}

// AppendHistogram adds a native-histogram sample (h or fh).
func (a *Appender) AppendHistogram(ref storage.SeriesRef, ls labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	ref, s := a.slot(ref, ls)
	if h != nil {
		s.Histograms = append(s.Histograms, prompb.FromIntHistogram(t, h))
	} else {
		s.Histograms = append(s.Histograms, prompb.FromFloatHistogram(t, fh))
	}
	return ref, nil
}

// Commit sends what was appended (see Client.Write).
func (a *Appender) Commit() error {
	err := a.c.Write(a.ctx, a.series)
	a.series = nil
	return err
}

// Rollback forgets what was appended: nothing was sent yet.
func (a *Appender) Rollback() error {
	a.series = nil
	return nil
}
