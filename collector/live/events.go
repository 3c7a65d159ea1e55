package live

import (
	"cmp"
	"slices"
	"sync"

	"github.com/peakline/peakline/collector/ansible"
)

// Events is what a job's event source has seen so far: the task starts in
// time order and the newest event. A source adds events as it reads them
// (collect's job_events follower; the agent's AWX API follower); a
// session's batcher asks it which task was running at a time and whether
// that is known yet.
//
// Events arrive in counter order at their source but may be added in any
// order; each event must be added once. It is safe for concurrent use.
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
	// complete: no event will be added anymore.
	complete bool
}

// NewEvents returns an empty Events.
func NewEvents() *Events { return &Events{} }

// Add records evs. It does not keep evs.
func (e *Events) Add(evs []ansible.JobEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sorted := true
	for _, ev := range evs {
		e.newestMs = max(e.newestMs, ev.TimeMs)
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
	}
	if !sorted {
		slices.SortFunc(e.starts, compareStarts)
	}
}

// Complete tells that no event will be added anymore (the job is over and
// its source has read all of them, or gave up): from now on every sample
// is settled, attributed with the task starts known.
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
