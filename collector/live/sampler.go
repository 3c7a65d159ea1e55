package live

import (
	"context"
	"log/slog"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// liveSample is one reading of one resource of a live job.
type liveSample struct {
	resource string // ResourceCPU, ResourceMemory or ResourcePids
	ms       int64  // unix milliseconds
	v        float64
}

// sampler reads a cgroup's counters on a schedule and turns them into
// samples in the stored units:
//
//   - cpu: percent of one CPU over the last CPU interval, as
//     cgroup_perf_recap defines it: Δ CPU time / Δ wall time × 100.
//   - memory: max(memory in use now, the kernel's peak since the previous
//     poll) in bytes, so a spike between two polls is not lost; the value
//     is an upper bound of usage during the interval ending at the sample,
//     so a peak just before a task ends can show in the next task's first
//     sample (by at most one interval).
//   - pids: max(tasks now, pids.peak when it rose since the previous poll).
//
// A sample is stamped at the end of its interval. After ctx ends, run takes
// one last sample of each resource (the tail of CPU time, the peak since
// the last poll). Reading errors are logged once per resource and skipped.
type sampler struct {
	stats                         Stats
	cpuEvery, memEvery, pidsEvery time.Duration
	emit                          func(liveSample)
	log                           *slog.Logger
	now                           func() time.Time

	prevCPU  time.Duration
	prevWall time.Time
	haveCPU  bool
	failed   map[string]bool
}

// baseline reads the CPU counter the first CPU sample is measured from;
// call it right after the command starts.
func (s *sampler) baseline() {
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	if u, err := s.stats.CPU(); err == nil {
		s.prevCPU, s.prevWall, s.haveCPU = u, s.now(), true
	}
}

// run samples until ctx is done, then samples once more.
func (s *sampler) run(ctx context.Context) {
	if s.failed == nil {
		s.baseline()
	}
	if s.cpuEvery == s.memEvery && s.memEvery == s.pidsEvery {
		// One wake-up per poll rather than three.
		t := time.NewTicker(s.cpuEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				s.sampleAll()
				return
			case <-t.C:
				s.sampleAll()
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
			s.sampleAll()
			return
		case <-cpuT.C:
			s.sampleCPU()
		case <-memT.C:
			s.sampleMemory()
		case <-pidsT.C:
			s.samplePIDs()
		}
	}
}

func (s *sampler) sampleAll() {
	s.sampleCPU()
	s.sampleMemory()
	s.samplePIDs()
}

func (s *sampler) sampleCPU() {
	u, err := s.stats.CPU()
	now := s.now()
	if s.check(ansible.ResourceCPU, err) {
		return
	}
	if s.haveCPU {
		wall := now.Sub(s.prevWall)
		if wall < time.Millisecond {
			return // too short to say anything: keep the older baseline
		}
		pct := float64(u-s.prevCPU) / float64(wall) * 100
		s.emit(liveSample{resource: ansible.ResourceCPU, ms: now.UnixMilli(), v: max(pct, 0)})
	}
	s.prevCPU, s.prevWall, s.haveCPU = u, now, true
}

func (s *sampler) sampleMemory() {
	cur, peak, err := s.stats.Memory()
	if s.check(ansible.ResourceMemory, err) {
		return
	}
	s.emit(liveSample{resource: ansible.ResourceMemory, ms: s.now().UnixMilli(), v: float64(max(cur, peak))})
}

func (s *sampler) samplePIDs() {
	cur, peak, err := s.stats.PIDs()
	if s.check(ansible.ResourcePids, err) {
		return
	}
	s.emit(liveSample{resource: ansible.ResourcePids, ms: s.now().UnixMilli(), v: float64(max(cur, peak))})
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
