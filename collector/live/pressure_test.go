package live

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/cgroup"
)

// pressureStats is a fakeStats whose job waits for a CPU for waitShare
// of wall time (on top of the node's nodeShare) and never on memory:
// the memory figure is absent, as on cgroup v1.
type pressureStats struct {
	fakeStats
	waitShare, nodeShare float64
}

func (f *pressureStats) Pressure() (cgroup.Pressure, error) {
	el := float64(time.Since(f.start))
	return cgroup.Pressure{
		CPUStall: time.Duration(el * f.waitShare), HasCPUStall: true,
		Throttled: 0, HasThrottled: true,
		NodeCPUStall: time.Duration(el * f.nodeShare), HasNodeCPUStall: true,
	}, nil
}

// sampleEvery100ms runs a sampler of st that reads every resource each
// 100 ms, from its baseline, for d of the bubble's time, handing each
// sample to emit, and returns once it stopped. Call it inside
// synctest.Test.
func sampleEvery100ms(t *testing.T, st Stats, d time.Duration, emit func(liveSample)) {
	t.Helper()
	s := &sampler{
		stats:    st,
		cpuEvery: 100 * time.Millisecond, memEvery: 100 * time.Millisecond, pidsEvery: 100 * time.Millisecond,
		emit: emit,
		log:  testLogger(t),
		now:  systemInstants(),
	}
	s.baseline()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.run(ctx); close(done) }()
	time.Sleep(d)
	cancel()
	<-done
}

// TestSamplerPressure checks the stall resources ride on the CPU
// readings: same times and intervals, each value the counter's growth
// over the interval in seconds, the job's stall capped at the wall time
// (plus the carry the last sample takes), and no memory stall sent when
// the kernel gives none.
func TestSamplerPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &pressureStats{fakeStats: fakeStats{start: time.Now(), cpuShare: 0.5, mem: 1, pids: 1}, waitShare: 3, nodeShare: 0.25}
		var got []liveSample
		sampleEvery100ms(t, st, 350*time.Millisecond, func(x liveSample) { got = append(got, x) })

		cpuAt := map[int64]bool{}
		byRes := map[string][]liveSample{}
		for _, x := range got {
			byRes[x.resource] = append(byRes[x.resource], x)
			if x.resource == ansible.ResourceCPU {
				cpuAt[x.ms] = true
			}
		}
		if n := len(byRes[ansible.ResourceCPU]); n != 4 {
			t.Fatalf("cpu samples = %d, want 4 (3 polls and the last)", n)
		}
		if n := len(byRes[ansible.ResourceMemoryStall]); n != 0 {
			t.Fatalf("memory_stall samples = %d, want none: the kernel gave no figure", n)
		}
		for _, res := range []string{ansible.ResourceCPUStall, ansible.ResourceNodeCPUStall, ansible.ResourceCPUThrottled} {
			xs := byRes[res]
			if len(xs) != 4 {
				t.Fatalf("%s samples = %d, want 4, one per CPU reading", res, len(xs))
			}
			sum := 0.0
			for _, x := range xs {
				if !cpuAt[x.ms] {
					t.Fatalf("%s sample at %d has no CPU sample at that time", res, x.ms)
				}
				sum += x.v
			}
			want := map[string]float64{
				// 3× wall: capped at the wall time, and the last
				// sample takes the carry, which is capped too.
				ansible.ResourceCPUStall:     0.35 + maxStallCarry.Seconds(),
				ansible.ResourceNodeCPUStall: 0.35 * 0.25,
				ansible.ResourceCPUThrottled: 0,
			}[res]
			if d := sum - want; d > 1e-9 || d < -1e-9 {
				t.Fatalf("%s sums to %v s, want %v s", res, sum, want)
			}
		}
	})
}

// v1Stats sums the waits of threads that wait at once (1.5 s of waits
// and 1 s of run time per second of wall time, as three threads sharing
// too few CPUs), with the threads' run time beside them.
type v1Stats struct{ fakeStats }

func (f *v1Stats) Pressure() (cgroup.Pressure, error) {
	el := float64(time.Since(f.start))
	return cgroup.Pressure{CPUStall: time.Duration(el * 1.5), HasCPUStall: true, CPURun: time.Duration(el), HasCPURun: true}, nil
}

// TestSamplerPressureV1 checks waits summed over threads are scaled to
// the interval by the threads' demand: 1.5 / (1.5 + 1) of the wall time.
func TestSamplerPressureV1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &v1Stats{fakeStats{start: time.Now(), cpuShare: 1, mem: 1, pids: 1}}
		sum, n := 0.0, 0
		sampleEvery100ms(t, st, 350*time.Millisecond, func(x liveSample) {
			if x.resource == ansible.ResourceCPUStall {
				sum += x.v
				n++
			}
		})
		if want := 0.35 * 1.5 / 2.5; n != 4 || sum-want > 1e-9 || want-sum > 1e-9 {
			t.Fatalf("cpu_stall: %d samples summing to %v s, want 4 summing to %v s", n, sum, want)
		}
	})
}

