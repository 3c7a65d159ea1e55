package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast ingestBatch
		if !decodeBatchFast(body, &fast) {
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
