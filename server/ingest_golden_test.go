package server

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// goldenBatch is what testdata/batch.golden.json, the batch a collector
// sends for its known job (collector/ship/testdata holds the same bytes
// and pins the encoding), must decode to.
var goldenBatch = tsdb.Batch{
	JobID: "golden-1",
	Tasks: []tsdb.Task{
		{Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Name: "burn some cpu", StartMs: 1796009975979,
			Play: "web servers", Role: "common", Path: "/runner/project/site.yml:12"},
		{Counter: 7, UUID: "02fc0000-0001-bfc5-3899-000000000006", Name: "fill memory ü", StartMs: 1796009979461},
	},
	LastEvent: &tsdb.Event{Counter: 12, TimeMs: 1796009981831},
	Series: []tsdb.SeriesData{
		{Resource: "cpu", Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Task: "burn some cpu",
			Ts: []int64{1796009976236, 1796009976486}, Vs: []float64{93.46744753694286, 102.176635754406}},
		{Resource: "memory", Counter: 7, UUID: "02fc0000-0001-bfc5-3899-000000000006", Task: "fill memory ü",
			Ts: []int64{1796009979700}, Vs: []float64{268435456}},
		{Resource: "cpu_stall", Ts: []int64{1796009981000}, Vs: []float64{0.0625}},
	},
	Info: tsdb.JobInfo{TemplateID: "7", TemplateName: "deploy web", Status: "successful", Playbook: "site.yml", Measured: "cgroup",
		Forks: "10", Hosts: "3", MemoryLimit: "536870912", OOMKills: "1", OOMCounter: "7",
		ProjectRevision: "3f2c9e1a7b6d4c0e8f5a2b1c9d7e6f4a3b2c1d0e", EEImage: "quay.io/ansible/awx-ee:24.6.1"},
}

// TestIngestGolden decodes the golden batch, by the fast reader and by
// encoding/json, to exact values; and checks it is the collector's.
func TestIngestGolden(t *testing.T) {
	doc, err := os.ReadFile("testdata/batch.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile("../collector/ship/testdata/batch.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, theirs) {
		t.Fatal("testdata/batch.golden.json differs from collector/ship/testdata/batch.golden.json: the wire format changed on one side only")
	}

	var fast ingestBatch
	var cols writeBuf // the series in the request's columns, as the server reads them
	if !decodeBatchFast(doc, &fast, &cols) {
		t.Fatal("the fast reader does not take the golden batch")
	}
	if got := toBatch(&fast); !reflect.DeepEqual(*got, goldenBatch) {
		t.Errorf("fast reader:\ngot  %+v\nwant %+v", *got, goldenBatch)
	}

	var ref ingestBatch
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	if got := toBatch(&ref); !reflect.DeepEqual(*got, goldenBatch) {
		t.Errorf("encoding/json:\ngot  %+v\nwant %+v", *got, goldenBatch)
	}

	var in ingestBatch
	if err := decodeBatch(bytes.NewReader(doc), &in, 1<<20, &writeBuf{}); err != nil {
		t.Fatalf("decodeBatch: %v", err)
	}
	if got := toBatch(&in); !reflect.DeepEqual(*got, goldenBatch) {
		t.Errorf("decodeBatch:\ngot  %+v\nwant %+v", *got, goldenBatch)
	}
}
