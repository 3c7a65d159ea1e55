package remote

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
)

// Decoders of the engine's answers, one per shape, reading from a
// jsonStream into columns and charging what they keep to a reservation
// before allocating it.

// seriesOverhead is what a decoded series costs besides its columns and
// label bytes: the series, its labels' headers, its slot in the list.
const seriesOverhead = 128

// labelOverhead is what one label costs besides its bytes: its name's
// and value's headers, in the decoder's builder and in the labels kept.
const labelOverhead = 64

// decodeLabels reads a label object ({"name":"value",…}) with b.
func decodeLabels(s *jsonStream, res *reservation, b *labels.ScratchBuilder) (labels.Labels, error) {
	b.Reset()
	err := s.object(func(name string) error {
		v, err := s.str()
		if err != nil {
			return err
		}
		// Twice: the builder's copy and the labels built from it.
		if err := res.charge(2 * int64(labelOverhead+len(name)+len(v))); err != nil {
			return err
		}
		b.Add(name, v)
		return nil
	})
	if err != nil {
		return labels.EmptyLabels(), err
	}
	b.Sort()
	return b.Labels(), nil
}

// decodeResult reads the data of a query answer, {"resultType":…,
// "result":[…]}, a matrix's series with every sample or a vector's with
// its one; it returns the result type the engine named.
func decodeResult(s *jsonStream, res *reservation) (string, []*series, error) {
	var typ string
	var out []*series
	var b labels.ScratchBuilder
	err := s.object(func(key string) error {
		switch key {
		case "resultType":
			var err error
			typ, err = s.str()
			return err
		case "result":
			return s.array(func() error {
				if err := res.charge(seriesOverhead); err != nil {
					return err
				}
				sr := &series{}
				err := s.object(func(key string) error {
					var err error
					switch key {
					case "metric":
						sr.ls, err = decodeLabels(s, res, &b)
					case "values":
						err = s.array(func() error { return decodePair(s, res, sr) })
					case "value":
						err = decodePair(s, res, sr)
					default: // histograms: floats only here
						err = s.skip()
					}
					return err
				})
				out = append(out, sr)
				return err
			})
		}
		return s.skip()
	})
	return typ, out, err
}

// decodePair reads one sample, [unix seconds, "value"], into sr.
func decodePair(s *jsonStream, res *reservation, sr *series) error {
	var err error
	if sr.ts, err = grow(res, sr.ts); err != nil {
		return err
	}
	if sr.vs, err = grow(res, sr.vs); err != nil {
		return err
	}
	if err := s.expect('['); err != nil {
		return err
	}
	tok, err := s.number()
	if err != nil {
		return err
	}
	t, err := parseTime(string(tok))
	if err != nil {
		return fmt.Errorf("%w: %v", errSyntax, err)
	}
	if err := s.expect(','); err != nil {
		return err
	}
	if tok, err = s.strBytes(); err != nil {
		return err
	}
	v, err := parseValue(string(tok))
	if err != nil {
		return fmt.Errorf("%w: %v", errSyntax, err)
	}
	sr.ts, sr.vs = append(sr.ts, t), append(sr.vs, v)
	return s.expect(']')
}

// decodeSeriesList reads the data of the series API, a list of label
// objects.
func decodeSeriesList(s *jsonStream, res *reservation) ([]*series, error) {
	var out []*series
	var b labels.ScratchBuilder
	err := s.array(func() error {
		if err := res.charge(seriesOverhead); err != nil {
			return err
		}
		ls, err := decodeLabels(s, res, &b)
		out = append(out, &series{ls: ls})
		return err
	})
	return out, err
}

// decodeStrings reads the data of the label APIs, a list of strings.
func decodeStrings(s *jsonStream, res *reservation) ([]string, error) {
	var out []string
	err := s.array(func() error {
		v, err := s.str()
		if err != nil {
			return err
		}
		if len(out) == cap(out) {
			n := max(2*cap(out), 64)
			if err := res.charge(int64(n) * 16); err != nil {
				return err
			}
			out = append(make([]string, 0, n), out...)
		}
		if err := res.charge(int64(len(v))); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// decodeExport reads VictoriaMetrics' export format, one object per line
// and series: {"metric":{…},"values":[…],"timestamps":[…]}, keys in any
// order.
func decodeExport(s *jsonStream, res *reservation) ([]*series, error) {
	var out []*series
	var b labels.ScratchBuilder
	for {
		if _, err := s.peek(); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, err
		}
		if err := res.charge(seriesOverhead); err != nil {
			return out, err
		}
		sr := &series{}
		err := s.object(func(key string) error {
			var err error
			switch key {
			case "metric":
				sr.ls, err = decodeLabels(s, res, &b)
			case "values":
				err = s.array(func() error {
					var tok []byte
					var err error
					if sr.vs, tok, err = nextNumber(s, res, sr.vs); err != nil {
						return err
					}
					v, err := strconv.ParseFloat(string(tok), 64)
					if err != nil {
						return syntaxf("bad sample value %q", tok)
					}
					sr.vs = append(sr.vs, v)
					return nil
				})
			case "timestamps":
				err = s.array(func() error {
					var tok []byte
					var err error
					if sr.ts, tok, err = nextNumber(s, res, sr.ts); err != nil {
						return err
					}
					t, err := strconv.ParseInt(string(tok), 10, 64)
					if err != nil {
						return syntaxf("bad sample time %q", tok)
					}
					sr.ts = append(sr.ts, t)
					return nil
				})
			default:
				err = s.skip()
			}
			return err
		})
		if err != nil {
			return out, err
		}
		if len(sr.ts) != len(sr.vs) {
			return out, syntaxf("%d values for %d timestamps", len(sr.vs), len(sr.ts))
		}
		out = append(out, sr)
	}
}

// nextNumber makes room in col, within res, for one more of an export
// line's values or timestamps and reads that number's token, which is
// valid until s is read again.
func nextNumber[T int64 | float64](s *jsonStream, res *reservation, col []T) ([]T, []byte, error) {
	col, err := grow(res, col)
	if err != nil {
		return col, nil, err
	}
	tok, err := s.number()
	return col, tok, err
}
