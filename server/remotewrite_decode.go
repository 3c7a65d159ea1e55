package server

import (
	"errors"
	"math"
	"sync"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/peakline/peakline/tsdb"
)

// Decoding a remote-write request into prompb.WriteRequest and then into
// the store's series copied every label twice (as strings of the request,
// then into the label set) and every sample twice, and grew each series'
// samples by append: a fifth of a remote write's server CPU. The common
// request (series of labels and float samples, histograms, metadata) is
// read here straight from the wire into the store's series, the samples
// into columns reused across requests; anything else in a request
// (exemplars, unknown or reserved fields, an encoding this reader does
// not take) sends the whole request through prompb's own decoder, so
// refusals and odd encodings are prompb's. FuzzRemoteWriteFastDecode
// checks both ways give the same series.

// writeBatch is a decoded remote-write request, ready for the store.
type writeBatch struct {
	series   []tsdb.LabeledSeries
	metadata []prompb.MetricMetadata
	total    int // float and histogram samples
}

// writeBuffers pools the memory a remote-write request needs only until
// it is answered: the body, its snappy-decoded bytes and the sample
// columns. Safe for concurrent use.
type writeBuffers struct{ pool sync.Pool }

// writeBuf is one request's memory. The store keeps none of it
// (tsdb.LabeledSeries: "the store does not keep the slices").
type writeBuf struct {
	body, raw []byte
	ts        []int64
	vs        []float64
	series    []tsdb.LabeledSeries
}

// maxPooledBytes is the largest buffer put back in the pool: a request
// far larger than usual does not pin its memory.
const maxPooledBytes = 16 << 20

func (p *writeBuffers) get() *writeBuf {
	if wb, ok := p.pool.Get().(*writeBuf); ok {
		return wb
	}
	return &writeBuf{}
}

func (p *writeBuffers) put(wb *writeBuf) {
	if cap(wb.body) > maxPooledBytes || cap(wb.raw) > maxPooledBytes || 8*cap(wb.ts) > maxPooledBytes {
		return
	}
	clear(wb.series[:cap(wb.series)]) // drop the label sets and histograms
	wb.body, wb.raw, wb.ts, wb.vs, wb.series = wb.body[:0], wb.raw[:0], wb.ts[:0], wb.vs[:0], wb.series[:0]
	p.pool.Put(wb)
}

// errNotFast says the request holds what the fast reader leaves to prompb.
var errNotFast = errors.New("not a request the fast reader takes")

// decodeFast reads a decoded (not compressed) remote-write request into
// wb's columns. It fails with errNotFast on anything but the plain
// encoding of series of labels, samples and histograms, and metadata.
func decodeFast(buf []byte, wb *writeBuf, b *labels.ScratchBuilder) (*writeBatch, error) {
	wr := &writeBatch{}
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 || typ != protowire.BytesType {
			return nil, errNotFast
		}
		buf = buf[n:]
		v, n := protowire.ConsumeBytes(buf)
		if n < 0 {
			return nil, errNotFast
		}
		buf = buf[n:]
		switch num {
		case 1:
			sr, err := decodeSeriesFast(v, wb, b)
			if err != nil {
				return nil, err
			}
			wr.total += len(sr.Ts) + len(sr.Hs)
			wb.series = append(wb.series, sr)
		case 3:
			var m prompb.MetricMetadata
			if err := m.Unmarshal(v); err != nil {
				return nil, errNotFast
			}
			wr.metadata = append(wr.metadata, m)
		default:
			return nil, errNotFast
		}
	}
	wr.series = wb.series
	return wr, nil
}

