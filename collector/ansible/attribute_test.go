package ansible

import (
	"slices"
	"testing"
)

// Task uuids below don't sort like their counters, as in real jobs.
const (
	uuidA = "02fc0000-0000-0000-0000-00000000000f"
	uuidB = "02fc0000-0000-0000-0000-000000000003"
	uuidH = "02fc0000-0000-0000-0000-000000000001" // a handler
)

func startEv(counter, ms int64, uuid, name string) JobEvent {
	return JobEvent{Counter: counter, TimeMs: ms, TaskStart: true, UUID: uuid, TaskUUID: uuid, Task: name}
}

func plainEv(counter, ms int64, uuid string) JobEvent {
	return JobEvent{Counter: counter, TimeMs: ms, TaskUUID: uuid}
}

// A job: A starts at 1000 (counter 3), loop items of A at 1500 and 1600, B
// at 2000 (6), B again at 3000 (9, include_tasks in a loop), the handler H
// at 4000 (12), stats at 5000 (14).
var attrEvents = []JobEvent{
	{Counter: 1, TimeMs: 900},
	startEv(3, 1000, uuidA, "task a"),
	plainEv(4, 1500, uuidA), // runner_item_on_ok: no task start
	plainEv(5, 1600, uuidA),
	{Counter: 6, TimeMs: 1700}, // verbose: no event_data
	startEv(7, 2000, uuidB, "task b"),
	startEv(9, 3000, uuidB, "task b"),
	startEv(12, 4000, uuidH, "handler h"),
	{Counter: 14, TimeMs: 5000},
}

func TestAttribution(t *testing.T) {
	cases := []struct {
		name     string
		events   []JobEvent
		ms       int64
		uuid     string // the sample's, as the plugin filed it
		wantCtr  int64
		wantUUID string
		wantTask string
	}{
		{"inside the first task", attrEvents, 1200, uuidA, 3, uuidA, "task a"},
		{"after loop items and verbose events", attrEvents, 1800, uuidA, 3, uuidA, "task a"},
		{"tie with a start counts as started", attrEvents, 2000, uuidA, 7, uuidB, "task b"},
		{"a millisecond before a start", attrEvents, 1999, uuidB, 3, uuidA, "task a"},
		{"second start of a repeated uuid", attrEvents, 3500, uuidB, 9, uuidB, "task b"},
		{"handler filed under the previous task", attrEvents, 4200, uuidB, 12, uuidH, "handler h"},
		{"after the last event", attrEvents, 6000, uuidB, 12, uuidH, "handler h"},
		{"before the first start: own uuid", attrEvents, 800, uuidA, 3, uuidA, "task a"},
		{"before the first start: first start of a repeated uuid", attrEvents, 800, uuidB, 7, uuidB, "task b"},
		{"before the first start: no such start", attrEvents, 800, "ghost", 0, "ghost", "plugin name"},
		{"no events: own uuid", nil, 4200, uuidB, 0, uuidB, "plugin name"},
		{"events without task starts: own uuid", []JobEvent{{Counter: 1, TimeMs: 100}, {Counter: 2, TimeMs: 9000}}, 4200, uuidB, 0, uuidB, "plugin name"},
		{"starts out of counter order: time decides", []JobEvent{startEv(8, 1000, uuidB, "b"), startEv(5, 2000, uuidA, "a")}, 2500, uuidB, 5, uuidA, "a"},
		{"starts in one millisecond: the higher counter", []JobEvent{startEv(5, 1000, uuidA, "a"), startEv(8, 1000, uuidB, "b")}, 1000, uuidA, 8, uuidB, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events := slices.Clone(tc.events)
			samples := []sample{{ms: tc.ms, value: 1, resource: 0, uuid: tc.uuid, name: "plugin name"}}
			job := buildJob("j", LayoutRunner, events, samples)
			if !slices.Equal(events, tc.events) {
				t.Errorf("buildJob modified its events")
			}
			if len(job.Series) != 1 {
				t.Fatalf("got %d series, want 1", len(job.Series))
			}
			s := job.Series[0]
			if s.Counter != tc.wantCtr || s.UUID != tc.wantUUID || s.Task != tc.wantTask {
				t.Errorf("sample at %d filed under %s: got counter %d uuid %s task %q, want %d %s %q",
					tc.ms, tc.uuid, s.Counter, s.UUID, s.Task, tc.wantCtr, tc.wantUUID, tc.wantTask)
			}
		})
	}
}

func TestTaskSpans(t *testing.T) {
	type span struct {
		counter    int64
		uuid       string
		start, end int64
	}
	cases := []struct {
		name    string
		events  []JobEvent
		samples []sample
		want    []span
		last    *Event
	}{
		{
			name:   "events: next start, then the last event",
			events: attrEvents,
			samples: []sample{
				{ms: 1200, uuid: uuidA}, {ms: 4500, uuid: uuidB},
			},
			want: []span{{3, uuidA, 1000, 2000}, {7, uuidB, 2000, 3000}, {9, uuidB, 3000, 4000}, {12, uuidH, 4000, 5000}},
			last: &Event{Counter: 14, TimeMs: 5000},
		},
		{
			name:    "events: a sample after the last event ends the last task",
			events:  attrEvents,
			samples: []sample{{ms: 5250, uuid: uuidB}},
			want:    []span{{3, uuidA, 1000, 2000}, {7, uuidB, 2000, 3000}, {9, uuidB, 3000, 4000}, {12, uuidH, 4000, 5250}},
			last:    &Event{Counter: 14, TimeMs: 5000},
		},
		{
			name: "no events: one task per uuid, by first sample",
			samples: []sample{
				{ms: 3000, uuid: uuidA}, {ms: 1000, uuid: uuidB}, {ms: 1250, uuid: uuidB},
				{ms: 3100, uuid: uuidB}, // a boundary sample: the plugin filed it under B
				{ms: 3500, uuid: uuidA},
			},
			want: []span{{0, uuidB, 1000, 3000}, {0, uuidA, 3000, 3500}},
		},
		{
			name:   "no samples",
			events: []JobEvent{startEv(3, 1000, uuidA, "a"), {Counter: 4, TimeMs: 1200}},
			want:   []span{{3, uuidA, 1000, 1200}},
			last:   &Event{Counter: 4, TimeMs: 1200},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := buildJob("j", LayoutRunner, tc.events, tc.samples)
			var got []span
			for _, tk := range job.Tasks {
				got = append(got, span{tk.Counter, tk.UUID, tk.StartMs, tk.EndMs})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("tasks:\n got %v\nwant %v", got, tc.want)
			}
			if (job.LastEvent == nil) != (tc.last == nil) || job.LastEvent != nil && *job.LastEvent != *tc.last {
				t.Errorf("last event: got %v, want %v", job.LastEvent, tc.last)
			}
		})
	}
}

func TestGroupSeriesSameMillisecond(t *testing.T) {
	// Two samples of one series in one millisecond keep the larger value.
	samples := []sample{
		{ms: 1000, value: 5, uuid: uuidA}, {ms: 1000, value: 7, uuid: uuidA},
		{ms: 1000, value: 6, uuid: uuidA}, {ms: 1250, value: 1, uuid: uuidA},
	}
	job := buildJob("j", LayoutRecap, nil, samples)
	s := job.Series[0]
	if !slices.Equal(s.Ts, []int64{1000, 1250}) || !slices.Equal(s.Vs, []float64{7, 1}) {
		t.Errorf("got %v %v, want [1000 1250] [7 1]", s.Ts, s.Vs)
	}
}
