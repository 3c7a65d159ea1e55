package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// Reads. Raw samples come from VictoriaMetrics' /api/v1/export where the
// engine answers it (one streaming request, no query limits), else from
// an instant query of a range selector, SEL[Dms] at the window's end:
// range selectors leave out their left edge, so D is one millisecond
// more than the window. A window the engine refuses as too large is
// split in halves until it passes (down to minWindowMs).

// minWindowMs is the smallest window a read is split into. A job sampled
// every 50ms with a few series per resource already passes a small
// --query.max-samples in a second, so the split goes down to one
// millisecond: it costs requests only when the engine refuses.
const minWindowMs = 1

// Querier returns a querier of [mintMs, maxtMs]. The engine is asked at
// Select time; no connection is held open. What its reads return holds
// a share of the memory budget until Close, which the caller must call.
func (c *Client) Querier(mintMs, maxtMs int64) (storage.Querier, error) {
	q := &querier{c: c, mint: mintMs, maxt: maxtMs, res: &lazyReservation{}}
	// A querier dropped without Close would keep its share for good:
	// the collector gives it back.
	runtime.AddCleanup(q, (*lazyReservation).release, q.res)
	return q, nil
}

// ChunkQuerier returns a chunk querier of [mintMs, maxtMs]: the series
// read as Querier reads them, their samples encoded as XOR chunks. It
// holds its share of the budget as Querier's does.
func (c *Client) ChunkQuerier(mintMs, maxtMs int64) (storage.ChunkQuerier, error) {
	q := &chunkQuerier{querier{c: c, mint: mintMs, maxt: maxtMs, res: &lazyReservation{}}}
	runtime.AddCleanup(q, (*lazyReservation).release, q.res)
	return q, nil
}

type chunkQuerier struct{ querier }

func (cq *chunkQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	return cq.selectChunks(ctx, hints, ms)
}

type querier struct {
	c          *Client
	mint, maxt int64
	res        *lazyReservation
}

// Close gives the querier's share of the memory budget back: what it
// returned is no longer counted, so the caller drops it.
func (q *querier) Close() error {
	q.res.release()
	return nil
}

// window is the part of [q.mint, q.maxt] hints ask for.
func (q *querier) window(hints *storage.SelectHints) (int64, int64) {
	lo, hi := q.mint, q.maxt
	if hints != nil {
		lo, hi = max(lo, hints.Start), min(hi, hints.End)
	}
	return max(lo, 0), min(hi, math.MaxInt64/2)
}

// Select reads the series ms select with every sample in the window,
// sorted by labels whatever sortSeries says. Hints asking for labels only
// (Func "series") read the series API.
func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	list, err := q.selectSeries(ctx, hints, ms)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	return &seriesSet{list: list, i: -1}
}

// selectSeries reads the series Select returns.
func (q *querier) selectSeries(ctx context.Context, hints *storage.SelectHints, ms []*labels.Matcher) ([]*series, error) {
	lo, hi := q.window(hints)
	if lo > hi {
		return nil, nil
	}
	sel := Selector(ms)
	res, err := q.res.get(ctx, q.c.budget, q.c.query.String())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", sel, err)
	}
	var all []*series
	switch {
	case hints != nil && hints.Func == "series":
		all, err = q.c.series(ctx, res, sel, lo, hi)
	default:
		all, err = q.c.samples(ctx, res, sel, lo, hi)
	}
	if err != nil {
		return nil, err
	}
	// Merging, sorting and chunk encoding make at most one more copy of
	// the columns.
	n := 0
	for _, s := range all {
		n += cap(s.ts) + cap(s.vs)
	}
	if err := res.charge(int64(n) * 8); err != nil {
		return nil, fmt.Errorf("read %s: %w", sel, err)
	}
	return q.c.merge(all), nil
}