// oddStats is a job that stalls all the time (waitShare 1) whose stall
// counters, on every other read, are read late (late after its CPU
// counter: the collector was held up between the two) or run ahead (the
// "some" total ahead by ahead, as when the per-CPU clocks it is made of
// disagree).
type oddStats struct {
	pressureStats
	late, ahead time.Duration
	reads       int
	last        time.Duration // the counter at the latest read
}

func (f *oddStats) Pressure() (cgroup.Pressure, error) {
	f.reads++
	odd := f.reads%2 == 0
	if odd {
		time.Sleep(f.late)
	}
	p, err := f.pressureStats.Pressure()
	if odd {
		p.CPUStall += f.ahead
	}
	f.last = p.CPUStall
	return p, err
}

// stalledAllAlong is the pressureStats of a job that stalls all the time.
func stalledAllAlong() pressureStats {
	return pressureStats{fakeStats: fakeStats{start: time.Now(), cpuShare: 1, mem: 1, pids: 1}, waitShare: 1}
}

// TestSamplerPressureAllStalled checks the CPU stall samples of a job
// that stalled all along add up to its counter's growth exactly, though
// the counter was read after the CPU and the stall between two reads of
// it exceeds the CPU interval.
func TestSamplerPressureAllStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &oddStats{pressureStats: stalledAllAlong(), late: 15 * time.Millisecond}
		sum := 0.0
		sampleEvery100ms(t, st, 550*time.Millisecond, func(x liveSample) {
			if x.resource == ansible.ResourceCPUStall {
				sum += x.v
			}
		})
		// The baseline read the counter at 0 (no time had passed).
		if want := st.last.Seconds(); sum < want-1e-9 || sum > want+1e-9 {
			t.Fatalf("cpu_stall samples add up to %v s, the counter grew by %v s", sum, want)
		}
	})
}

// TestSamplerPressureClockSkew checks growth beyond an interval's span
// is carried, not dropped: with the "some" total 8 ms ahead on every
// other read (one interval grows by 108 ms in 100, the next by 92),
// every sample but the last stays within its 100 ms, and the samples add
// up to the counter's growth exactly.
func TestSamplerPressureClockSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &oddStats{pressureStats: stalledAllAlong(), ahead: 8 * time.Millisecond}
		var vs []float64
		sampleEvery100ms(t, st, 650*time.Millisecond, func(x liveSample) {
			if x.resource == ansible.ResourceCPUStall {
				vs = append(vs, x.v)
			}
		})
		if len(vs) != 7 {
			t.Fatalf("cpu_stall samples %v, want 7 (6 polls and the last)", vs)
		}
		sum := 0.0
		for i, v := range vs {
			if i < len(vs)-1 && v > 0.1+1e-9 {
				t.Errorf("cpu_stall sample %d is %v s, more than its 100 ms interval", i, v)
			}
			sum += v
		}
		if want := st.last.Seconds(); sum < want-1e-9 || sum > want+1e-9 {
			t.Fatalf("cpu_stall samples %v add up to %v s, the counter grew by %v s", vs, sum, want)
		}
	})
}

// dyingStats is a job whose cgroup is empty (populated 0) while its
// counters still grow until until, as they do while the last process's
// exit runs or waits for a CPU: CPU at one CPU, CPU stall at half.
type dyingStats struct {
	fakeStats
	until time.Time
}

func (f *dyingStats) elapsed() time.Duration {
	now := time.Now()
	if now.After(f.until) {
		now = f.until
	}
	return now.Sub(f.start)
}

func (f *dyingStats) CPU() (time.Duration, error) { return f.elapsed(), nil }

func (f *dyingStats) Pressure() (cgroup.Pressure, error) {
	return cgroup.Pressure{CPUStall: f.elapsed() / 2, HasCPUStall: true}, nil
}

func (f *dyingStats) Populated() (bool, error) { return false, nil }

// TestSamplerSettlesEmptyCgroup checks the last sample of a job whose
// cgroup emptied waits for its counters to stand still: the CPU stall
// samples add up to what the counter grew by in all, 40 ms of it after
// the sampler was stopped, and the sampler stops within one read of the
// standstill.
func TestSamplerSettlesEmptyCgroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		st := &dyingStats{fakeStats: fakeStats{start: start, mem: 1, pids: 1}, until: start.Add(430 * time.Millisecond)}
		sum := 0.0
		sampleEvery100ms(t, st, 350*time.Millisecond, func(x liveSample) {
			if x.resource == ansible.ResourceCPUStall {
				sum += x.v
			}
		})
		if took := time.Since(start); took < 430*time.Millisecond || took > 430*time.Millisecond+2*settleStep {
			t.Errorf("the sampler stopped after %v; want at the counters' standstill at 430ms, within two reads", took)
		}
		if want := 0.215; sum < want-1e-9 || sum > want+1e-9 {
			t.Errorf("cpu_stall samples add up to %v s; the counter grew by %v s", sum, want)
		}
	})
}
