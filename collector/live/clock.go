package live

import (
	"log/slog"
	"sync"
	"time"
)

// Clock reads the two clocks a session keeps time with: the wall clock,
// which anchors sample times and may step (NTP correcting a wrong clock,
// an operator, a resumed VM), and the monotonic clock, which spaces them
// and never steps.
type Clock interface {
	// Read returns the wall clock time and the monotonic clock's reading
	// (from any fixed point), taken together.
	Read() (wall time.Time, mono time.Duration)
}

// SystemClock returns the process's clocks: the wall and monotonic
// readings of time.Now.
func SystemClock() Clock { return systemClock{start: time.Now()} }

type systemClock struct{ start time.Time }

func (c systemClock) Read() (time.Time, time.Duration) {
	now := time.Now()
	return now.Round(0), now.Sub(c.start) // Sub uses the monotonic readings
}

// wallStepThreshold is how far the wall clock may drift from the monotonic
// one before it counts as a step and is logged.
const wallStepThreshold = time.Second

// timeline is the time a session stamps its samples with: the wall clock
// at the first reading, plus the monotonic time elapsed since. A step of
// the wall clock (the wall and monotonic time elapsed since the previous
// step differ by more than wallStepThreshold) is logged once and moves no
// sample: samples taken after it keep their monotonic spacing from those
// before, which a store needs (a resource's times strictly increase) and
// a graph shows truthfully. The step is kept (skew), so that wall times
// read on this host after it, such as when an event source answered, map
// onto the timeline (fromWall).
//
// It is safe for concurrent use.
type timeline struct {
	clock Clock
	log   *slog.Logger

	mu         sync.Mutex
	started    bool
	anchor     time.Time     // the wall clock at the first reading
	anchorMono time.Duration // the monotonic clock then
	skew       time.Duration // wall clock − timeline, as of the latest step seen
}

func newTimeline(c Clock, log *slog.Logger) *timeline {
	return &timeline{clock: c, log: log}
}

// now returns the time on the timeline. It carries no monotonic reading:
// times on it compare and subtract by their wall fields, which the
// monotonic clock spaced.
func (tl *timeline) now() time.Time {
	t, _ := tl.read()
	return t
}

// fromWall maps a wall clock time read on this host onto the timeline,
// by the wall clock steps seen so far (this reading's included).
func (tl *timeline) fromWall(wall time.Time) time.Time {
	_, skew := tl.read()
	return wall.Round(0).Add(-skew)
}

// read reads the clock, logs a step of the wall clock since the previous
// step, and returns the time on the timeline and the skew.
func (tl *timeline) read() (time.Time, time.Duration) {
	wall, mono := tl.clock.Read()
	wall = wall.Round(0)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.started {
		tl.anchor, tl.anchorMono, tl.started = wall, mono, true
		return wall, 0
	}
	t := tl.anchor.Add(mono - tl.anchorMono)
	if step := wall.Sub(t) - tl.skew; step > wallStepThreshold || step < -wallStepThreshold {
		tl.skew += step
		tl.log.Warn("wall clock stepped; sample times keep following the monotonic clock",
			"step", step, "wall", wall.UTC().Format(time.RFC3339Nano), "stamp", t.UTC().Format(time.RFC3339Nano))
	}
	return t, tl.skew
}
