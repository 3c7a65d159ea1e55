package awx

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// Defaults of FollowerConfig.
const (
	DefaultMinInterval = time.Second
	DefaultGapWait     = 30 * time.Second
)

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	// MinInterval is the least time between two requests of the job; 0
	// means DefaultMinInterval. Poll makes no request sooner.
	MinInterval time.Duration
	// Backoff spaces the requests after failures.
	Backoff Backoff
	// GapWait is how long a hole in the counters (an event AWX has not
	// saved yet while later ones are) is waited for before the follower
	// moves past it; 0 means DefaultGapWait.
	GapWait time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Log receives a line when the follower starts failing and when it
	// recovers; an outage of AWX itself (unreachable, 5xx, 429, a refused
	// token) is logged once by the first of the followers sharing the
	// Client, its end once, each job's part at debug level. nil discards
	// them.
	Log *slog.Logger
	// Sink, when set, gets every event as the follower takes it, each
	// once, in counter order and never past a hole; Answered after each
	// answer that showed every event saved up to its request; and
	// Complete once the events are complete (Done). *live.Events is one.
	Sink Sink
	// Unified says the id is a unified job's whose type is not known
	// yet (an id found on a node: every type shares one sequence). The
	// first request asks AWX what it is (Client.UnifiedJob); the metadata
	// is then read from the job's URL and the events from its type's list
	// (EventsPath). An id AWX does not know ends the follower (Unknown).
	// Without it the id is a playbook job's (/api/v2/jobs/{id}/).
	Unified bool
}

// Sink takes a Follower's events: a session's live.Events.
type Sink interface {
	// Add records events; it must not keep evs.
	Add(evs []ansible.JobEvent)
	// Answered tells that AWX answered a request sent at at with every
	// event it had saved after the follower's position (the last page,
	// no hole left), all added before: a task start saved by then is
	// known. While AWX does not answer, no call comes.
	Answered(at time.Time)
	// Complete tells that no event will be added anymore.
	Complete()
}

// Follower follows one AWX job's events: each Poll makes at most one
// request, for the job's metadata or for the next page of its events, and
// the follower hands the events to its Sink, where a session finds the
// task starts. One goroutine polls (Poll must not run concurrently with
// itself, so that the sink gets the events in order); the other methods
// are safe to call from any goroutine.
//
// Its position is the highest counter below which every event was seen
// (AWX's callback receiver may save events out of counter order); it asks
// for the events after it and skips the ones already seen. A hole that
// stays longer than GapWait is passed. Failures keep the position: the
// next request, after Backoff, asks again from it. A page too large for
// the client (ErrTooLarge) is asked for again at once with half the page
// size, down to one event.
type Follower struct {
	client *Client
	id     int64
	cfg    FollowerConfig

	mu sync.Mutex
	// meta is the job's metadata, haveMeta whether it was read, and
	// metaDue whether the next request reads it again.
	meta     Job
	haveMeta bool
	metaDue  bool
	// eventsPath is the job's events list once its type is known ("":
	// a playbook job's); unknown tells that AWX knows no unified job of
	// the id.
	eventsPath string
	unknown    bool
	// adHocTasks are the task uuids of an ad hoc command seen starting:
	// its events hold no playbook_on_task_start, the module's
	// runner_on_start starts its one task.
	adHocTasks map[string]bool

	cursor   int64              // every counter <= cursor was seen
	above    map[int64]Event    // events seen above cursor
	gapSince time.Time          // when the hole above cursor was first seen; zero when none
	starts   []Event            // task starts seen, by created time then counter
	taken    []ansible.JobEvent // events taken by this Poll, for the sink
	answered time.Time          // request time of this Poll's answer, for the sink; zero: none
	newest   time.Time          // newest created time of the events up to cursor
	done     bool               // every event is in
	told     bool               // the sink was told Complete
	requests int                // requests made
	failures int                // failed requests in a row
	lastErr  error              // the last request's error, nil after a success
	// ownFailure is whether a failure of the job's own (not of AWX
	// itself) was logged since the last success.
	ownFailure bool
	// pageSize is the page_size asked for; 0 is the client's. It halves
	// after a page too large to read, for the rest of the job.
	pageSize int
	shrunk   bool      // the last request's page was too large; pageSize is smaller now
	notUntil time.Time // no request before this time
}

