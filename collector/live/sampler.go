package live

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/cgroup"
)

// liveSample is one reading of one resource of a live job.
type liveSample struct {
	resource string // ResourceCPU, ResourceMemory or ResourcePids
	ms       int64  // unix milliseconds
	// fromMs is when the interval the sample covers started (the previous
	// reading); the interval ends at the reading, which is ms except for a
	// boundary sample (stamped just before a task start it was read after).
	fromMs   int64
	boundary bool
	v        float64
}

// sampler reads a cgroup's counters on a schedule and turns them into
// samples in the stored units:
//
//   - cpu: percent of one CPU over the last CPU interval, as
//     cgroup_perf_recap defines it: Δ CPU time / Δ wall time × 100.
//   - memory: max(memory in use now, the kernel's peak since the previous
//     poll) in bytes, so a spike between two polls is not lost; the value
//     is an upper bound of usage during the interval ending at the sample.
//   - pids: max(tasks now, pids.peak when it rose since the previous poll).
//
// A sample is stamped at the end of its interval, except at task
// boundaries, where the interval that straddles a task start T is closed
// at T−1ms so that a peak at the very end of a task (an allocation that
// ends the task) is the earlier task's and not the next one's:
//
//   - when events shows a new task start T and a resource's open interval
//     (from its previous reading to now) holds T, the resource is read at
//     once (which resets the kernel's peak registers) and the sample is
//     stamped T−1ms: a boundary sample. CPU is read so only when its
//     interval is at least half a CPU interval long: a CPU share over a
//     few milliseconds is a peak no poll-length window would show. For
//     the same reason a regular poll less than half an interval after a
//     boundary sample is skipped (the next one covers the time);
//   - when a regular poll came first (the start was seen after it), the
//     batcher restamps that poll's sample T−1ms once the start is known
//     (batcher.attribute); likewise for a CPU boundary left to the poll.
//
// So the sample closing a task's memory and PIDs covers at most
// min(event latency, poll interval) of the next task, its CPU at most a
// poll interval, where the event latency is the time from the task start
// to the start being seen: for collect's job_events follower, runner's
// write of the event file (milliseconds after the event) plus up to one
// 200ms scan of the directory, so about 0–200ms; for an AWX API source,
// seconds. A sample attributed before the start was seen (Settle ran out,
// or MaxPendingSamples sent it with no task) keeps its poll time. Samples of one resource stay strictly increasing in
// time: a boundary sample is stamped after the previous reading of its
// resource, or not taken.
//
// With CPU, when the Stats read stall counters (a PressureStats such as
// *cgroup.Cgroup), each CPU reading also emits the stall resources
// (ansible.ResourceCPUStall, …): the counters' growth over the same
// interval in seconds, stamped like the CPU sample, so a task's stall is
// the sum of its samples. The job's CPU stall of an interval is at most
// the time between the counter's two reads. On v2 that is the kernel's
// "some" total, which can still grow by a few milliseconds more than
// that: it averages per-CPU times read on each CPU's own scheduler clock,
// and those clocks drift apart by up to a couple of ticks (seen under
// emulation). The excess, up to maxStallCarry, is carried into the next
// intervals that have room for it, and the last sample takes what is left
// (at most maxStallCarry beyond its own span), so the samples add up to
// the counter's growth exactly and a carried millisecond lands a few
// intervals late at most; growth beyond that is no stall and is dropped. On v1, where it sums the waits of threads
// that may have waited at once, it is scaled by wall / (waits + run time)
// when their demand exceeded the interval.
// node_load is the load average per CPU at the reading. A figure the
// kernel does not give is not sent at all, and said once in the log.
//
// After ctx ends, run takes one last sample of each resource (the tail of
// CPU time, the peak since the last poll), once an emptied cgroup's
// counters stood still (settle). Reading errors are logged once per
// resource and skipped.
type sampler struct {
	stats                         Stats
	cpuEvery, memEvery, pidsEvery time.Duration
	emit                          func(liveSample)
	log                           *slog.Logger
	// now reads the session's timeline: samples are stamped with its
	// time, and a CPU share's interval is measured on its monotonic
	// reading, which a re-anchoring of the timeline does not move.
	now func() instant
	// events tells of new task starts (nil: no events, no boundaries).
	events *Events

	prevCPU  time.Duration
	prevMono time.Duration
	haveCPU  bool
	failed   map[string]bool
	// readMs is the time of each resource's latest reading, where its
	// open interval starts (the baseline's time before the first one).
	readMs map[string]int64

	// pressure reads the stall counters (nil: the Stats have none);
	// prevP is the previous reading.
	pressure PressureStats
	prevP    cgroup.Pressure
	haveP    bool
	// prevPStart is when (monotonic) the previous read of the stall
	// counters began.
	prevPStart time.Duration
	// stallOwed is CPU stall growth (v2) not yet emitted because an
	// interval had no room for it; last is set for the last sample,
	// which emits all of it.
	stallOwed time.Duration
	last      bool

	// onLimits is told the memory limit and the OOM kills each time
	// either changes (killMs: the stamp of the memory reading that saw
	// the kills rise, else 0); nil, or Stats that are no LimitStats,
	// read neither. limit and kills are the last told.
	onLimits     func(limitBytes, kills uint64, killMs int64)
	limit, kills uint64
}

