package remote

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// anyValue reads any value from s as encoding/json decodes it into an
// any with UseNumber, through the stream's object, array, str and number.
func anyValue(s *jsonStream) (any, error) {
	c, err := s.peek()
	if err != nil {
		return nil, eof(err)
	}
	switch c {
	case '{':
		m := map[string]any{}
		err := s.object(func(key string) error {
			v, err := anyValue(s)
			m[key] = v
			return err
		})
		return m, err
	case '[':
		l := []any{}
		err := s.array(func() error {
			v, err := anyValue(s)
			l = append(l, v)
			return err
		})
		return l, err
	case '"':
		return s.str()
	case 'n':
		_, err := s.null()
		return nil, err
	}
	tok, err := s.number()
	switch string(tok) {
	case "true":
		return true, err
	case "false":
		return false, err
	}
	return json.Number(tok), err
}

// FuzzJSONStream: every document encoding/json takes, the stream reads
// to the same value, and skips; documents it refuses, the stream may
// take (it reads bare tokens as strconv does, for NaN and Inf) but
// never panics on.
func FuzzJSONStream(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1.5,"2"]]}]}}`,
		`["a\u00e9\"\\\/\b\f\n\r\t", -1.5e-7, 0, true, false, null, {}, []]`,
		`{"metric":{"__name__":"m"},"values":[1,2],"timestamps":[3,4]}`,
		` { "a" : [ 1 , { "b" : null } ] } `, `"\ud83d\ude00"`, `{"a":1,}`, `[1 2]`, `"\x01"`, `nul`, `{"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		wantErr := dec.Decode(&want)
		if wantErr == nil && dec.More() {
			wantErr = json.Unmarshal(doc, &want) // trailing data: refused whole
		}
		got, err := anyValue(newJSONStream(bytes.NewReader(doc)))
		skipErr := newJSONStream(bytes.NewReader(doc)).skip()
		if wantErr != nil {
			return
		}
		if err != nil && strings.Contains(err.Error(), "longer than") {
			return // a string or number past the stream's bounds
		}
		if err != nil || skipErr != nil {
			t.Fatalf("%q: encoding/json takes it as %v; the stream refuses it: %v, skip: %v", doc, want, err, skipErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: the stream reads %#v, encoding/json %#v", doc, got, want)
		}
	})
}
