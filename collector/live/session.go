package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// Stats is what a session samples. *cgroup.Cgroup implements it; so can
// the sum over a job's process tree.
type Stats interface {
	// CPU returns the CPU time used so far (user + system), counted from
	// any fixed point.
	CPU() (time.Duration, error)
	// Memory returns the bytes in use now and the highest use since the
	// previous call (0 when unknown or not above current).
	Memory() (current, peakSinceLast uint64, err error)
	// PIDs returns the tasks (processes and threads) now and the most
	// since the previous call (0 when unknown or not above current).
	PIDs() (current, peakSinceLast uint64, err error)
}

// SessionConfig configures NewSession. Zero durations and sizes take the
// defaults.
type SessionConfig struct {
	// JobID is the job id the samples are stored under. Required.
	JobID string
	// Info is sent with the job's first batch; SetInfo changes it later.
	Info ansible.JobInfo
	// Stats is sampled. Required.
	Stats Stats
	// Events is where the job's task starts come from, filled by a
	// source (a job_events follower, an AWX API follower). nil: the job
	// has no events and every sample gets counter 0.
	Events *Events
	// PollInterval is the sampling interval (default 250ms);
	// CPUInterval, MemoryInterval and PIDsInterval override it per
	// resource. Each must be at least 10ms.
	PollInterval, CPUInterval, MemoryInterval, PIDsInterval time.Duration
	// Settle is how long a sample waits for Events to show the task it
	// belongs to (an event created at or after it) before it is sent
	// attributed with what is known (default 5s): a task that writes no
	// events for a while is still the newest one known. That is only
	// known once the source answered (Events.Answered) Settle or more
	// after the sample was taken, showing no task start after it: while
	// the source does not answer (the AWX API is down), samples are held
	// however old, bounded by MaxPendingSamples, and attributed once it
	// answers with the events it missed. A source whose events lag (the
	// AWX API saves them seconds late) wants minutes.
	Settle time.Duration
	// MaxPendingSamples bounds the samples held waiting for their task:
	// beyond it the oldest are sent before they are settled. Those that
	// Events does not cover yet (taken after the newest event seen) get
	// counter 0 and no task, as before the first task start: the task
	// running then may be one not seen yet. The first time is logged with
	// the count. 0: no bound (collect's job_events follower answers on
	// every scan, so Settle bounds the wait).
	MaxPendingSamples int
	// FlushInterval is how often settled samples are batched (default 1s).
	FlushInterval time.Duration
	// MaxBatchSamples bounds the samples in one batch (default 10000).
	MaxBatchSamples int
	// Send takes each gzip-encoded ingest batch and its sample count, on
	// the session's flushing goroutine; it must not block for long
	// ((*ship.Shipper).Enqueue does not). Required.
	Send func(body []byte, samples int)
	// Hold makes batches wait until Release or Close: the caller has yet
	// to decide whether the job is collected at all (the agent asks the
	// server's policy once AWX names the job's template), and Discard
	// then drops every sample taken. MaxPendingSamples does not apply
	// while held.
	Hold bool
	// Logger receives the session's log (nil: discarded).
	Logger *slog.Logger
	// Clock is what samples are stamped with (nil: SystemClock): the wall
	// clock when the session starts, plus the monotonic time elapsed
	// since. A step of the wall clock is logged once; one that leaves the
	// wall clock ahead re-anchors the sample times to it, one that leaves
	// it behind moves no sample until the wall clock catches up (see
	// timeline). The times at which Events' source answered (wall clock
	// times of this host) are mapped onto the sample times; its events'
	// created times are not, so they agree with the samples' except while
	// the wall clock is behind after a backward step.
	Clock Clock
}

// Session samples one job's Stats, attributes each sample to the task its
// Events say was running and hands batches to Send: the per-job part of
// `peakline collect`, and of the agent for each job it finds.
//
// Start starts it; StopSampling takes one last sample of each resource
// and stops sampling while settled samples keep being flushed; Close sends
// every sample still held. Its methods are safe for concurrent use.
type Session struct {
	sampler *sampler
	batcher *batcher
	log     *slog.Logger
	now     func() time.Time
	flush   time.Duration
	samples atomic.Int64
	hold    atomic.Bool // batches wait; see SessionConfig.Hold

	mu                    sync.Mutex
	started, closed       bool
	baselined             bool
	sampleStop, batchStop context.CancelFunc
	sampleDone, batchDone chan struct{}
}

// NewSession checks cfg and returns a session that samples nothing until
// Start.
func NewSession(cfg SessionConfig) (*Session, error) {
	if cfg.JobID == "" {
		return nil, errors.New("cannot start a session: no job id")
	}
	if cfg.Stats == nil || cfg.Send == nil {
		return nil, errors.New("cannot start a session: no stats to sample or no batch sender")
	}
	for _, d := range []time.Duration{cfg.PollInterval, cfg.CPUInterval, cfg.MemoryInterval, cfg.PIDsInterval} {
		if d != 0 && d < 10*time.Millisecond {
			return nil, fmt.Errorf("cannot start a session: poll interval %v must be at least 10ms", d)
		}
	}
	return newSession(cfg, func() string { return cfg.JobID }), nil
}

