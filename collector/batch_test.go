package collector

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestBatchesSplit(t *testing.T) {
	job := readOne(t, realTree("runner-basic")) // 72 samples in 8 series
	cases := []struct {
		max      int
		wantSize []int
	}{
		{0, []int{72}},
		{-1, []int{72}},
		{72, []int{72}},
		{71, []int{71, 1}},
		{10, []int{10, 10, 10, 10, 10, 10, 10, 2}},
		{1, slices.Repeat([]int{1}, 72)},
	}
	for _, tc := range cases {
		batches := job.Batches(tc.max)
		var sizes []int
		var got []rawPoint
		for i, b := range batches {
			sizes = append(sizes, b.Samples())
			if b.JobID != "demo2" {
				t.Errorf("max %d: batch %d job id %q", tc.max, i, b.JobID)
			}
			if (i == 0) != (b.Tasks != nil) || (i == 0) != (b.LastEvent != nil) {
				t.Errorf("max %d: batch %d tasks %v last event %v; want them in the first batch only", tc.max, i, b.Tasks, b.LastEvent)
			}
			for _, s := range b.Series {
				for k := range s.Ts {
					got = append(got, rawPoint{s.Resource, s.Counter, s.Ts[k], s.Vs[k]})
				}
			}
		}
		if !slices.Equal(sizes, tc.wantSize) {
			t.Errorf("max %d: batch sizes %v, want %v", tc.max, sizes, tc.wantSize)
		}
		// Concatenated, the batches are the job, in order.
		if want := jobPoints(job); !slices.Equal(got, want) {
			t.Errorf("max %d: batches hold other samples than the job", tc.max)
		}
	}
}

func TestBatchesEmptyJob(t *testing.T) {
	job := &Job{ID: "7", Tasks: []Task{{Counter: 3, UUID: "u", Name: "t", StartMs: 1}}, LastEvent: &Event{Counter: 4, TimeMs: 2}}
	b := job.Batches(0)
	if len(b) != 1 || len(b[0].Tasks) != 1 || b[0].LastEvent == nil || b[0].Series != nil {
		t.Errorf("got %+v, want one batch with the tasks and last event", b)
	}
}

// TestBatchJSON pins the wire shape to docs/CONTRACTS.md.
func TestBatchJSON(t *testing.T) {
	job := &Job{
		ID:        "demo2",
		Tasks:     []Task{{Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Name: "burn some cpu", StartMs: 1796009975979, EndMs: 1796009979461}},
		LastEvent: &Event{Counter: 12, TimeMs: 1796009981831},
		Series: []Series{{Resource: "cpu", Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Task: "burn some cpu",
			Ts: []int64{1796009976236, 1796009976486}, Vs: []float64{93.46744753694286, 102.176635754406}}},
	}
	got, err := json.Marshal(job.Batches(0)[0])
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"job_id":"demo2",` +
		`"tasks":[{"counter":3,"uuid":"02fc0000-0001-bfc5-3899-000000000004","name":"burn some cpu","start":1796009975979}],` +
		`"last_event":{"counter":12,"time":1796009981831},` +
		`"series":[{"resource":"cpu","counter":3,"uuid":"02fc0000-0001-bfc5-3899-000000000004","task":"burn some cpu",` +
		`"t":[1796009976236,1796009976486],"v":[93.46744753694286,102.176635754406]}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Later batches carry the job id and series only.
	got, _ = json.Marshal(job.Batches(1)[1])
	if want := `{"job_id":"demo2","series":[{"resource":"cpu","counter":3,"uuid":"02fc0000-0001-bfc5-3899-000000000004","task":"burn some cpu","t":[1796009976486],"v":[102.176635754406]}]}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