// selectChunks reads what Select returns, as chunks.
func (q *querier) selectChunks(ctx context.Context, hints *storage.SelectHints, ms []*labels.Matcher) storage.ChunkSeriesSet {
	list, err := q.selectSeries(ctx, hints, ms)
	if err != nil {
		return storage.ErrChunkSeriesSet(err)
	}
	out := make([]storage.ChunkSeries, len(list))
	for i, s := range list {
		chks, err := s.chunks()
		if err != nil {
			return storage.ErrChunkSeriesSet(fmt.Errorf("encode samples of %s: %w", s.ls, err))
		}
		out[i] = &storage.ChunkSeriesEntry{Lset: s.ls, ChunkIteratorFn: func(chunks.Iterator) chunks.Iterator {
			return storage.NewListChunkSeriesIterator(chks...)
		}}
	}
	return &chunkSeriesSet{list: out, i: -1}
}

// samples reads the raw samples of sel in [loMs, hiMs], charging res.
func (c *Client) samples(ctx context.Context, res *reservation, sel string, loMs, hiMs int64) ([]*series, error) {
	if c.export.Load() != 2 {
		out, err := c.exportSamples(ctx, res, sel, loMs, hiMs)
		if err == nil {
			c.export.Store(1)
			return out, nil
		}
		if !errors.Is(err, errNoExport) {
			return nil, err
		}
		c.export.Store(2)
	}
	return c.rangeSamples(ctx, res, sel, loMs, hiMs)
}

var errNoExport = errors.New("no /api/v1/export")

// exportSamples reads VictoriaMetrics' export format: one JSON object
// per line and series, streamed into columns.
func (c *Client) exportSamples(ctx context.Context, res *reservation, sel string, loMs, hiMs int64) ([]*series, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	u := c.query.String() + "/api/v1/export"
	res.start(u)
	resp, err := c.post(ctx, "/api/v1/export", url.Values{"match[]": {sel}, "start": {formatTime(loMs)}, "end": {formatTime(hiMs)}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil, errNoExport
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("export %s: %w", sel, readStatusError("export", resp.StatusCode, msg))
	}
	out, err := decodeExport(newJSONStream(c.bounded(resp.Body, u)), res)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", sel, c.readError(ctx, u, err))
	}
	return out, nil
}

// rangeSamples reads sel in [loMs, hiMs] by range selectors, splitting
// windows the engine refuses as too large.
func (c *Client) rangeSamples(ctx context.Context, res *reservation, sel string, loMs, hiMs int64) ([]*series, error) {
	out, err := c.rangeQuery(ctx, res, sel, loMs, hiMs)
	var ae *apiError
	if err == nil || !errors.As(err, &ae) || !ae.tooLarge() || hiMs-loMs < minWindowMs {
		return out, err
	}
	mid := loMs + (hiMs-loMs)/2
	first, err := c.rangeSamples(ctx, res, sel, loMs, mid)
	if err != nil {
		return nil, err
	}
	second, err := c.rangeSamples(ctx, res, sel, mid+1, hiMs)
	if err != nil {
		return nil, err
	}
	// Windows in time order: merge appends the second after the first.
	return append(first, second...), nil
}

// rangeQuery reads sel in [loMs, hiMs] by one instant query of a range
// selector, its matrix streamed into columns.
func (c *Client) rangeQuery(ctx context.Context, res *reservation, sel string, loMs, hiMs int64) ([]*series, error) {
	expr := fmt.Sprintf("%s[%dms]", sel, hiMs-loMs+1)
	res.start(c.query.String() + "/api/v1/query")
	var typ string
	var out []*series
	err := c.api(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(hiMs)}, "nocache": {"1"}}, func(s *jsonStream) error {
		var err error
		typ, out, err = decodeResult(s, res)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", expr, err)
	}
	if typ != "matrix" {
		return nil, fmt.Errorf("%w: read %s: result type %q, want matrix", ErrFailed, expr, typ)
	}
	return out, nil
}

// Sample is one value of an instant vector.
type Sample struct {
	Labels labels.Labels
	TMs    int64
	V      float64
}

