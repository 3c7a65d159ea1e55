package ship

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
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
		batches := Batches(job, tc.max)
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
	job := &ansible.Job{ID: "7", Tasks: []ansible.Task{{Counter: 3, UUID: "u", Name: "t", StartMs: 1}}, LastEvent: &ansible.Event{Counter: 4, TimeMs: 2}}
	b := Batches(job, 0)
	if len(b) != 1 || len(b[0].Tasks) != 1 || b[0].LastEvent == nil || b[0].Series != nil {
		t.Errorf("got %+v, want one batch with the tasks and last event", b)
	}
}

// TestBatchJSON pins the wire shape to docs/CONTRACTS.md.
func TestBatchJSON(t *testing.T) {
	job := &ansible.Job{
		ID:        "demo2",
		Tasks:     []ansible.Task{{Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Name: "burn some cpu", StartMs: 1796009975979, EndMs: 1796009979461}},
		LastEvent: &ansible.Event{Counter: 12, TimeMs: 1796009981831},
		Series: []ansible.Series{{Resource: "cpu", Counter: 3, UUID: "02fc0000-0001-bfc5-3899-000000000004", Task: "burn some cpu",
			Ts: []int64{1796009976236, 1796009976486}, Vs: []float64{93.46744753694286, 102.176635754406}}},
	}
	got, err := json.Marshal(Batches(job, 0)[0])
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
	got, _ = json.Marshal(Batches(job, 1)[1])
	if want := `{"job_id":"demo2","series":[{"resource":"cpu","counter":3,"uuid":"02fc0000-0001-bfc5-3899-000000000004","task":"burn some cpu","t":[1796009976486],"v":[102.176635754406]}]}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A job with more tasks and series than one batch may carry is split so
// that no batch passes MaxBatchTasks or MaxBatchSeries, tasks first, and
// together the batches hold every task and sample exactly once.
func TestBatchesSplitTasksAndSeries(t *testing.T) {
	const tasks = 2*MaxBatchTasks + 7
	job := &ansible.Job{ID: "big", LastEvent: &ansible.Event{Counter: 3 * tasks, TimeMs: 9e12}}
	for i := range tasks {
		job.Tasks = append(job.Tasks, ansible.Task{Counter: int64(3 * (i + 1)), UUID: "u", Name: "t", StartMs: int64(1_000_000 + i)})
		job.Series = append(job.Series, ansible.Series{Resource: "cpu", Counter: int64(3 * (i + 1)), UUID: "u", Task: "t",
			Ts: []int64{int64(1_000_000 + i)}, Vs: []float64{float64(i)}})
	}
	batches := Batches(job, 0)
	var gotTasks, gotSamples int
	seenSeries := false
	for i, b := range batches {
		if len(b.Tasks) > MaxBatchTasks || len(b.Series) > MaxBatchSeries || b.Samples() > DefaultBatchSamples {
			t.Fatalf("batch %d: %d tasks, %d series, %d samples; limits %d, %d, %d", i, len(b.Tasks), len(b.Series), b.Samples(), MaxBatchTasks, MaxBatchSeries, DefaultBatchSamples)
		}
		if (b.LastEvent != nil) != (i == 0) {
			t.Errorf("batch %d: last event %v, want it in the first batch only", i, b.LastEvent)
		}
		if len(b.Tasks) > 0 && seenSeries && len(b.Series) == 0 {
			t.Errorf("batch %d: tasks after samples", i)
		}
		seenSeries = seenSeries || len(b.Series) > 0
		for k, tk := range b.Tasks {
			if want := TaskOf(job.Tasks[gotTasks+k]); tk != want {
				t.Fatalf("batch %d task %d = %+v, want %+v", i, k, tk, want)
			}
		}
		gotTasks += len(b.Tasks)
		for _, s := range b.Series {
			if s.Vs[0] != float64(gotSamples) {
				t.Fatalf("batch %d: sample %v out of order, want %d", i, s.Vs[0], gotSamples)
			}
			gotSamples += len(s.Ts)
		}
	}
	if gotTasks != tasks || gotSamples != tasks {
		t.Fatalf("batches hold %d tasks and %d samples, want %d of each", gotTasks, gotSamples, tasks)
	}
	if len(batches) != 5 { // tasks 5000, 5000 and 7 (with the first 5000 series), then 5000 and 7 series
		t.Fatalf("%d batches, want 5", len(batches))
	}
}

// TestBatchJSONStall pins a stall series on the wire: the resource's
// name, seconds per interval as values.
func TestBatchJSONStall(t *testing.T) {
	job := &ansible.Job{ID: "j", Series: []ansible.Series{{Resource: ansible.ResourceCPUStall, Counter: 3, UUID: "u", Task: "t", Ts: []int64{1796009976236}, Vs: []float64{0.0625}}}}
	got, err := json.Marshal(Batches(job, 0)[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"job_id":"j","series":[{"resource":"cpu_stall","counter":3,"uuid":"u","task":"t","t":[1796009976236],"v":[0.0625]}]}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
