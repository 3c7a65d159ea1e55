package live

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// Events is what a job's event source has seen so far: the task starts in
// time order, the newest event, and when the source last answered. A
// source adds events as it reads them (collect's job_events follower; the
// agent's AWX API follower) and tells when it answered; a session's
// batcher asks it which task was running at a time and whether that is
// known yet, and its sampler closes every resource's interval at each new
// task start (see sampler).
//
// The task running at time t is known once an event created at or after t
// was seen, or once the source answered at or after t with every event it
// holds up to then (a task writes no events while it runs). A source that
// does not answer (the AWX API down) tells nothing about the time since it
// last did: a task may have started then.
//
// Events arrive in counter order at their source but may be added in any
// order; each event must be added once. Make one with NewEvents, for one
// session. It is safe for concurrent use.
type Events struct {
	mu sync.Mutex
	// starts are the task starts seen, ordered by created time, then
	// counter; unsent are the starts not yet taken by takeTasks.
	starts []ansible.JobEvent
	unsent []ansible.JobEvent
	// last is the event with the highest counter; lastTaken tells whether
	// takeTasks returned it already.
	last      ansible.JobEvent
	haveLast  bool
	lastTaken bool
	// newestMs is the newest created time of any event seen: every task
	// that started at or before it is known (events arrive in order).
	newestMs int64
	// hosts is the most hosts a playbook_on_stats event said the play
	// processed (0: none seen yet).
	hosts int
	// complete: no event will be added anymore.
	complete bool
	// answeredMs is the newest time the source answered at (Answered);
	// haveAnswer tells whether it did.
	answeredMs int64
	haveAnswer bool
	// newStartMs is the newest task start added since the sampler last
	// took one (takeStart); wake, of capacity 1, tells that there is one.
	newStartMs   int64
	haveNewStart bool
	wake         chan struct{}
	// toTimeline maps Answered's times onto the session's timeline
	// (nil: as they are).
	toTimeline func(time.Time) time.Time
}

// mapWall makes Answered map its times with f, the timeline of the
// session e is given to.
func (e *Events) mapWall(f func(time.Time) time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.toTimeline = f
}

// NewEvents returns an empty Events.
func NewEvents() *Events { return &Events{wake: make(chan struct{}, 1)} }

// Add records evs. It does not keep evs. A task start among them makes a
// session over e close its samples' intervals at once (see sampler).
func (e *Events) Add(evs []ansible.JobEvent) {
	if e.add(evs) {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// add records evs and reports whether they hold a task start.
func (e *Events) add(evs []ansible.JobEvent) (newStart bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sorted := true
	for _, ev := range evs {
		e.newestMs = max(e.newestMs, ev.TimeMs)
		e.hosts = max(e.hosts, ev.Hosts)
		if !e.haveLast || ev.Counter > e.last.Counter {
			e.last, e.haveLast, e.lastTaken = ev, true, false
		}
		if !ev.TaskStart {
			continue
		}
		if n := len(e.starts); n > 0 && compareStarts(e.starts[n-1], ev) > 0 {
			sorted = false
		}
		e.starts = append(e.starts, ev)
		e.unsent = append(e.unsent, ev)
		if !e.haveNewStart || ev.TimeMs > e.newStartMs {
			e.newStartMs, e.haveNewStart = ev.TimeMs, true
		}
		newStart = true
	}
	if !sorted {
		slices.SortFunc(e.starts, compareStarts)
	}
	return newStart
}

// startAdded is ready when a task start was added since the previous
// takeStart; it is nil for a zero Events.
func (e *Events) startAdded() <-chan struct{} { return e.wake }

// takeStart returns the newest task start time added since the previous
// call; ok is false when none was.
func (e *Events) takeStart() (ms int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ms, ok = e.newStartMs, e.haveNewStart
	e.haveNewStart = false
	return ms, ok
}

// Answered tells that the source answered at time at, and that the events
// it had then were added before: every task start at or before at (as far
// as the source saves events by then) is known. The AWX follower calls it
// after a page that held every event left, collect's job_events follower
// after each scan. at is a wall clock time of this host; a session maps
// it across wall clock steps (see SessionConfig.Clock). Times older than
// one told before are ignored.
//
// A sample is sent attributed with the task starts known only once the
// source answered after it (see SessionConfig.Settle): while the source
// does not answer, samples are held.
func (e *Events) Answered(at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.toTimeline != nil {
		at = e.toTimeline(at)
	}
	if ms := at.UnixMilli(); !e.haveAnswer || ms > e.answeredMs {
		e.answeredMs, e.haveAnswer = ms, true
	}
}

// Complete tells that the source has every event of the job (the job is
// over and its events were all read): from now on every sample is
// settled, attributed with the task starts known. A source that gives up
// instead (the AWX API still down when the job's drain ends) does not call
// it: at Close, the samples newer than its last answer go out with no
// task.
func (e *Events) Complete() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.complete = true
}

func compareStarts(a, b ansible.JobEvent) int {
	if c := cmp.Compare(a.TimeMs, b.TimeMs); c != 0 {
		return c
	}
	return cmp.Compare(a.Counter, b.Counter)
}

// Hosts returns the most hosts a playbook_on_stats event said the play
// processed, 0 before one is seen.
func (e *Events) Hosts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hosts
}

// taskAt returns the task start with the greatest created time at or before
// ms (the greatest counter among equal times); ok is false before the first
// task.
func (e *Events) taskAt(ms int64) (start ansible.JobEvent, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, _ := slices.BinarySearchFunc(e.starts, ms, func(ev ansible.JobEvent, t int64) int {
		if ev.TimeMs <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return ansible.JobEvent{}, false
	}
	return e.starts[i-1], true
}

// settled reports whether every task start at or before ms is known: an
// event created at or after ms was seen, or the events are complete.
func (e *Events) settled(ms int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.complete || (e.haveLast && e.newestMs >= ms)
}

// answeredSince reports whether the source answered at or after ms, or the
// events are complete.
func (e *Events) answeredSince(ms int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.complete || (e.haveAnswer && e.answeredMs >= ms)
}

// takeTasks returns the task starts not returned before, and the newest
// event when it changed since the previous call (else ok is false).
func (e *Events) takeTasks() (starts []ansible.JobEvent, last ansible.JobEvent, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	starts, e.unsent = e.unsent, nil
	if e.haveLast && !e.lastTaken {
		e.lastTaken = true
		return starts, e.last, true
	}
	return starts, ansible.JobEvent{}, false
}

// seenAny reports whether any event was added.
func (e *Events) seenAny() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.haveLast
}