// decodeSeriesFast reads one prompb.TimeSeries: its labels into b (then
// one label set), its samples onto the ends of wb's columns.
func decodeSeriesFast(buf []byte, wb *writeBuf, b *labels.ScratchBuilder) (tsdb.LabeledSeries, error) {
	var sr tsdb.LabeledSeries
	b.Reset()
	from := len(wb.ts)
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 || typ != protowire.BytesType {
			return sr, errNotFast
		}
		buf = buf[n:]
		v, n := protowire.ConsumeBytes(buf)
		if n < 0 {
			return sr, errNotFast
		}
		buf = buf[n:]
		switch num {
		case 1:
			name, value, ok := decodeLabelFast(v)
			if !ok {
				return sr, errNotFast
			}
			// The builder copies both into the label set it makes.
			b.Add(yoloString(name), yoloString(value))
		case 2:
			t, val, ok := decodeSampleFast(v)
			if !ok {
				return sr, errNotFast
			}
			wb.ts, wb.vs = append(wb.ts, t), append(wb.vs, val)
		case 4:
			var h prompb.Histogram
			if err := h.Unmarshal(v); err != nil {
				return sr, errNotFast
			}
			hs := tsdb.HistogramSample{T: h.Timestamp}
			if h.IsFloatHistogram() {
				hs.FH = h.ToFloatHistogram()
			} else {
				hs.H = h.ToIntHistogram()
			}
			sr.Hs = append(sr.Hs, hs)
		default: // exemplars (3), unknown fields
			return sr, errNotFast
		}
	}
	b.Sort()
	sr.Labels = b.Labels()
	sr.Ts, sr.Vs = wb.ts[from:len(wb.ts):len(wb.ts)], wb.vs[from:len(wb.vs):len(wb.vs)]
	return sr, nil
}

// decodeLabelFast reads a prompb.Label: name (1) and value (2), bytes.
func decodeLabelFast(buf []byte) (name, value []byte, ok bool) {
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return nil, nil, false
		}
		buf = buf[n:]
		v, n := protowire.ConsumeBytes(buf)
		if n < 0 {
			return nil, nil, false
		}
		buf = buf[n:]
		if num == 1 {
			name = v
		} else {
			value = v
		}
	}
	return name, value, true
}

// decodeSampleFast reads a prompb.Sample: value (1, fixed64) and
// timestamp (2, varint). The last of a repeated field counts, as in
// prompb.
func decodeSampleFast(buf []byte) (t int64, v float64, ok bool) {
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return 0, 0, false
		}
		buf = buf[n:]
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(buf)
			if n < 0 {
				return 0, 0, false
			}
			v, buf = math.Float64frombits(x), buf[n:]
		case num == 2 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(buf)
			if n < 0 {
				return 0, 0, false
			}
			t, buf = int64(x), buf[n:]
		default:
			return 0, 0, false
		}
	}
	return t, v, true
}

// yoloString views b as a string without copying; the caller must not
// keep it past b's life (here: the builder copies it at once).
func yoloString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// batchOf converts a request decoded by prompb as the fast reader would
// have read it, into wb.
func batchOf(req *prompb.WriteRequest, wb *writeBuf, b *labels.ScratchBuilder) *writeBatch {
	wr := &writeBatch{metadata: req.Metadata}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		wr.total += len(ts.Samples) + len(ts.Histograms)
		from := len(wb.ts)
		for _, smp := range ts.Samples {
			wb.ts, wb.vs = append(wb.ts, smp.Timestamp), append(wb.vs, smp.Value)
		}
		sr := tsdb.LabeledSeries{Labels: ts.ToLabels(b, nil), Ts: wb.ts[from:len(wb.ts):len(wb.ts)], Vs: wb.vs[from:len(wb.vs):len(wb.vs)]}
		for _, h := range ts.Histograms {
			hs := tsdb.HistogramSample{T: h.Timestamp}
			if h.IsFloatHistogram() {
				hs.FH = h.ToFloatHistogram()
			} else {
				hs.H = h.ToIntHistogram()
			}
			sr.Hs = append(sr.Hs, hs)
		}
		wb.series = append(wb.series, sr)
	}
	wr.series = wb.series
	return wr
}