// NewFollower returns a follower of job id through c.
func NewFollower(c *Client, id int64, cfg FollowerConfig) *Follower {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.GapWait <= 0 {
		cfg.GapWait = DefaultGapWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Follower{client: c, id: id, cfg: cfg, above: map[int64]Event{}}
}

// JobID returns the AWX job id followed.
func (f *Follower) JobID() int64 { return f.id }

// Poll makes at most one request, unless the previous one was less than
// MinInterval ago, a backoff is running, or nothing is left to ask (the
// events are complete and the job's status is final). It asks, in this
// order: the job's metadata when not read yet or due again; else the
// events after the follower's position. An events page that comes back
// empty makes the metadata due, so that a final status is seen; the events
// are complete once playbook_on_stats was seen, or an empty page answered
// a request sent after the metadata said the job is final and its events
// are saved. After that Poll reads only the metadata, until it is final.
//
// An events page that holds every event left (no next link) with no hole
// left tells the sink AWX answered at the time the request was made; an
// empty page does too.
//
// It returns the request's error, nil when none was made; the follower
// keeps it too (Err).
func (f *Follower) Poll(ctx context.Context) error {
	now := f.cfg.Now()
	f.mu.Lock()
	if now.Before(f.notUntil) || f.unknown || (f.done && f.haveMeta && f.meta.Final()) {
		f.mu.Unlock()
		return nil
	}
	resolve := f.cfg.Unified && !f.haveMeta
	metaURL, eventsPath := f.meta.URL, f.eventsPath
	f.notUntil = now.Add(f.cfg.MinInterval)
	f.requests++
	askMeta := !f.haveMeta || f.metaDue || f.done
	cursor, pageSize := f.cursor, f.pageSize
	// AWX says when a final job's events are all saved; without that
	// word, GapWait after the finish is taken as enough.
	finalBefore := f.haveMeta && f.meta.Final() &&
		(f.meta.EventProcessingFinished || (!f.meta.Finished.IsZero() && now.Sub(f.meta.Finished) >= f.cfg.GapWait))
	f.mu.Unlock()

	var err error
	switch {
	case resolve:
		var meta Job
		meta, err = f.client.UnifiedJob(ctx, f.id)
		if errors.Is(err, ErrJobNotFound) {
			f.mu.Lock()
			f.unknown = true
			f.mu.Unlock()
			f.cfg.Log.Info("awx: AWX knows no unified job of this id (or the token's user may not see it); not following it", "job", f.id)
			f.settle(nil)
			return err
		}
		if err == nil {
			f.resolved(meta)
		}
	case askMeta:
		var meta Job
		if f.cfg.Unified {
			meta, err = f.client.JobAt(ctx, f.id, metaURL)
		} else {
			meta, err = f.client.Job(ctx, f.id)
		}
		if err == nil {
			f.mu.Lock()
			meta.Type, meta.URL = cmp.Or(meta.Type, f.meta.Type), cmp.Or(meta.URL, f.meta.URL)
			f.meta, f.haveMeta, f.metaDue = meta, true, false
			f.mu.Unlock()
		}
	default:
		var p Page
		if pageSize == 0 {
			pageSize = f.client.pageSize
		}
		if eventsPath != "" {
			p, err = f.client.eventsAt(ctx, eventsPath, f.id, cursor, pageSize)
		} else {
			p, err = f.client.events(ctx, f.id, cursor, pageSize)
		}
		if err == nil {
			f.add(p.Events, finalBefore)
			f.mu.Lock()
			// The last page, with no hole left: every event AWX had
			// saved when it was asked is in.
			if p.Next == "" && len(f.above) == 0 {
				f.answered = now
			}
			f.mu.Unlock()
		} else if errors.Is(err, ErrTooLarge) && pageSize > 1 {
			f.shrinkPages(pageSize / 2)
		}
	}
	if err != nil && ctx.Err() != nil {
		// Cut short by the caller (the agent stopping): no word about
		// AWX, so neither a failure nor a backoff.
		return err
	}
	f.settle(err)
	f.feed()
	return err
}

// resolved records what UnifiedJob said the id is. A type with no
// events of its own (a workflow job, a type this client does not know)
// has its events complete at once.
func (f *Follower) resolved(meta Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.meta, f.haveMeta, f.metaDue = meta, true, false
	path, ok := EventsPath(meta.Type, meta.ID)
	if !ok {
		f.done = true
		return
	}
	f.eventsPath = path
}

// Unknown tells that AWX answered it knows no unified job of the id
// (FollowerConfig.Unified): no request is made anymore.
func (f *Follower) Unknown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unknown
}

// feed hands the events taken to the sink, then the answer's time, and
// Complete once done. Only the polling goroutine calls it, so the sink
// gets them in order.
func (f *Follower) feed() {
	f.mu.Lock()
	taken, answered := f.taken, f.answered
	f.taken, f.answered = nil, time.Time{}
	complete := f.done && !f.told
	f.told = f.told || f.done
	f.mu.Unlock()
	if f.cfg.Sink == nil {
		return
	}
	if len(taken) > 0 {
		f.cfg.Sink.Add(taken)
	}
	if !answered.IsZero() {
		f.cfg.Sink.Answered(answered)
	}
	if complete {
		f.cfg.Sink.Complete()
	}
}

// shrinkPages makes the next event requests ask for size events a page.
// The same page would be too large again: a task that printed megabytes
// must not stop the job's events for good.
func (f *Follower) shrinkPages(size int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSize = size
	f.shrunk = true
	f.cfg.Log.Warn("awx: a page of events is too large to read; asking for fewer events a page", "job", f.id, "page_size", size)
}

