package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// batcher holds a live job's samples until the task each belongs to is
// known, attributes them and hands gzip-encoded ingest batches to send.
//
// A sample taken at time t is attributed to the task start with the
// greatest created time ≤ t. Runner writes an event file shortly after the
// event, so a sample waits until an event created at or after t was seen,
// or until it is settle old and the source answered at t+settle or later
// with no task start after t (a long task writes no events for a while,
// and the task running is then the newest one known), or the events are
// complete. While the source does not answer (the AWX API is down),
// samples wait however old, and are attributed once it answers with the
// events it missed. Samples before the first task start, and all samples
// of a job without job events, get counter 0 and no task.
//
// Beyond maxPending held samples the oldest go out before they are
// settled. Their task cannot be known yet (it may have started after the
// newest event seen, in an event the source has not read: the AWX API is
// down or lags), so they get counter 0 and no task too, rather than a
// guess; the first time, it is logged with the count. The final flush
// (the job is over) sends every sample: those the source answered after,
// or that an event covers, attributed; the newer ones (the source stopped
// answering before the job ended and never came back) with no task,
// logged with the count.
//
// add is safe for concurrent use with flush.
type batcher struct {
	events     *Events       // nil: the job has no job events
	jobID      func() string // "" while not decided; batches wait for it
	settle     time.Duration
	maxPending int // samples held beyond it are sent with no task; 0: no bound
	maxSamples int
	send       func(body []byte, samples int)
	log        *slog.Logger

	mu      sync.Mutex
	pending []liveSample // in time order
	lastMs  map[string]int64
	info    ansible.JobInfo
	newInfo bool // info changed since it was last sent
	// oomMs is the time of an OOM kill whose task is not resolved yet
	// (0: none): info.OOMCounter gets the task running then once the
	// events show it.
	oomMs int64
	// capLogged: samples were sent with no task because of maxPending,
	// and it was logged.
	capLogged bool

	// Used by the flushing goroutine only: enc is reused across batches
	// (a flate writer allocates about 1 MB); outMs is the time of each
	// resource's newest sample sent.
	enc   ship.Encoder
	outMs map[string]int64
	// unknown[i] tells that the i-th sample of the batch being built is
	// sent with no task (reused across batches).
	unknown []bool
	// unanswered counts the samples the final flush sent with no task
	// because the source did not answer after them (set by final
	// flushes only).
	unanswered int
}

// add queues a sample. Two samples of one resource never share a
// millisecond: the store would see two values at one time.
func (b *batcher) add(s liveSample) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastMs == nil {
		b.lastMs = map[string]int64{}
	}
	if last, ok := b.lastMs[s.resource]; ok && s.ms <= last {
		s.ms = last + 1
	}
	b.lastMs[s.resource] = s.ms
	b.pending = append(b.pending, s)
}

// setInfo sets the job's info; the next batch carries it. A playbook
// already learnt from the job events, and how the job is measured, are
// kept when info names none.
func (b *batcher) setInfo(info ansible.JobInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if info.Playbook == "" {
		info.Playbook = b.info.Playbook
	}
	if info.Measured == "" {
		info.Measured = b.info.Measured
	}
	// What the cgroup says (setLimits) is the collector's own.
	info.MemoryLimitBytes, info.OOMKills, info.OOMCounter = b.info.MemoryLimitBytes, b.info.OOMKills, b.info.OOMCounter
	if info.Hosts == 0 {
		info.Hosts = b.info.Hosts // learnt from the events
	}
	b.info, b.newInfo = info, true
}

// setLimits records the memory limit and OOM kills the job's cgroup
// shows (see sampler.onLimits); the next batch carries them, and a kill
// at killMs (> 0) names the task running then once the events show it.
func (b *batcher) setLimits(limitBytes, kills uint64, killMs int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.info.MemoryLimitBytes, b.info.OOMKills = int64(limitBytes), int(kills)
	if killMs > 0 {
		b.oomMs = killMs
	}
	b.newInfo = true
}

// resolveOOM names the task running at the pending OOM kill when the
// events cover its time (or the job is over). Called with b.mu held.
func (b *batcher) resolveOOM(final bool) {
	if b.oomMs == 0 || b.events == nil || !(final || b.events.settled(b.oomMs)) {
		return
	}
	if start, ok := b.events.taskAt(b.oomMs); ok {
		b.info.OOMCounter = start.Counter
		b.newInfo = true
	}
	b.oomMs = 0
}

// run flushes every interval until ctx is done, at the times now gives
// (the samples' timeline).
func (b *batcher) run(ctx context.Context, interval time.Duration, now func() time.Time) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.flush(now(), false)
		}
	}
}

// flush sends the settled samples, or with final all of them (the job is
// over; see batcher for those that go with no task), with the tasks and
// newest event seen since the previous flush. It returns the number of
// samples sent.
func (b *batcher) flush(now time.Time, final bool) int {
	id := b.jobID()
	if id == "" {
		return 0
	}
	sent := 0
	for {
		n, more := b.flushOnce(id, now, final)
		sent += n
		if !more {
			break
		}
	}
	if final && b.unanswered > 0 {
		b.log.Warn("samples taken after the event source last answered sent with no task: their task is not known",
			"samples", b.unanswered)
	}
	return sent
}

