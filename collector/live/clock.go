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

// wallStepThreshold is how far the wall clock may drift from the timeline
// before it counts as a step.
const wallStepThreshold = time.Second

// timeline is the time a session stamps its samples with: the wall clock
// at an anchor, plus the monotonic time elapsed since. The first reading
// anchors it. A step of the wall clock (the wall clock and the timeline
// differ by more than wallStepThreshold beyond what was seen before) is
// logged once, and then:
//
//   - a step that leaves the wall clock ahead of the timeline (NTP
//     correcting a slow clock, a resumed VM whose monotonic clock did not
//     count the suspension) re-anchors it: later samples carry the wall
//     clock's times, so the gap shows, and within each stretch between
//     anchors the spacing is the monotonic clock's;
//   - a step that leaves the wall clock behind cannot be followed without
//     stamping later samples before earlier ones (a store needs a
//     resource's times to strictly increase), so the timeline keeps the
//     monotonic spacing, and re-anchors as soon as the wall clock is at or
//     ahead of it again. The timeline is never further ahead of the wall
//     clock than the step.
//
// Smaller drift moves nothing. The difference left (skew) maps wall times
// read on this host, such as when an event source answered, onto the
// timeline (fromWall).
//
// It is safe for concurrent use.
type timeline struct {
	clock Clock
	log   *slog.Logger

	mu         sync.Mutex
	started    bool
	anchor     time.Time     // the wall clock at the latest anchoring
	anchorMono time.Duration // the monotonic clock then
	// skew is wall clock − timeline while the wall clock is behind
	// after a step (negative), else 0.
	skew time.Duration
}

// instant is a reading of a timeline: the time on it, and the monotonic
// clock then, which measures intervals across re-anchorings.
type instant struct {
	at   time.Time
	mono time.Duration
}

func newTimeline(c Clock, log *slog.Logger) *timeline {
	return &timeline{clock: c, log: log}
}

// now returns the time on the timeline. It carries no monotonic reading:
// times on it compare and subtract by their wall fields.
func (tl *timeline) now() time.Time {
	i, _ := tl.read()
	return i.at
}

// instant returns the time on the timeline with the monotonic reading.
func (tl *timeline) instant() instant {
	i, _ := tl.read()
	return i
}

// fromWall maps a wall clock time read on this host onto the timeline,
// by the difference between the two as of this reading.
func (tl *timeline) fromWall(wall time.Time) time.Time {
	_, skew := tl.read()
	return wall.Round(0).Add(-skew)
}

// read reads the clock, logs a step of the wall clock, re-anchors where
// it may, and returns the reading and the skew.
func (tl *timeline) read() (instant, time.Duration) {
	wall, mono := tl.clock.Read()
	wall = wall.Round(0)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.started {
		tl.anchor, tl.anchorMono, tl.started = wall, mono, true
		return instant{wall, mono}, 0
	}
	t := tl.anchor.Add(mono - tl.anchorMono)
	d := wall.Sub(t)
	step := d - tl.skew
	stepped := step > wallStepThreshold || step < -wallStepThreshold
	switch {
	case d > wallStepThreshold || (tl.skew < 0 && d >= 0):
		tl.anchor, tl.anchorMono, tl.skew = wall, mono, 0
		if stepped {
			tl.log.Warn("wall clock stepped; sample times re-anchored to it",
				"step", step, "wall", wall.UTC().Format(time.RFC3339Nano), "stamp", t.UTC().Format(time.RFC3339Nano))
		} else {
			tl.log.Info("wall clock caught up with the sample times; re-anchored to it",
				"wall", wall.UTC().Format(time.RFC3339Nano), "stamp", t.UTC().Format(time.RFC3339Nano))
		}
		return instant{wall, mono}, 0
	case stepped && d < 0:
		tl.skew = d
		tl.log.Warn("wall clock stepped behind the sample times; they keep the monotonic clock's spacing until it catches up",
			"step", step, "behind", -d, "wall", wall.UTC().Format(time.RFC3339Nano), "stamp", t.UTC().Format(time.RFC3339Nano))
	}
	return instant{t, mono}, tl.skew
}