// settle records a request's outcome and sets the backoff.
func (f *Follower) settle(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	started, ended := f.client.noteOutcome(err)
	if err == nil {
		switch {
		case ended:
			f.cfg.Log.Info("awx: requests work again", "job", f.id, "after_failures", f.failures)
		case f.failures > 0 && f.ownFailure:
			f.cfg.Log.Info("awx: requests for the job work again", "job", f.id, "after_failures", f.failures)
		case f.failures > 0:
			f.cfg.Log.Debug("awx: requests for the job work again", "job", f.id, "after_failures", f.failures)
		}
		f.failures, f.lastErr, f.ownFailure = 0, nil, false
		return
	}
	f.failures++
	f.lastErr = err
	var re *RetryableError
	var ae *AuthError
	awxFails := errors.As(err, &re) || errors.As(err, &ae)
	delay := f.cfg.Backoff.Delay(f.failures, 0)
	switch {
	case f.shrunk:
		// A smaller page is asked for next, at the usual pace.
		f.shrunk = false
		f.notUntil = f.cfg.Now().Add(f.cfg.MinInterval)
		return
	case errors.As(err, &re):
		delay = f.cfg.Backoff.Delay(f.failures, re.RetryAfter)
	default:
		// A refused token, a job AWX does not know or an answer the
		// client cannot read do not mend in seconds: ask again after
		// the longest backoff.
		delay = f.cfg.Backoff.Delay(64, 0)
	}
	f.notUntil = f.cfg.Now().Add(max(delay, f.cfg.MinInterval))
	switch {
	case started:
		// Once for all the jobs: an outage of AWX is no news per job.
		f.cfg.Log.Warn("awx: requests fail; jobs are still sampled and attributed once AWX answers", "job", f.id, "err", err, "wait", delay)
	case awxFails:
		f.cfg.Log.Debug("awx: request failed; keeping position and backing off", "job", f.id, "err", err, "wait", delay)
	case !f.ownFailure:
		f.ownFailure = true
		f.cfg.Log.Warn("awx: request failed; keeping position and backing off", "job", f.id, "err", err, "wait", delay)
	}
}

// add records a page of events; finalBefore tells that the job was final,
// events saved, before the page was asked for.
func (f *Follower) add(evs []Event, finalBefore bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range evs {
		if ev.Counter > f.cursor {
			f.above[ev.Counter] = ev // a repeat replaces itself
		}
	}
	before := f.cursor
	f.advance()
	if len(evs) == 0 {
		if finalBefore {
			// Nothing after the position, and nothing more will come:
			// a hole left now will never be filled.
			f.passGap()
			f.done = true
		}
		f.metaDue = true
	}
	switch now := f.cfg.Now(); {
	case len(f.above) == 0:
		f.gapSince = time.Time{}
	case f.gapSince.IsZero() || f.cursor != before:
		f.gapSince = now // a new hole, at the new position
	case now.Sub(f.gapSince) >= f.cfg.GapWait:
		f.cfg.Log.Warn("awx: passing a hole in the job's event counters", "job", f.id, "after", f.cursor)
		f.passGap()
	}
}

// advance moves the cursor over the events seen without a hole.
func (f *Follower) advance() {
	for {
		ev, ok := f.above[f.cursor+1]
		if !ok {
			break
		}
		delete(f.above, f.cursor+1)
		f.cursor++
		f.take(ev)
	}
}

// passGap takes every event above the cursor as if the holes were filled.
func (f *Follower) passGap() {
	counters := make([]int64, 0, len(f.above))
	for c := range f.above {
		counters = append(counters, c)
	}
	slices.Sort(counters)
	for _, c := range counters {
		f.take(f.above[c])
		f.cursor = c
	}
	clear(f.above)
	f.gapSince = time.Time{}
}

// take records an event at the cursor; each counter comes once.
func (f *Follower) take(ev Event) {
	je := ev.JobEvent()
	if f.meta.Type == TypeAdHocCommand && ev.Event == "runner_on_start" && ev.TaskUUID != "" && !f.adHocTasks[ev.TaskUUID] {
		if f.adHocTasks == nil {
			f.adHocTasks = map[string]bool{}
		}
		f.adHocTasks[ev.TaskUUID] = true
		je.TaskStart = true
	}
	f.taken = append(f.taken, je)
	if ev.Created.After(f.newest) {
		f.newest = ev.Created
	}
	if ev.Event == EventStats {
		f.done = true
	}
	if je.TaskStart {
		i, _ := slices.BinarySearchFunc(f.starts, ev, compareStarts)
		f.starts = slices.Insert(f.starts, i, ev)
	}
}

func compareStarts(a, b Event) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Counter, b.Counter)
}

// Starts returns a copy of every task start seen, ordered by created
// time, then counter.
func (f *Follower) Starts() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// Newest returns the newest created time of the events seen without a
// hole before them; zero before any.
func (f *Follower) Newest() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newest
}

// Position returns the counter up to which every event was seen.
func (f *Follower) Position() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursor
}

// Done tells whether every event of the job is in: playbook_on_stats was
// seen, or the job was final with its events saved and no event was left.
func (f *Follower) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// Job returns the job's metadata as last read; ok is false before the
// first successful read.
func (f *Follower) Job() (Job, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.meta, f.haveMeta
}

// Err returns the last request's error, nil when it succeeded or before
// any request.
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// Requests returns the number of requests Poll made.
func (f *Follower) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}
