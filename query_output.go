package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// queryOut is a query's answer as `peakline query` prints it, whichever
// engine answered: series (one for a scalar or a string, with no
// labels) of points.
type queryOut struct {
	kind   string // "vector", "matrix", "scalar" or "string"
	series []queryOutSeries
}

type queryOutSeries struct {
	labels string // {a="b", …}; "" for a scalar or a string
	points []queryOutPoint
}

type queryOutPoint struct {
	ms    int64
	value string
}

// queryOutOfModel reads an answer of the Prometheus API (query --server).
func queryOutOfModel(v model.Value) queryOut {
	switch v := v.(type) {
	case model.Vector:
		out := queryOut{kind: "vector"}
		for _, s := range v {
			out.series = append(out.series, queryOutSeries{labels: s.Metric.String(), points: []queryOutPoint{{int64(s.Timestamp), modelSampleValue(s)}}})
		}
		return out
	case model.Matrix:
		out := queryOut{kind: "matrix"}
		for _, s := range v {
			qs := queryOutSeries{labels: s.Metric.String()}
			for _, p := range s.Values {
				qs.points = append(qs.points, queryOutPoint{int64(p.Timestamp), formatFloat(float64(p.Value))})
			}
			for _, h := range s.Histograms {
				qs.points = append(qs.points, queryOutPoint{int64(h.Timestamp), h.Histogram.String()})
			}
			out.series = append(out.series, qs)
		}
		return out
	case *model.Scalar:
		return queryOut{kind: "scalar", series: []queryOutSeries{{points: []queryOutPoint{{int64(v.Timestamp), formatFloat(float64(v.Value))}}}}}
	case *model.String:
		return queryOut{kind: "string", series: []queryOutSeries{{points: []queryOutPoint{{int64(v.Timestamp), strconv.Quote(v.Value)}}}}}
	}
	return queryOut{kind: fmt.Sprintf("%T", v)}
}

func modelSampleValue(s *model.Sample) string {
	if s.Histogram != nil {
		return s.Histogram.String()
	}
	return formatFloat(float64(s.Value))
}

// queryOutOfPromQL reads an answer of the embedded engine (query --data).
func queryOutOfPromQL(v parser.Value) queryOut {
	switch v := v.(type) {
	case promql.Vector:
		out := queryOut{kind: "vector"}
		for _, s := range v {
			val := formatFloat(s.F)
			if s.H != nil {
				val = s.H.String()
			}
			out.series = append(out.series, queryOutSeries{labels: promLabels(s.Metric), points: []queryOutPoint{{s.T, val}}})
		}
		return out
	case promql.Matrix:
		out := queryOut{kind: "matrix"}
		for _, s := range v {
			qs := queryOutSeries{labels: promLabels(s.Metric)}
			for _, p := range s.Floats {
				qs.points = append(qs.points, queryOutPoint{p.T, formatFloat(p.F)})
			}
			for _, p := range s.Histograms {
				qs.points = append(qs.points, queryOutPoint{p.T, p.H.String()})
			}
			out.series = append(out.series, qs)
		}
		return out
	case promql.Scalar:
		return queryOut{kind: "scalar", series: []queryOutSeries{{points: []queryOutPoint{{v.T, formatFloat(v.V)}}}}}
	case promql.String:
		return queryOut{kind: "string", series: []queryOutSeries{{points: []queryOutPoint{{v.T, strconv.Quote(v.V)}}}}}
	}
	return queryOut{kind: fmt.Sprintf("%T", v)}
}

// promLabels renders labels as the Prometheus API client does:
// {a="b", c="d"}.
func promLabels(ls labels.Labels) string {
	m := make(model.Metric, ls.Len())
	ls.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return m.String()
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// queryTime renders a sample time: RFC 3339 in UTC, to the millisecond.
func queryTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// write prints the answer: an instant vector a line per series
// ("{labels} => value @ time"), a range a block per series (its labels,
// then "  time  value" lines), times in UTC. It returns the number of
// series.
func (q queryOut) write(w io.Writer) (int, error) {
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	for _, s := range q.series {
		switch q.kind {
		case "matrix":
			p("%s\n", s.labels)
			for _, pt := range s.points {
				p("  %s  %s\n", queryTime(pt.ms), pt.value)
			}
		case "vector":
			p("%s => %s @ %s\n", s.labels, s.points[0].value, queryTime(s.points[0].ms))
		default:
			p("%s @ %s\n", s.points[0].value, queryTime(s.points[0].ms))
		}
	}
	return len(q.series), err
}

// printQuery writes the answer to out, or, when no series matched (an
// empty vector or matrix), says so on errOut.
func printQuery(out, errOut io.Writer, q queryOut, expr string) error {
	n, err := q.write(out)
	if err == nil && n == 0 && (q.kind == "vector" || q.kind == "matrix") {
		_, err = fmt.Fprintf(errOut, "no series matched %s\n", expr)
	}
	return err
}