// LimitStats is a Stats that also reads the memory limit the job lives
// under and the OOM kills in it; *cgroup.Cgroup is one.
type LimitStats interface {
	MemoryLimit() (uint64, error)
	OOMKills() (kills uint64, ok bool, err error)
}

// PressureStats is a Stats that also reads how long the job and its node
// were stalled (see cgroup.Pressure); *cgroup.Cgroup is one.
type PressureStats interface {
	Pressure() (cgroup.Pressure, error)
}

// baseline reads the CPU counter the first CPU sample is measured from;
// call it right after the command starts.
func (s *sampler) baseline() {
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	u, now, err := s.readCPU()
	nowMs := now.at.UnixMilli()
	s.readMs = map[string]int64{ansible.ResourceCPU: nowMs, ansible.ResourceMemory: nowMs, ansible.ResourcePids: nowMs}
	if err == nil {
		s.prevCPU, s.prevMono, s.haveCPU = u, now.mono, true
	}
	if ps, ok := s.stats.(PressureStats); ok {
		s.pressure = ps
		for _, r := range stallResources {
			s.readMs[r] = nowMs
		}
		pStart := s.now().mono
		p, err := ps.Pressure()
		if !s.check(ansible.ResourceCPUStall, err) {
			s.prevP, s.prevPStart, s.haveP = p, pStart, true
		}
		var missing []string
		if !p.HasCPUStall {
			missing = append(missing, ansible.ResourceCPUStall)
		}
		if !p.HasMemoryStall {
			missing = append(missing, ansible.ResourceMemoryStall)
		}
		if !p.HasNodeCPUStall {
			missing = append(missing, ansible.ResourceNodeCPUStall)
		}
		if len(missing) > 0 {
			s.log.Info("no pressure stall information from the kernel: not stored", "missing", strings.Join(missing, ","), "node_load", p.HasNodeLoad)
		}
	}
}

// maxStallCarry bounds the CPU stall growth carried from one interval to
// the next (see sampler): the per-CPU clocks the kernel's "some" total is
// made of stay within a couple of scheduler ticks of each other (4-10 ms
// at HZ 250-1000, 20 ms at HZ 100).
const maxStallCarry = 100 * time.Millisecond

// stallResources are the resources samplePressure emits.
var stallResources = [...]string{ansible.ResourceCPUStall, ansible.ResourceMemoryStall, ansible.ResourceCPUThrottled, ansible.ResourceNodeCPUStall, ansible.ResourceNodeLoad}

