package ship

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"reflect"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
)

// goldenJob is a job with every field of the wire format set: its first
// batch is testdata/batch.golden.json (server/testdata holds the same
// bytes and decodes them).
func goldenJob() *ansible.Job {
	return &ansible.Job{
		ID:     "golden-1",
		Source: ansible.LayoutRunner,
		Tasks: []ansible.Task{
			{Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Name: "burn some cpu", StartMs: 1796009975979,
				Play: "web servers", Role: "common", Path: "/runner/project/site.yml:12", EndMs: 1796009979461},
			{Counter: 7, UUID: "02fc0000-0001-bfc5-3899-000000000006", Name: "fill memory ü", StartMs: 1796009979461},
		},
		LastEvent: &ansible.Event{Counter: 12, TimeMs: 1796009981831},
		Series: []ansible.Series{
			{Resource: ansible.ResourceCPU, Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Task: "burn some cpu",
				Ts: []int64{1796009976236, 1796009976486}, Vs: []float64{93.46744753694286, 102.176635754406}},
			{Resource: ansible.ResourceMemory, Counter: 7, UUID: "02fc0000-0001-bfc5-3899-000000000006", Task: "fill memory ü",
				Ts: []int64{1796009979700}, Vs: []float64{268435456}},
			{Resource: ansible.ResourceCPUStall, Counter: 0, UUID: "", Task: "",
				Ts: []int64{1796009981000}, Vs: []float64{0.0625}},
		},
		Info: ansible.JobInfo{TemplateID: "7", TemplateName: "deploy web", Status: "successful",
			Playbook: "site.yml", Measured: ansible.MeasuredCgroup,
			Forks: 10, Hosts: 3, MemoryLimitBytes: 536870912, OOMKills: 1, OOMCounter: 7,
			ProjectRevision: "3f2c9e1a7b6d4c0e8f5a2b1c9d7e6f4a3b2c1d0e", EEImage: "quay.io/ansible/awx-ee:24.6.1"},
	}
}

// TestBatchGolden pins the bytes a collector sends for a known job to
// testdata/batch.golden.json, through the Encoder Send uses.
func TestBatchGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/batch.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	batches := Batches(goldenJob(), 0)
	if len(batches) != 1 {
		t.Fatalf("%d batches, want 1", len(batches))
	}
	var enc Encoder
	body, err := enc.Encode(&batches[0])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encoded batch differs from testdata/batch.golden.json:\ngot  %s\nwant %s", got, want)
	}
}

// TestBatchAddToUndoesBatches: reading a job's batches back with AddTo
// gives the job again, less what is not sent (its source, tasks' ends).
func TestBatchAddToUndoesBatches(t *testing.T) {
	j := goldenJob()
	back := &ansible.Job{ID: j.ID}
	for _, b := range Batches(j, 1) {
		b.AddTo(back)
	}
	j.Source, j.Tasks[0].EndMs = "", 0
	// Batches of one sample each split the first series in two.
	var merged []ansible.Series
	for _, s := range back.Series {
		if n := len(merged); n > 0 && merged[n-1].Resource == s.Resource && merged[n-1].UUID == s.UUID {
			merged[n-1].Ts = append(merged[n-1].Ts, s.Ts...)
			merged[n-1].Vs = append(merged[n-1].Vs, s.Vs...)
			continue
		}
		merged = append(merged, s)
	}
	back.Series = merged
	if !reflect.DeepEqual(back, j) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, j)
	}
}
