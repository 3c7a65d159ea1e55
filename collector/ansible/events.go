package ansible

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// JobEvent is an ansible-runner job event reduced to what attribution needs.
type JobEvent struct {
	Counter   int64
	TimeMs    int64 // created, unix milliseconds
	TaskStart bool  // a task, handler or cleanup task started
	UUID      string
	TaskUUID  string // event_data.task_uuid; "" for events outside a task
	Task      string // event_data.task
	Play      string // event_data.play
	Role      string // event_data.role
	TaskPath  string // event_data.task_path: file:line
	Playbook  string // event_data.playbook
	// Hosts is the hosts a playbook_on_stats event says the play
	// processed; 0 on other events.
	Hosts int
	// Killed marks a failed task result (runner_on_failed,
	// runner_item_on_failed) whose rc says the process was killed by
	// SIGKILL, as the OOM killer kills: -9 (the command module) or 137
	// (a shell's 128 + 9).
	Killed bool
}

// KilledRC reports whether a task result's rc says SIGKILL.
func KilledRC(rc int64) bool { return rc == -9 || rc == 137 }

// IsTaskStart reports whether an event (the event field of a job event,
// as runner writes it and the AWX API serves it) starts a task. ansible-runner reports
// handlers and cleanup tasks as playbook_on_task_start too (is_conditional
// true), other emitters use their own names. Loop items (runner_item_on_*)
// and includes (playbook_on_include) start no task.
func IsTaskStart(event string) bool {
	switch event {
	case "playbook_on_task_start", "playbook_on_handler_task_start", "playbook_on_cleanup_task_start":
		return true
	}
	return false
}

// rawEvent is the part of an ansible-runner job event file Read uses.
type rawEvent struct {
	UUID      string     `json:"uuid"`
	Counter   *int64     `json:"counter"`
	Event     string     `json:"event"`
	Created   string     `json:"created"`
	EventData *eventData `json:"event_data"` // absent or null on verbose events
}

// eventData is the part of a job event's event_data Read uses; absent or
// null on verbose events.
type eventData struct {
	Task     string `json:"task"`
	Name     string `json:"name"`
	TaskUUID string `json:"task_uuid"`
	Play     string `json:"play"`
	Role     string `json:"role"`
	TaskPath string `json:"task_path"`
	Playbook string `json:"playbook"`
	// Res is the task result's rc; Processed the hosts of a
	// playbook_on_stats event.
	Res       eventRes `json:"res"`
	Processed hostSet  `json:"processed"`
}

// eventRes is what Read keeps of a task result (event_data.res): its rc
// when it is an integer. Any other JSON (a result that is no object, an
// rc that is no integer) leaves RC nil, never an error.
type eventRes struct{ RC *int64 }

func (r *eventRes) UnmarshalJSON(b []byte) error {
	var v struct {
		RC json.RawMessage `json:"rc"`
	}
	*r = eventRes{}
	if json.Unmarshal(b, &v) == nil {
		r.RC = parseRC(v.RC)
	}
	return nil
}

// parseRC reads an rc's JSON as an integer; nil for anything else.
func parseRC(raw []byte) *int64 {
	var n int64
	if len(raw) == 0 || raw[0] == 'n' || json.Unmarshal(raw, &n) != nil {
		return nil
	}
	return &n
}

// hostSet is the number of distinct keys of event_data.processed (a
// map of host name to count); any other JSON counts 0, never an error.
type hostSet int

func (h *hostSet) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	*h = 0
	if json.Unmarshal(b, &m) == nil {
		*h = hostSet(len(m))
	}
	return nil
}