// run samples until ctx is done, then samples once more.
func (s *sampler) run(ctx context.Context) {
	if s.failed == nil {
		s.baseline()
	}
	var starts <-chan struct{} // nil: never ready
	if s.events != nil {
		starts = s.events.startAdded()
	}
	if s.cpuEvery == s.memEvery && s.memEvery == s.pidsEvery {
		// One wake-up per poll rather than three.
		t := time.NewTicker(s.cpuEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				s.settle()
				s.sampleAll()
				return
			case <-t.C:
				s.pollAll()
			case <-starts:
				s.boundary()
			}
		}
	}
	cpuT, memT, pidsT := time.NewTicker(s.cpuEvery), time.NewTicker(s.memEvery), time.NewTicker(s.pidsEvery)
	defer cpuT.Stop()
	defer memT.Stop()
	defer pidsT.Stop()
	for {
		select {
		case <-ctx.Done():
			s.settle()
			s.sampleAll()
			return
		case <-cpuT.C:
			s.poll(ansible.ResourceCPU, s.cpuEvery, s.sampleCPU)
		case <-memT.C:
			s.poll(ansible.ResourceMemory, s.memEvery, s.sampleMemory)
		case <-pidsT.C:
			s.poll(ansible.ResourcePids, s.pidsEvery, s.samplePIDs)
		case <-starts:
			s.boundary()
		}
	}
}

// Settling before the last sample: reads settleStep apart, for at most
// settleFor.
const (
	settleStep = 10 * time.Millisecond
	settleFor  = 500 * time.Millisecond
)

// settle waits, before the last sample of a job whose cgroup is empty
// (Stats with a Populated method that says so), until the job's CPU and
// stall counters stand still. The kernel charges a process that left the
// cgroup until it is dead: its exit still runs, or waits for a CPU,
// after cgroup.events says populated 0 (3 ms of CPU stall were counted
// after it under emulation), and the last sample would miss that tail.
// A job still running (collect stopped by a signal) is not waited for.
func (s *sampler) settle() {
	p, ok := s.stats.(interface{ Populated() (bool, error) })
	if !ok {
		return
	}
	if populated, err := p.Populated(); err != nil || populated {
		return
	}
	type counters struct{ cpu, cpuStall, memStall, throttled time.Duration }
	read := func() (counters, bool) {
		var c counters
		var err error
		if c.cpu, err = s.stats.CPU(); err != nil {
			return c, false
		}
		if s.pressure != nil {
			pr, err := s.pressure.Pressure()
			if err != nil {
				return c, false
			}
			c.cpuStall, c.memStall, c.throttled = pr.CPUStall, pr.MemoryStall, pr.Throttled
		}
		return c, true
	}
	prev, ok := read()
	for deadline := time.Now().Add(settleFor); ok && time.Now().Before(deadline); {
		time.Sleep(settleStep)
		var c counters
		if c, ok = read(); !ok || c == prev {
			return
		}
		prev = c
	}
}

func (s *sampler) sampleAll() {
	s.last = true
	s.sampleCPU(0)
	s.sampleMemory(0)
	s.samplePIDs(0)
}

// pollAll is a regular poll of every resource.
func (s *sampler) pollAll() {
	s.poll(ansible.ResourceCPU, s.cpuEvery, s.sampleCPU)
	s.poll(ansible.ResourceMemory, s.memEvery, s.sampleMemory)
	s.poll(ansible.ResourcePids, s.pidsEvery, s.samplePIDs)
}

// poll samples a resource on its tick, unless a boundary sample read it
// less than half an interval ago: that reading waits for the next tick,
// so that no regular sample covers a sliver of time (a CPU share over a
// few milliseconds is a peak no poll-length window would show).
func (s *sampler) poll(resource string, every time.Duration, sample func(stampMs int64)) {
	if s.now().at.UnixMilli()-s.readMs[resource] < every.Milliseconds()/2 {
		return
	}
	sample(0)
}