// Query evaluates expr at atMs and returns its instant vector. Like every
// query of the client it asks VictoriaMetrics not to answer from its
// rollup cache (nocache=1, which other engines ignore): that cache is
// documented not to see samples written later with old times, as an
// import of an old job writes them. The answer is decoded within a share
// of the memory budget given back on return.
func (c *Client) Query(ctx context.Context, expr string, atMs int64) ([]Sample, error) {
	u := c.query.String() + "/api/v1/query"
	res, err := c.budget.reserve(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	defer res.release()
	var typ string
	var result []*series
	err = c.api(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(atMs)}, "nocache": {"1"}}, func(s *jsonStream) error {
		var err error
		typ, result, err = decodeResult(s, res)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if typ != "vector" {
		return nil, fmt.Errorf("%w: query %s: result type %q, want vector", ErrFailed, expr, typ)
	}
	out := make([]Sample, len(result))
	for i, r := range result {
		if len(r.ts) != 1 {
			return nil, fmt.Errorf("%w: query %s: %d samples of a vector's series, want 1", ErrFailed, expr, len(r.ts))
		}
		out[i] = Sample{Labels: r.ls, TMs: r.ts[0], V: r.vs[0]}
	}
	return out, nil
}

// series reads the label sets of sel in [loMs, hiMs] from the series API.
func (c *Client) series(ctx context.Context, res *reservation, sel string, loMs, hiMs int64) ([]*series, error) {
	res.start(c.query.String() + "/api/v1/series")
	var out []*series
	err := c.api(ctx, "/api/v1/series", url.Values{"match[]": {sel}, "start": {formatTime(loMs)}, "end": {formatTime(hiMs)}}, func(s *jsonStream) error {
		var err error
		out, err = decodeSeriesList(s, res)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list series %s: %w", sel, err)
	}
	return out, nil
}

// strings reads a list of strings from the label API at path.
func (q *querier) strings(ctx context.Context, path string, params url.Values) ([]string, error) {
	u := q.c.query.String() + path
	res, err := q.res.get(ctx, q.c.budget, u)
	if err != nil {
		return nil, err
	}
	var out []string
	err = q.c.api(ctx, path, params, func(s *jsonStream) error {
		var err error
		out, err = decodeStrings(s, res)
		return err
	})
	return out, err
}

// LabelValues asks the engine for the values of name among the series
// ms select in the querier's range.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	vals, err := q.strings(ctx, "/api/v1/label/"+url.PathEscape(name)+"/values", q.labelParams(hints, ms))
	if err != nil {
		return nil, nil, fmt.Errorf("list values of label %s: %w", name, err)
	}
	slices.Sort(vals)
	return vals, nil, nil
}

// LabelNames asks the engine for the label names of the series ms select.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	names, err := q.strings(ctx, "/api/v1/labels", q.labelParams(hints, ms))
	if err != nil {
		return nil, nil, fmt.Errorf("list label names: %w", err)
	}
	slices.Sort(names)
	return names, nil, nil
}

// labelParams are the parameters of the label APIs. The range is always
// given: VictoriaMetrics answers for the last day only without one.
func (q *querier) labelParams(hints *storage.LabelHints, ms []*labels.Matcher) url.Values {
	lo, hi := q.window(nil)
	p := url.Values{"start": {formatTime(lo)}, "end": {formatTime(hi)}}
	if len(ms) > 0 {
		p.Set("match[]", Selector(ms))
	}
	if hints != nil && hints.Limit > 0 {
		p.Set("limit", strconv.Itoa(hints.Limit))
	}
	return p
}

// merge relabels the series read (Config.Relabel), merges those with
// equal labels and sorts them by labels. Samples of one series end up in
// strictly increasing time; at a time two of them hold, the later one in
// all wins.
func (c *Client) merge(all []*series) []*series {
	if c.cfg.Relabel != nil {
		for _, s := range all {
			s.ls = c.cfg.Relabel(s.ls)
		}
	}
	slices.SortStableFunc(all, func(a, b *series) int { return labels.Compare(a.ls, b.ls) })
	out := all[:0]
	for _, s := range all {
		if n := len(out); n > 0 && labels.Equal(out[n-1].ls, s.ls) {
			out[n-1].ts = append(out[n-1].ts, s.ts...)
			out[n-1].vs = append(out[n-1].vs, s.vs...)
			continue
		}
		out = append(out, s)
	}
	for _, s := range out {
		s.normalise()
	}
	return out
}

// series is one series read, its samples in memory.
type series struct {
	ls labels.Labels
	ts []int64
	vs []float64
}