// ListEventFiles lists dir's job event files: <counter>-<uuid>.json. The
// display callback's <uuid>-partial.json files (not yet merged by the runner)
// and the runner's .json.tmp files are not events.
func ListEventFiles(dir string) ([]string, error) {
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

// EventReader reads job event files one at a time, sharing the strings
// that repeat across a job's events (task names, uuids, plays). It reads
// regular files of at most DefaultMaxFileBytes only, as Read does. It is
// not safe for concurrent use.
type EventReader struct {
	in   *interner
	gate fileGate
}

// NewEventReader returns a reader with nothing shared yet.
func NewEventReader() *EventReader {
	g, _ := newFileGate("", 0)
	return &EventReader{in: newInterner(), gate: g}
}

// ReadFile reads one job event file (<counter>-<uuid>.json). An error
// wrapping ErrBadEvent means the file is not (or not yet) a job event;
// one wrapping fs.ErrNotExist that it is gone; ErrNotRegular or
// ErrTooLarge that it is not read.
func (r *EventReader) ReadFile(path string) (JobEvent, error) {
	return readEventFile(r.gate, path, r.in)
}

// readEventFile reads one job event file through gate.
func readEventFile(gate fileGate, path string, in *interner) (JobEvent, error) {
	f, err := gate.open(path)
	if err != nil {
		return JobEvent{}, fmt.Errorf("cannot read job event file %q: %w", path, err)
	}
	defer f.Close()
	var raw rawEvent
	if err := decodeEvent(f, &raw); err != nil {
		if isReadError(err) {
			return JobEvent{}, fmt.Errorf("cannot read job event file %q: %w", path, err)
		}
		return JobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: %w", path, ErrBadEvent, err)
	}
	if raw.Counter == nil {
		return JobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: no \"counter\"", path, ErrBadEvent)
	}
	created, err := ParseCreated(raw.Created)
	if err != nil {
		return JobEvent{}, fmt.Errorf("cannot parse job event file %q: %w: %w", path, ErrBadEvent, err)
	}
	ev := JobEvent{
		Counter:   *raw.Counter,
		TimeMs:    created,
		TaskStart: IsTaskStart(raw.Event),
		UUID:      raw.UUID,
	}
	if d := raw.EventData; d != nil {
		ev.TaskUUID = in.get(d.TaskUUID)
		ev.Task = d.Task
		if ev.Task == "" {
			ev.Task = d.Name
		}
		ev.Task = in.get(ev.Task)
		ev.Playbook = in.get(d.Playbook)
		if ev.TaskStart {
			ev.Play, ev.Role, ev.TaskPath = in.get(d.Play), in.get(d.Role), d.TaskPath
		}
		switch raw.Event {
		case "playbook_on_stats":
			ev.Hosts = int(d.Processed)
		case "runner_on_failed", "runner_item_on_failed":
			ev.Killed = d.Res.RC != nil && KilledRC(*d.Res.RC)
		}
	}
	if ev.TaskStart && ev.TaskUUID == "" {
		ev.TaskUUID = raw.UUID // the task start event's uuid is the task's
	}
	return ev, nil
}

// isReadError reports whether err says the file could not be read, rather
// than that what it holds is not a job event.
func isReadError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) || errors.Is(err, ErrTooLarge)
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

// ParseCreated parses an event's created time to unix milliseconds, rounded
// to the nearest. A time without an offset is UTC.
func ParseCreated(s string) (int64, error) {
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
func sortTaskStarts(evs []JobEvent) []JobEvent {
	var starts []JobEvent
	for _, ev := range evs {
		if ev.TaskStart {
			starts = append(starts, ev)
		}
	}
	slices.SortFunc(starts, func(a, b JobEvent) int {
		if c := cmp.Compare(a.TimeMs, b.TimeMs); c != 0 {
			return c
		}
		return cmp.Compare(a.Counter, b.Counter)
	})
	return starts
}

// lastEvent returns the event with the highest counter, or nil.
func lastEvent(evs []JobEvent) *Event {
	if len(evs) == 0 {
		return nil
	}
	last := evs[0]
	for _, ev := range evs[1:] {
		if ev.Counter > last.Counter {
			last = ev
		}
	}
	return &Event{Counter: last.Counter, TimeMs: last.TimeMs}
}