// boundary closes each resource's open interval at the newest task start
// seen since the previous call, when the interval holds it (see sampler).
func (s *sampler) boundary() {
	startMs, ok := s.events.takeStart()
	if !ok {
		return
	}
	stampMs := startMs - 1
	if stampMs >= s.now().at.UnixMilli() {
		return // a start ahead of this clock: the next poll is before it anyway
	}
	// A CPU share is an average over its interval: one shorter than half
	// an interval is left to the next poll, which the batcher restamps.
	nowMs := s.now().at.UnixMilli()
	if r := s.readMs[ansible.ResourceCPU]; r < stampMs && nowMs-r >= s.cpuEvery.Milliseconds()/2 {
		s.sampleCPU(stampMs)
	}
	if s.readMs[ansible.ResourceMemory] < stampMs {
		s.sampleMemory(stampMs)
	}
	if s.readMs[ansible.ResourcePids] < stampMs {
		s.samplePIDs(stampMs)
	}
}

// stamp emits a reading taken at now, stamped at stampMs (a boundary
// sample), or at now when stampMs is 0.
func (s *sampler) stamp(resource string, now time.Time, stampMs int64, v float64) {
	x := liveSample{resource: resource, ms: stampMs, fromMs: s.readMs[resource], boundary: stampMs != 0, v: v}
	if stampMs == 0 {
		x.ms = now.UnixMilli()
	}
	s.readMs[resource] = now.UnixMilli()
	s.emit(x)
}

// cpuReadTries is how often readCPU reads the counter at most to get a
// reading whose time is known closely enough.
const cpuReadTries = 3

// readCPU reads the CPU counter together with the time of the reading: the
// clock is read before and after the counter, and the reading is dated
// at the midpoint, off by at most half the gap. A gap of more than a 50th
// of the CPU interval means the collector was held up around the read
// (preempted on a busy node, or a virtual machine whose CPU the host did
// not run) and the counter is read again, up to cpuReadTries times,
// keeping the closest. A CPU sample divides the counter's growth by the
// time between two readings; dating a reading after a hold-up instead
// would stretch one interval and shrink the next by the same amount, so
// the next one showed more CPU than the job's CPUs can give (seen under
// emulation: 370 % on 2 CPUs).
func (s *sampler) readCPU() (time.Duration, instant, error) {
	limit := s.cpuEvery / 50
	var (
		best    time.Duration
		bestAt  instant
		bestGap time.Duration = -1
		err     error
	)
	for range cpuReadTries {
		t0 := s.now()
		var u time.Duration
		u, err = s.stats.CPU()
		t1 := s.now()
		if err != nil {
			return 0, t1, err
		}
		if gap := t1.mono - t0.mono; bestGap < 0 || gap < bestGap {
			best, bestAt, bestGap = u, instant{at: t0.at.Add(gap / 2), mono: t0.mono + gap/2}, gap
		}
		if bestGap <= limit {
			break
		}
	}
	return best, bestAt, nil
}

func (s *sampler) sampleCPU(stampMs int64) {
	u, now, err := s.readCPU()
	if s.check(ansible.ResourceCPU, err) {
		return
	}
	if s.haveCPU {
		wall := now.mono - s.prevMono
		if wall < time.Millisecond {
			return // too short to say anything: keep the older baseline
		}
		pct := float64(u-s.prevCPU) / float64(wall) * 100
		s.stamp(ansible.ResourceCPU, now.at, stampMs, max(pct, 0))
		s.samplePressure(now.at, stampMs, wall)
	} else {
		s.readMs[ansible.ResourceCPU] = now.at.UnixMilli() // the first interval starts here
	}
	s.prevCPU, s.prevMono, s.haveCPU = u, now.mono, true
}