// normalise sorts the samples by time and keeps the last of those
// sharing a millisecond.
func (s *series) normalise() {
	sorted := true
	for i := 1; i < len(s.ts); i++ {
		if s.ts[i] <= s.ts[i-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	idx := make([]int, len(s.ts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(s.ts[a], s.ts[b]) })
	ts := make([]int64, 0, len(idx))
	vs := make([]float64, 0, len(idx))
	for _, i := range idx {
		if n := len(ts); n > 0 && ts[n-1] == s.ts[i] {
			vs[n-1] = s.vs[i]
			continue
		}
		ts, vs = append(ts, s.ts[i]), append(vs, s.vs[i])
	}
	s.ts, s.vs = ts, vs
}

// chunkSamples is the most samples one chunk of a series read holds: as
// the TSDB cuts them, so that readers sizing from chunks see familiar
// shapes.
const chunkSamples = 120

// chunks encodes the samples as XOR chunks of chunkSamples samples.
func (s *series) chunks() ([]chunks.Meta, error) {
	out := make([]chunks.Meta, 0, (len(s.ts)+chunkSamples-1)/chunkSamples)
	for lo := 0; lo < len(s.ts); lo += chunkSamples {
		hi := min(lo+chunkSamples, len(s.ts))
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			return nil, err
		}
		for i := lo; i < hi; i++ {
			app.Append(0, s.ts[i], s.vs[i])
		}
		out = append(out, chunks.Meta{Chunk: c, MinTime: s.ts[lo], MaxTime: s.ts[hi-1]})
	}
	return out, nil
}

func (s *series) Labels() labels.Labels { return s.ls }

// Iterator walks the float samples held in memory.
func (s *series) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return storage.NewListSeriesIterator(samples{s})
}

// samples presents a series' columns as storage.Samples.
type samples struct{ s *series }

func (x samples) Len() int                { return len(x.s.ts) }
func (x samples) Get(i int) chunks.Sample { return fpoint{t: x.s.ts[i], f: x.s.vs[i]} }

// fpoint is one float sample.
type fpoint struct {
	t int64
	f float64
}

func (p fpoint) T() int64                      { return p.t }
func (p fpoint) ST() int64                     { return 0 }
func (p fpoint) F() float64                    { return p.f }
func (p fpoint) H() *histogram.Histogram       { return nil }
func (p fpoint) FH() *histogram.FloatHistogram { return nil }
func (p fpoint) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (p fpoint) Copy() chunks.Sample           { return p }

type seriesSet struct {
	list []*series
	i    int
}

func (ss *seriesSet) Next() bool                        { ss.i++; return ss.i < len(ss.list) }
func (ss *seriesSet) At() storage.Series                { return ss.list[ss.i] }
func (ss *seriesSet) Err() error                        { return nil }
func (ss *seriesSet) Warnings() annotations.Annotations { return nil }

type chunkSeriesSet struct {
	list []storage.ChunkSeries
	i    int
}

func (ss *chunkSeriesSet) Next() bool                        { ss.i++; return ss.i < len(ss.list) }
func (ss *chunkSeriesSet) At() storage.ChunkSeries           { return ss.list[ss.i] }
func (ss *chunkSeriesSet) Err() error                        { return nil }
func (ss *chunkSeriesSet) Warnings() annotations.Annotations { return nil }

// parseTime reads the API's time, unix seconds with up to three
// decimals, as unix ms, exactly (no float rounding).
func parseTime(s string) (int64, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || len(frac) > 3 {
		return 0, fmt.Errorf("bad sample time %q", strings.Clone(s)) // s must not escape: it is a decoder's buffer
	}
	ms := int64(0)
	for i := range 3 {
		ms *= 10
		if i < len(frac) {
			if frac[i] < '0' || frac[i] > '9' {
				return 0, fmt.Errorf("bad sample time %q", strings.Clone(s))
			}
			ms += int64(frac[i] - '0')
		}
	}
	if strings.HasPrefix(sec, "-") {
		return n*1000 - ms, nil
	}
	return n*1000 + ms, nil
}

// parseValue reads a sample value as the API writes it ("1.5", "NaN",
// "+Inf").
func parseValue(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bad sample value %q", strings.Clone(s))
	}
	return v, nil
}
