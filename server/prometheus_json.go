package server

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// The Prometheus API's JSON is written by hand, append-style, as
// Prometheus itself does (web/api/v1/json_codec.go): a range query may
// carry millions of points, each [unix_seconds, "value"].

// appendQueryData appends the data object of a query answer:
// {"resultType":…,"result":…}.
func appendQueryData(dst []byte, v parser.Value) ([]byte, error) {
	dst = append(dst, `{"resultType":`...)
	dst = appendJSONString(dst, string(v.Type()))
	dst = append(dst, `,"result":`...)
	switch v := v.(type) {
	case promql.Matrix:
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"metric":`...)
			dst = appendLabels(dst, s.Metric)
			if len(s.Floats) > 0 {
				dst = append(dst, `,"values":[`...)
				for k, p := range s.Floats {
					if k > 0 {
						dst = append(dst, ',')
					}
					dst = appendPoint(dst, p.T, p.F)
				}
				dst = append(dst, ']')
			}
			if len(s.Histograms) > 0 {
				dst = append(dst, `,"histograms":[`...)
				for k, p := range s.Histograms {
					if k > 0 {
						dst = append(dst, ',')
					}
					b, err := p.MarshalJSON()
					if err != nil {
						return nil, fmt.Errorf("encode histogram of %s: %w", s.Metric, err)
					}
					dst = append(dst, b...)
				}
				dst = append(dst, ']')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	case promql.Vector:
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"metric":`...)
			dst = appendLabels(dst, s.Metric)
			if s.H == nil {
				dst = append(dst, `,"value":`...)
				dst = appendPoint(dst, s.T, s.F)
			} else {
				b, err := (promql.HPoint{T: s.T, H: s.H}).MarshalJSON()
				if err != nil {
					return nil, fmt.Errorf("encode histogram of %s: %w", s.Metric, err)
				}
				dst = append(dst, `,"histogram":`...)
				dst = append(dst, b...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	case promql.Scalar:
		dst = appendPoint(dst, v.T, v.V)
	case promql.String:
		dst = append(dst, '[')
		dst = appendTimestamp(dst, v.T)
		dst = append(dst, ',')
		dst = appendJSONString(dst, v.V)
		dst = append(dst, ']')
	default:
		return nil, fmt.Errorf("encode query result: unexpected value type %T", v)
	}
	return append(dst, '}'), nil
}

// appendPoint appends [unix_seconds, "value"].
func appendPoint(dst []byte, tMs int64, v float64) []byte {
	dst = append(dst, '[')
	dst = appendTimestamp(dst, tMs)
	dst = append(dst, `,"`...)
	switch {
	case math.IsInf(v, 1):
		dst = append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		dst = append(dst, "-Inf"...)
	default:
		dst = strconv.AppendFloat(dst, v, 'f', -1, 64) // NaN stays "NaN"
	}
	return append(dst, `"]`...)
}

// appendTimestamp appends unix milliseconds as seconds with up to three
// decimals, exactly (no float rounding), as Prometheus does.
func appendTimestamp(dst []byte, tMs int64) []byte {
	if tMs < 0 {
		dst = append(dst, '-')
		tMs = -tMs
	}
	dst = strconv.AppendInt(dst, tMs/1000, 10)
	if frac := tMs % 1000; frac != 0 {
		dst = append(dst, '.')
		if frac < 100 {
			dst = append(dst, '0')
		}
		if frac < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendInt(dst, frac, 10)
	}
	return dst
}

// appendLabels appends a label set as a JSON object.
func appendLabels(dst []byte, ls labels.Labels) []byte {
	dst = append(dst, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, l.Name)
		dst = append(dst, ':')
		dst = appendJSONString(dst, l.Value)
	})
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendWarnings appends the "warnings" and "infos" members, if any.
func appendWarnings(dst []byte, warnings, infos []string) []byte {
	for _, m := range []struct {
		key  string
		msgs []string
	}{{"warnings", warnings}, {"infos", infos}} {
		if len(m.msgs) == 0 {
			continue
		}
		dst = append(dst, `,"`...)
		dst = append(dst, m.key...)
		dst = append(dst, `":[`...)
		for i, w := range m.msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, w)
		}
		dst = append(dst, ']')
	}
	return dst
}

// promSuccess is the envelope of the answers other than query results,
// encoded with encoding/json.
type promSuccess struct {
	Status   string   `json:"status"`
	Data     any      `json:"data"`
	Warnings []string `json:"warnings,omitempty"`
}