// samplePressure emits the growth of the stall counters since the
// previous CPU reading, which was wall ago (see sampler).
func (s *sampler) samplePressure(now time.Time, stampMs int64, wall time.Duration) {
	if s.pressure == nil {
		return
	}
	pStart := s.now().mono
	p, err := s.pressure.Pressure()
	if s.check(ansible.ResourceCPUStall, err) {
		return
	}
	if s.haveP {
		q := s.prevP
		// A "some" total grows by about the time between its two reads
		// at most, which lies within the start of the previous read and
		// the end of this one (the excess is carried, see sampler). The
		// CPU interval (wall) is no bound:
		// the counters are read just after the CPU counter, and a job
		// that stalled all along (tasks queued on one CPU) waited a
		// little longer than wall between them.
		readSpan := s.now().mono - s.prevPStart
		delta := func(res string, has, hadBefore bool, cur, prev time.Duration) {
			if has && hadBefore {
				s.stamp(res, now, stampMs, max(cur-prev, 0).Seconds())
			}
		}
		if p.HasCPURun && q.HasCPURun {
			// Waits summed over threads (v1): scaled by the threads'
			// demand where it exceeds the wall time, so that threads
			// queued behind each other count about once.
			dw, dr := max(p.CPUStall-q.CPUStall, 0), max(p.CPURun-q.CPURun, 0)
			if demand := dw + dr; demand > wall {
				dw = time.Duration(float64(dw) * float64(wall) / float64(demand))
			}
			s.stamp(ansible.ResourceCPUStall, now, stampMs, dw.Seconds())
		} else if p.HasCPUStall && q.HasCPUStall {
			d := max(p.CPUStall-q.CPUStall, 0) + s.stallOwed
			room := readSpan
			if s.last {
				room += maxStallCarry
			}
			out := min(d, room)
			s.stallOwed = min(d-out, maxStallCarry)
			s.stamp(ansible.ResourceCPUStall, now, stampMs, out.Seconds())
		}
		delta(ansible.ResourceMemoryStall, p.HasMemoryStall, q.HasMemoryStall, p.MemoryStall, q.MemoryStall)
		delta(ansible.ResourceCPUThrottled, p.HasThrottled, q.HasThrottled, p.Throttled, q.Throttled)
		delta(ansible.ResourceNodeCPUStall, p.HasNodeCPUStall, q.HasNodeCPUStall, p.NodeCPUStall, q.NodeCPUStall)
		if p.HasNodeLoad {
			s.stamp(ansible.ResourceNodeLoad, now, stampMs, p.NodeLoad)
		}
	}
	s.prevP, s.prevPStart, s.haveP = p, pStart, true
}

func (s *sampler) sampleMemory(stampMs int64) {
	cur, peak, err := s.stats.Memory()
	if s.check(ansible.ResourceMemory, err) {
		return
	}
	s.stamp(ansible.ResourceMemory, s.now().at, stampMs, float64(max(cur, peak)))
	s.sampleLimits(stampMs)
}

// sampleLimits reads the memory limit and the OOM kills with each
// memory reading, and tells onLimits when either changed: a kill is
// then pinned to the reading that first saw it, so to the task running
// within one memory interval of it.
func (s *sampler) sampleLimits(stampMs int64) {
	ls, ok := s.stats.(LimitStats)
	if !ok || s.onLimits == nil {
		return
	}
	limit, err := ls.MemoryLimit()
	if s.check("memory_limit", err) {
		return
	}
	kills, known, err := ls.OOMKills()
	if s.check("oom_kills", err) {
		return
	}
	if !known {
		kills = s.kills
	}
	if limit == s.limit && kills == s.kills {
		return
	}
	var killMs int64
	if kills > s.kills {
		killMs = stampMs
		if killMs == 0 { // a regular poll: stamped now
			killMs = s.now().at.UnixMilli()
		}
	}
	s.limit, s.kills = limit, kills
	s.onLimits(limit, kills, killMs)
}

func (s *sampler) samplePIDs(stampMs int64) {
	cur, peak, err := s.stats.PIDs()
	if s.check(ansible.ResourcePids, err) {
		return
	}
	s.stamp(ansible.ResourcePids, s.now().at, stampMs, float64(max(cur, peak)))
}

// check logs err the first time a resource fails and reports whether the
// reading must be skipped.
func (s *sampler) check(resource string, err error) bool {
	if err == nil {
		if s.failed[resource] {
			s.failed[resource] = false
			s.log.Info("sampling works again", "resource", resource)
		}
		return false
	}
	if !s.failed[resource] {
		s.failed[resource] = true
		s.log.Warn("cannot sample", "resource", resource, "err", err)
	}
	return true
}
