package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzIngestFastDecode reads arbitrary bodies with the fast batch
// reader: whatever it takes, encoding/json decodes (with the unknown
// fields and trailing data the server refuses) to the same batch, value
// bits included. Run with: go test -run '^$' -fuzz FuzzIngestFastDecode -fuzztime 2m ./server/
func FuzzIngestFastDecode(f *testing.F) {
	for _, s := range fuzzIngestSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		` {"job_id":"j","template_id":"7","template_name":"deploy ü","status":"running","playbook":"site.yml","measured":"cgroup",` +
			`"tasks":[{"counter":3,"uuid":"u","name":"n","start":1796009975979,"play":"p","role":"r","task_path":"/x.yml:3"}],` +
			`"series":[{"resource":"cpu","counter":3,"uuid":"u","task":"n","t":[],"v":[-0,1E3,2.5e-3,-7.25]}]}` + "\n",
		`{"job_id":"j","series":[{"t":[1],"v":[null]}]}`,
		`{"job_id":"j","series":[{"t":[1.0],"v":[1]}]}`,
		`{"job_id":"j","series":[{"t":[9223372036854775808],"v":[1e400]}]}`,
		`{"job_id":"j","Job_ID":"k"}`,
		`{"job_id":"j","job_id":"k"}`,
		`{"job_id":"a\u0041\n"}`,
		`{"job_id":"j","last_event":null,"tasks":null}`,
		`{"job_id":"j","series":[{"t":[01],"v":[1]}]}`,
		`{"job_id":"j","series":[{"t":[-0,999999999999999999,-9223372036854775808],"v":[0.001,-12.5,123456789012345,1234567890.123456,0.1,99999999999999.9,00.5,1.,-]}]}`,
		`{"job_id":"j","series":[{"t":[1,2,3],"v":[0.30000000000000004,4.35,-0.0,1e22]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast ingestBatch
		if !decodeBatchFast(body, &fast, nil) {
			return
		}
		var ref ingestBatch
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("the fast reader took %q, encoding/json refuses it: %v", body, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Fatalf("the fast reader took %q, encoding/json finds more after the batch: %v", body, err)
		}
		// Bits of the values first, then the rest with them cleared.
		if len(fast.Series) != len(ref.Series) {
			t.Fatalf("%q: %d series, encoding/json %d", body, len(fast.Series), len(ref.Series))
		}
		for i := range ref.Series {
			fv, rv := fast.Series[i].V, ref.Series[i].V
			if len(fv) != len(rv) {
				t.Fatalf("%q: series %d has %d values, encoding/json %d", body, i, len(fv), len(rv))
			}
			for k := range rv {
				if math.Float64bits(float64(fv[k])) != math.Float64bits(float64(rv[k])) {
					t.Fatalf("%q: series %d value %d = %v, encoding/json %v", body, i, k, fv[k], rv[k])
				}
			}
			fast.Series[i].V, ref.Series[i].V = nil, nil
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("%q:\nfast %+v\njson %+v", body, fast, ref)
		}
	})
}

// TestFastNumbersMatchStrconv reads random decimals of up to 17 digits,
// with up to 22 after the point and either sign, and integers of up to
// 19 digits, as the fast reader's series values and times: each is
// strconv's value, bit for bit, and an int64 past its range is left to
// encoding/json.
func TestFastNumbersMatchStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 21))
	for range 200_000 {
		digits := 1 + rng.IntN(17)
		var b []byte
		if rng.IntN(2) == 0 {
			b = append(b, '-')
		}
		num := make([]byte, digits)
		for i := range num {
			num[i] = byte('0' + rng.IntN(10))
		}
		point := rng.IntN(min(digits, 23))
		ip := num[:digits-point]
		for len(ip) > 1 && ip[0] == '0' {
			ip = ip[1:]
		}
		b = append(b, ip...)
		if point > 0 {
			b = append(b, '.')
			b = append(b, num[digits-point:]...)
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			t.Fatal(err)
		}
		s := &jsonScan{b: b, ok: true}
		if got := s.float(); !s.ok || s.i != len(b) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%s: read %v (ok %v, %d of %d bytes), strconv %v", b, got, s.ok, s.i, len(b), want)
		}
	}
	for range 200_000 {
		n := rng.Uint64() >> rng.IntN(64)
		str := strconv.FormatUint(n, 10)
		if rng.IntN(2) == 0 {
			str = "-" + str
		}
		want, werr := strconv.ParseInt(str, 10, 64)
		s := &jsonScan{b: []byte(str), ok: true}
		got := s.int()
		if werr != nil {
			if s.ok {
				t.Fatalf("%s: read %d, strconv refuses it: %v", str, got, werr)
			}
			continue
		}
		if !s.ok || got != want {
			t.Fatalf("%s: read %d (ok %v), strconv %d", str, got, s.ok, want)
		}
	}
	for _, bad := range []string{"-", "01", "-01", "1.5", "1e3", "", "1.", ".5", "00.5", "-.5"} {
		for _, kind := range []string{"int", "float"} {
			s := &jsonScan{b: []byte(bad), ok: true}
			if kind == "int" {
				s.int()
			} else {
				s.float()
			}
			if s.ok && s.i == len(bad) && !(kind == "float" && (bad == "1.5" || bad == "1e3")) {
				t.Errorf("%s %q: read whole, want it refused", kind, bad)
			}
		}
	}
}

// TestGzipReadersReused reads bodies through the pooled gzip readers: a
// body closed twice puts its reader back once, so two bodies open at
// once never share one; a body that is not gzip is refused and leaves
// the pool sound; each body reads exactly what was compressed.
func TestGzipReadersReused(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	docs := []string{`{"job_id":"a"}`, strings.Repeat(`{"job_id":"b"}`, 5000), ""}
	for round := range 3 {
		rc, err := newGzipReader(bytes.NewReader(gz(docs[0])))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(rc); err != nil || string(got) != docs[0] {
			t.Fatalf("round %d: read %q, %v", round, got, err)
		}
		rc.Close()
		rc.Close()
		if _, err := rc.Read(make([]byte, 1)); err == nil {
			t.Fatal("a closed body still reads")
		}
		if _, err := newGzipReader(strings.NewReader("not gzip")); err == nil {
			t.Fatal("a body that is not gzip was taken")
		}
		var open []io.ReadCloser
		for _, d := range docs {
			rc, err := newGzipReader(bytes.NewReader(gz(d)))
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, rc)
		}
		for i, rc := range open {
			if got, err := io.ReadAll(rc); err != nil || string(got) != docs[i] {
				t.Fatalf("round %d: body %d read %d bytes (%v), want %d", round, i, len(got), err, len(docs[i]))
			}
		}
		for _, rc := range open {
			rc.Close()
		}
	}
}