// newSession is NewSession for a checked cfg, with a job id that may be
// decided later ("" while not decided: batches wait for it).
func newSession(cfg SessionConfig, jobID func() string) *Session {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	for _, d := range []*time.Duration{&cfg.CPUInterval, &cfg.MemoryInterval, &cfg.PIDsInterval} {
		if *d <= 0 {
			*d = cfg.PollInterval
		}
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.MaxBatchSamples <= 0 {
		cfg.MaxBatchSamples = 10_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock()
	}
	tl := newTimeline(cfg.Clock, cfg.Logger)
	if cfg.Events != nil {
		cfg.Events.mapWall(tl.fromWall)
	}
	s := &Session{log: cfg.Logger, now: tl.now, flush: cfg.FlushInterval}
	s.hold.Store(cfg.Hold)
	s.batcher = &batcher{
		events: cfg.Events,
		jobID: func() string {
			if s.hold.Load() {
				return ""
			}
			return jobID()
		},
		settle:     cfg.Settle,
		maxPending: cfg.MaxPendingSamples,
		maxSamples: cfg.MaxBatchSamples,
		send:       cfg.Send,
		log:        cfg.Logger,
	}
	if cfg.Info != (ansible.JobInfo{}) {
		s.batcher.setInfo(cfg.Info)
	}
	s.sampler = &sampler{
		stats:     cfg.Stats,
		cpuEvery:  cfg.CPUInterval,
		memEvery:  cfg.MemoryInterval,
		pidsEvery: cfg.PIDsInterval,
		emit:      s.emit,
		log:       cfg.Logger,
		now:       tl.instant,
		events:    cfg.Events,
		onLimits:  s.batcher.setLimits,
	}
	return s
}

func (s *Session) emit(x liveSample) {
	s.samples.Add(1)
	s.batcher.add(x)
}

// Baseline reads the CPU baseline the first CPU sample is measured from,
// for a job whose cgroup was made for it: called before the job's command
// starts, the samples hold all the CPU time the job used, however long
// the collector then takes to start sampling (a busy node, emulation).
// Start takes no other.
func (s *Session) Baseline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.baselined {
		return
	}
	s.baselined = true
	s.sampler.baseline()
}

// Start reads the CPU baseline the first CPU sample is measured from
// (unless Baseline did), then samples and flushes in the background. Call
// it once, as soon as the job runs.
func (s *Session) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	sampleCtx, sampleStop := context.WithCancel(context.Background())
	batchCtx, batchStop := context.WithCancel(context.Background())
	s.sampleStop, s.batchStop = sampleStop, batchStop
	s.sampleDone, s.batchDone = make(chan struct{}), make(chan struct{})
	if !s.baselined {
		s.sampler.baseline()
	}
	go func() { defer close(s.sampleDone); s.sampler.run(sampleCtx) }()
	go func() { defer close(s.batchDone); s.batcher.run(batchCtx, s.flush, s.now) }()
}

// StopSampling takes one last sample of each resource (the tail of CPU
// time, the peak since the last poll) and stops sampling; settled samples
// are still flushed until Close. It returns when sampling has stopped.
func (s *Session) StopSampling() {
	s.mu.Lock()
	stop, done := s.sampleStop, s.sampleDone
	s.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
}

// Release ends a Hold: the held samples go out as they settle.
func (s *Session) Release() { s.hold.Store(false) }

// Discard stops sampling and flushing and drops every sample not sent
// yet, for a job that is not to be collected; Close after it does
// nothing. It returns the samples dropped and those already sent (0 when
// the session was held until now).
func (s *Session) Discard() (dropped, sent int) {
	if !s.shut() {
		return 0, int(s.samples.Load())
	}
	dropped = s.batcher.drop()
	return dropped, int(s.samples.Load()) - dropped
}

// Close stops sampling if StopSampling was not called, ends a Hold, then
// sends every sample held, attributed with the task starts Events holds now: call it
// once the source added the job's last events (and completed the Events),
// or gave up on them. When it gave up, the samples taken after the
// source's last answer (and after the newest event) go out with counter 0
// and no task, logged with their count: a task may have started then
// that the source never showed. It returns the number of samples taken.
func (s *Session) Close() int {
	if !s.shut() {
		return int(s.samples.Load())
	}
	s.hold.Store(false)
	s.batcher.flush(s.now(), true)
	return int(s.samples.Load())
}

// shut stops sampling and the flushing loop, the first step of Close and
// Discard. It reports false when the session was shut before, and the
// caller has nothing left to do.
func (s *Session) shut() bool {
	s.StopSampling()
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	stop, done := s.batchStop, s.batchDone
	s.mu.Unlock()
	if closed {
		return false
	}
	if stop != nil {
		stop()
		<-done
	}
	return true
}

// SetInfo sets the job's info; the next batch carries it. A playbook
// already learnt from the events, and how the job is measured, are kept
// when info names none.
func (s *Session) SetInfo(info ansible.JobInfo) { s.batcher.setInfo(info) }

// Samples returns the number of samples taken so far.
func (s *Session) Samples() int { return int(s.samples.Load()) }

// PendingSamples returns the number of samples taken and not yet sent.
func (s *Session) PendingSamples() int { return s.batcher.pendingSamples() }
