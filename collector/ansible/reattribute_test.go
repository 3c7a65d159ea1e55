package ansible

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestReattribute reads a real runner tree without its events (every
// sample at counter 0, tasks by the plugin's uuids), then re-attributes it
// with the tree's own events: the result is what reading the whole tree
// gives, series for series, and the input is left as it was.
func TestReattribute(t *testing.T) {
	dir := realTree("runner-basic")
	whole, err := Read(dir, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Read(dir, ReadOptions{Events: []JobEvent{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bare[0].Tasks) == 0 || bare[0].Tasks[0].Counter != 0 {
		t.Fatalf("without events the tasks are %+v, want counter 0", bare[0].Tasks)
	}
	files, err := ListEventFiles(filepath.Join(dir, "artifacts", "demo2", "job_events"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewEventReader()
	var events []JobEvent
	for _, f := range files {
		ev, err := r.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	before := cloneJob(bare[0])
	got := Reattribute(bare[0], events)
	if !reflect.DeepEqual(bare[0], before) {
		t.Fatal("Reattribute modified its input")
	}
	if !reflect.DeepEqual(got.Tasks, whole[0].Tasks) || !reflect.DeepEqual(got.Series, whole[0].Series) || !reflect.DeepEqual(got.LastEvent, whole[0].LastEvent) {
		t.Fatalf("re-attributed\n%+v\n%+v\nwant\n%+v\n%+v", got.Tasks, got.Series, whole[0].Tasks, whole[0].Series)
	}
	if got.Info != bare[0].Info || got.ID != bare[0].ID {
		t.Fatalf("id %q info %+v, want the input's %q %+v", got.ID, got.Info, bare[0].ID, bare[0].Info)
	}
	if len(whole[0].Tasks) != 3 || whole[0].Tasks[0].Counter == 0 {
		t.Fatalf("the reference has tasks %+v", whole[0].Tasks)
	}
}

func cloneJob(j *Job) *Job {
	c := *j
	c.Tasks = append([]Task(nil), j.Tasks...)
	c.Series = nil
	for _, s := range j.Series {
		s.Ts = append([]int64(nil), s.Ts...)
		s.Vs = append([]float64(nil), s.Vs...)
		c.Series = append(c.Series, s)
	}
	return &c
}
