package collector

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// jobEvent is an ansible-runner job event reduced to what attribution needs.
type jobEvent struct {
	counter   int64
	ms        int64 // created, unix milliseconds
	taskStart bool  // a task, handler or cleanup task started
	uuid      string
	taskUUID  string // event_data.task_uuid; "" for events outside a task
	task      string // event_data.task
	play      string // event_data.play
	role      string // event_data.role
	taskPath  string // event_data.task_path: file:line
	playbook  string // event_data.playbook
}

// taskStartEvents are the events that start a task. ansible-runner reports
// handlers and cleanup tasks as playbook_on_task_start too (is_conditional
// true), other emitters use their own names. Loop items (runner_item_on_*)
// and includes (playbook_on_include) start no task.
func isTaskStart(event string) bool {
	switch event {
	case "playbook_on_task_start", "playbook_on_handler_task_start", "playbook_on_cleanup_task_start":
		return true
	}
	return false
}

// rawEvent is the part of an ansible-runner job event file Read uses.
type rawEvent struct {
	UUID      string `json:"uuid"`
	Counter   *int64 `json:"counter"`
	Event     string `json:"event"`
	Created   string `json:"created"`
	EventData *struct {
		Task     string `json:"task"`
		Name     string `json:"name"`
		TaskUUID string `json:"task_uuid"`
		Play     string `json:"play"`
		Role     string `json:"role"`
		TaskPath string `json:"task_path"`
		Playbook string `json:"playbook"`
	} `json:"event_data"` // absent or null on verbose events
}

// listEventFiles lists dir's job event files: <counter>-<uuid>.json. The
// display callback's <uuid>-partial.json files (not yet merged by the runner)
// and the runner's .json.tmp files are not events.
func listEventFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list job events: %w", err)
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, "-partial.json") {
			continue
		}
		paths = append(paths, filepath.Join(dir, name))
	}
	return paths, nil
}

// readEventFile reads one job event file.
func readEventFile(path string, in *interner) (jobEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return jobEvent{}, fmt.Errorf("cannot read job event file %q: %w", path, err)
	}
	var raw rawEvent
	if err := json.Unmarshal(data, &raw); err != nil {
		return jobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: %w", path, ErrBadEvent, err)
	}
	if raw.Counter == nil {
		return jobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: no \"counter\"", path, ErrBadEvent)
	}
	created, err := parseCreated(raw.Created)
	if err != nil {
		return jobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: %w", path, ErrBadEvent, err)
	}
	ev := jobEvent{
		counter:   *raw.Counter,
		ms:        created,
		taskStart: isTaskStart(raw.Event),
		uuid:      raw.UUID,
	}
	if d := raw.EventData; d != nil {
		ev.taskUUID = in.get(d.TaskUUID)
		ev.task = d.Task
		if ev.task == "" {
			ev.task = d.Name
		}
		ev.task = in.get(ev.task)
		ev.playbook = in.get(d.Playbook)
		if ev.taskStart {
			ev.play, ev.role, ev.taskPath = in.get(d.Play), in.get(d.Role), d.TaskPath
		}
	}
	if ev.taskStart && ev.taskUUID == "" {
		ev.taskUUID = raw.UUID // the task start event's uuid is the task's
	}
	return ev, nil
}

// createdLayouts are the forms of an event's "created" time: Python's
// isoformat() with or without an offset (none means UTC), and RFC 3339.
var createdLayouts = [...]string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
}

// parseCreated parses an event's created time to unix milliseconds, rounded
// to the nearest. A time without an offset is UTC.
func parseCreated(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("no \"created\" time")
	}
	for _, layout := range createdLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Round(time.Millisecond).UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("cannot parse \"created\" time %q: want ISO 8601 like 2026-11-30T03:39:35.979439 (UTC) or with an offset", s)
}

// sortTaskStarts returns the task start events of evs ordered by created
// time, then counter. Task uuids don't sort like counters, so they are never
// a sort key.
func sortTaskStarts(evs []jobEvent) []jobEvent {
	var starts []jobEvent
	for _, ev := range evs {
		if ev.taskStart {
			starts = append(starts, ev)
		}
	}
	slices.SortFunc(starts, func(a, b jobEvent) int {
		if c := cmp.Compare(a.ms, b.ms); c != 0 {
			return c
		}
		return cmp.Compare(a.counter, b.counter)
	})
	return starts
}

// lastEvent returns the event with the highest counter, or nil.
func lastEvent(evs []jobEvent) *Event {
	if len(evs) == 0 {
		return nil
	}
	last := evs[0]
	for _, ev := range evs[1:] {
		if ev.counter > last.counter {
			last = ev
		}
	}
	return &Event{Counter: last.counter, TimeMs: last.ms}
}