func (b *batcher) flushOnce(id string, now time.Time, final bool) (n int, more bool) {
	nowMs, settleMs := now.UnixMilli(), b.settle.Milliseconds()
	b.mu.Lock()
	b.resolveOOM(final)
	if b.events != nil {
		if h := b.events.Hosts(); h > b.info.Hosts {
			b.info.Hosts, b.newInfo = h, true
		}
	}
	b.unknown = b.unknown[:0]
	forced := 0
scan:
	for n < len(b.pending) && n < b.maxSamples {
		t := b.pending[n].ms
		switch {
		case b.events == nil || b.events.settled(t):
			b.unknown = append(b.unknown, false)
		case final:
			// The job is over: what the source showed after the sample
			// is all there will be.
			known := b.events.answeredSince(t)
			b.unknown = append(b.unknown, !known)
			if !known {
				b.unanswered++
			}
		case nowMs-t >= settleMs && b.events.answeredSince(t+settleMs):
			b.unknown = append(b.unknown, false)
		case b.maxPending > 0 && len(b.pending)-n > b.maxPending:
			b.unknown = append(b.unknown, true) // its task is not known yet
			forced++
		default:
			break scan // held: its task is not known yet, nor those after
		}
		n++
	}
	if forced > 0 && !b.capLogged {
		b.capLogged = true
		b.log.Warn("held samples past the bound sent with no task: their task is not known yet",
			"samples", forced, "max_pending", b.maxPending)
	}
	take := b.pending[:n:n]
	b.pending = b.pending[n:]
	more = n == b.maxSamples && len(b.pending) > 0
	var info ansible.JobInfo
	if b.newInfo {
		info, b.newInfo = b.info, false
	}
	b.mu.Unlock()

	body := ship.Batch{JobID: id, Series: b.attribute(take, b.unknown), JobInfo: ship.InfoOf(info)}
	if b.events != nil {
		starts, last, ok := b.events.takeTasks()
		for _, s := range starts {
			body.Tasks = append(body.Tasks, ship.Task{Counter: s.Counter, UUID: s.TaskUUID, Name: s.Task, StartMs: s.TimeMs, Play: s.Play, Role: s.Role, Path: s.TaskPath})
		}
		// The playbook the job events name (as import reads it), sent
		// with the first batch holding a task that names it.
		for _, s := range starts {
			if s.Playbook == "" {
				continue
			}
			b.mu.Lock()
			if b.info.Playbook == "" {
				b.info.Playbook = s.Playbook
				info, b.newInfo = b.info, false
			}
			b.mu.Unlock()
			break
		}
		body.JobInfo = ship.InfoOf(info)
		if ok {
			body.LastEvent = &ship.Event{Counter: last.Counter, TimeMs: last.TimeMs}
		}
	}
	if len(body.Series) == 0 && len(body.Tasks) == 0 && body.LastEvent == nil && (!final || info == (ansible.JobInfo{})) {
		if info != (ansible.JobInfo{}) {
			// Nothing to stamp it with yet: it goes with the next batch
			// (b.info is this info or a newer one).
			b.mu.Lock()
			b.newInfo = true
			b.mu.Unlock()
		}
		return 0, false
	}
	enc, err := b.enc.Encode(&body)
	if err != nil {
		// Only unencodable values (NaN) get here; the sampler makes none.
		b.log.Error("cannot encode batch; dropping it", "samples", n, "err", err)
		return n, more
	}
	b.send(enc, n)
	return n, more
}

// attribute groups samples into series per (resource, task), keeping the
// order in which each series first appears.
//
// A regular sample whose interval holds a task start T (the start was
// seen after the poll, so the sampler took no boundary sample) is
// restamped T−1ms and so attributed to the task before T, as a boundary
// sample would have been; the newest start ≤ its time decides. This keeps
// each resource's times strictly increasing: T−1 is after the interval's
// start, which is at or after the previous sample of the resource.
//
// A sample whose unknown[i] is true gets counter 0 and no task, and keeps
// its time.
func (b *batcher) attribute(samples []liveSample, unknown []bool) []ship.Series {
	type key struct {
		resource string
		counter  int64
		uuid     string
	}
	if b.outMs == nil {
		b.outMs = map[string]int64{}
	}
	index := map[key]int{}
	var series []ship.Series
	for i, s := range samples {
		var start ansible.JobEvent
		if b.events != nil && !unknown[i] {
			var ok bool
			start, ok = b.events.taskAt(s.ms)
			if t := start.TimeMs; ok && !s.boundary && s.fromMs < t-1 && b.outMs[s.resource] < t-1 {
				s.ms = t - 1
				start, _ = b.events.taskAt(s.ms)
			}
		}
		b.outMs[s.resource] = s.ms
		k := key{s.resource, start.Counter, start.TaskUUID}
		i, ok := index[k]
		if !ok {
			i = len(series)
			index[k] = i
			series = append(series, ship.Series{Resource: s.resource, Counter: start.Counter, UUID: start.TaskUUID, Task: start.Task})
		}
		series[i].Ts = append(series[i].Ts, s.ms)
		series[i].Vs = append(series[i].Vs, s.v)
	}
	return series
}

// pendingSamples returns the number of samples not yet flushed.
func (b *batcher) pendingSamples() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// drop forgets every sample not yet flushed and returns how many.
func (b *batcher) drop() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.pending)
	b.pending = nil
	return n
}
