package live

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// systemInstants reads a timeline on the process's clocks.
func systemInstants() func() instant {
	return newTimeline(SystemClock(), slog.New(slog.DiscardHandler)).instant
}

// fakeStats is a cgroup whose CPU runs at cpuShare of one CPU since start
// and whose memory peaks at peak between polls.
type fakeStats struct {
	mu       sync.Mutex
	start    time.Time
	cpuShare float64
	mem      uint64
	peak     uint64 // returned once, then 0, like a reset peak
	pids     uint64
	fail     bool
}

func (f *fakeStats) CPU() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return 0, errors.New("cgroup gone")
	}
	return time.Duration(float64(time.Since(f.start)) * f.cpuShare), nil
}

func (f *fakeStats) Memory() (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.peak
	f.peak = 0
	return f.mem, p, nil
}

func (f *fakeStats) PIDs() (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pids, 0, nil
}

func TestSamplerSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStats{start: time.Now(), cpuShare: 1.5, mem: 1000, pids: 3}
		var got []liveSample
		s := &sampler{
			stats:    st,
			cpuEvery: 100 * time.Millisecond, memEvery: 200 * time.Millisecond, pidsEvery: 500 * time.Millisecond,
			emit: func(x liveSample) { got = append(got, x) },
			log:  testLogger(t),
			now:  systemInstants(),
		}
		s.baseline()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.run(ctx); close(done) }()

		time.Sleep(450 * time.Millisecond)
		synctest.Wait()
		st.mu.Lock()
		st.peak = 5000 // a spike between two memory polls
		st.mu.Unlock()
		time.Sleep(600 * time.Millisecond) // to 1.05s
		cancel()
		<-done

		n := map[string]int{}
		var mems []float64
		for _, x := range got {
			n[x.resource]++
			switch x.resource {
			case ansible.ResourceCPU:
				if x.v < 149.9 || x.v > 150.1 {
					t.Errorf("cpu %.2f%% at %d, want 150 (1.5 CPUs)", x.v, x.ms)
				}
			case ansible.ResourceMemory:
				mems = append(mems, x.v)
			case ansible.ResourcePids:
				if x.v != 3 {
					t.Errorf("pids %v, want 3", x.v)
				}
			}
		}
		// 10 CPU ticks + 1 final, 5 memory + 1, 2 pids + 1.
		if n[ansible.ResourceCPU] != 11 || n[ansible.ResourceMemory] != 6 || n[ansible.ResourcePids] != 3 {
			t.Fatalf("samples per resource %v, want cpu 11, memory 6, pids 3", n)
		}
		want := []float64{1000, 1000, 5000, 1000, 1000, 1000}
		for i := range want {
			if mems[i] != want[i] {
				t.Fatalf("memory samples %v, want %v (the spike kept once)", mems, want)
			}
		}
	})
}

func TestSamplerSkipsFailingReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStats{start: time.Now(), cpuShare: 1}
		var n int
		s := &sampler{stats: st, cpuEvery: 100 * time.Millisecond, memEvery: time.Hour, pidsEvery: time.Hour,
			emit: func(x liveSample) {
				if x.resource == ansible.ResourceCPU {
					n++
				}
			}, log: testLogger(t), now: systemInstants()}
		s.baseline()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.run(ctx); close(done) }()
		time.Sleep(250 * time.Millisecond)
		st.mu.Lock()
		st.fail = true
		st.mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		st.mu.Lock()
		st.fail = false
		st.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
		cancel()
		<-done
		// 2 before the failure, 3 failed ticks, 2 after + the final one; the
		// first CPU sample after the gap spans it and is still right.
		if n != 5 {
			t.Fatalf("%d cpu samples, want 5", n)
		}
	})
}

func decodeBody(t *testing.T, body []byte) ship.Batch {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var b ship.Batch
	if err := json.NewDecoder(zr).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBatcherAttributesAndWaitsForEvents(t *testing.T) {
	f := newEventFollower(fixedDir(""), time.Now, testLogger(t))
	base := ms("2026-11-30T03:39:35.0")
	var sent []ship.Batch
	id := ""
	b := &batcher{
		events: f.events, jobID: func() string { return id }, settle: 5 * time.Second, maxSamples: 4,
		send: func(body []byte, n int) { sent = append(sent, decodeBody(t, body)) },
		log:  testLogger(t),
	}
	// Readings of an instant (fromMs = ms): no interval holds a task
	// start, so none is restamped (see TestBatcherRestampsStraddlingSample).
	for i := int64(0); i < 10; i++ { // a sample every 500ms for 5s
		b.add(liveSample{resource: ansible.ResourceCPU, ms: base + 500*i, fromMs: base + 500*i, v: float64(i)})
	}
	b.add(liveSample{resource: ansible.ResourceCPU, ms: base + 4500, fromMs: base + 4500, v: 99}) // same ms: moved 1ms on

	now := time.UnixMilli(base + 4900)
	if n := b.flush(now, false); n != 0 {
		t.Fatalf("flushed %d samples before the job id was known", n)
	}
	id = "job"
	if n := b.flush(now, false); n != 0 || len(sent) != 0 {
		t.Fatalf("flushed %d samples before any event, want 0", n)
	}
	// Events up to base+1200ms: samples up to there settle.
	f.events.Add([]ansible.JobEvent{
		{Counter: 1, TimeMs: base - 100},
		{Counter: 3, TimeMs: base + 700, TaskStart: true, TaskUUID: "t-4", Task: "burn"},
		{Counter: 4, TimeMs: base + 1200},
	})
	if n := b.flush(now, false); n != 3 {
		t.Fatalf("flushed %d samples, want the 3 up to the newest event", n)
	}
	got := sent[0]
	if len(got.Series) != 2 || got.Series[0].Counter != 0 || len(got.Series[0].Ts) != 2 ||
		got.Series[1].Counter != 3 || got.Series[1].Task != "burn" || got.Series[1].UUID != "t-4" || got.Series[1].Ts[0] != base+1000 {
		t.Fatalf("first batch series %+v", got.Series)
	}
	if len(got.Tasks) != 1 || got.Tasks[0].Counter != 3 || got.Tasks[0].StartMs != base+700 || got.LastEvent.Counter != 4 {
		t.Fatalf("first batch tasks %+v, last %+v", got.Tasks, got.LastEvent)
	}
	// A long task writes nothing: samples settle once 5s old when the
	// source answered 5s after them (a scan at 7000ms), in batches of at
	// most 4 samples.
	if n := b.flush(time.UnixMilli(base+7000), false); n != 0 {
		t.Fatalf("flushed %d samples the source did not answer 5s after, want 0", n)
	}
	f.events.Answered(time.UnixMilli(base + 7000))
	if n := b.flush(time.UnixMilli(base+7000), false); n != 2 || b.pendingSamples() != 6 {
		t.Fatalf("flushed %d, %d pending; want 2 old enough and 6 pending", n, b.pendingSamples())
	}
	if n := b.flush(time.UnixMilli(base+7000), true); n != 6 || len(sent) != 4 {
		t.Fatalf("final flush sent %d samples in %d batches so far; want 6, 4 batches", n, len(sent))
	}
	last := sent[len(sent)-1].Series[0]
	if last.Ts[len(last.Ts)-1] != base+4501 || last.Vs[len(last.Vs)-1] != 99 {
		t.Fatalf("the sample sharing a millisecond: %v %v", last.Ts, last.Vs)
	}
	if len(sent[1].Tasks) != 0 || sent[1].LastEvent != nil {
		t.Fatalf("tasks sent twice: %+v", sent[1])
	}
}

// heldStats is a fakeStats whose collector is held up right after every
// third CPU read, for hold: the counter is read, then time passes before
// the read returns (a preempted collector, a virtual CPU the host did not
// run).
type heldStats struct {
	fakeStats
	hold  time.Duration
	reads int
}

func (f *heldStats) CPU() (time.Duration, error) {
	u, err := f.fakeStats.CPU()
	f.reads++
	if f.reads%3 == 0 {
		time.Sleep(f.hold)
	}
	return u, err
}

// TestSamplerCPUHeldUp checks a CPU reading is dated when the counter was
// read, not when the read returned: with the collector held up for 40 ms
// after some reads (two fifths of a 100 ms interval), every CPU sample
// still says the job's 1.5 CPUs exactly, and the samples add up to the
// CPU time the counter grew by.
func TestSamplerCPUHeldUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &heldStats{fakeStats: fakeStats{start: time.Now(), cpuShare: 1.5, mem: 1, pids: 1}, hold: 40 * time.Millisecond}
		var got []liveSample
		s := &sampler{
			stats:    st,
			cpuEvery: 100 * time.Millisecond, memEvery: time.Hour, pidsEvery: time.Hour,
			emit: func(x liveSample) { got = append(got, x) },
			log:  testLogger(t),
			now:  systemInstants(),
		}
		s.baseline()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.run(ctx); close(done) }()
		time.Sleep(1050 * time.Millisecond)
		cancel()
		<-done
		n := 0
		sum := 0.0
		for _, x := range got {
			if x.resource != ansible.ResourceCPU {
				continue
			}
			n++
			if x.v < 150-1e-6 || x.v > 150+1e-6 {
				t.Errorf("cpu %.4f%% over %d–%d ms, want 150 (1.5 CPUs)", x.v, x.fromMs, x.ms)
			}
			sum += x.v / 100 * float64(x.ms-x.fromMs) / 1000
		}
		if n < 8 {
			t.Fatalf("%d cpu samples, want at least 8", n)
		}
		// The counter's growth from the baseline to the last reading.
		if want := 1.5 * float64(got[len(got)-1].ms-got[0].fromMs) / 1000; sum < want-0.002 || sum > want+0.002 {
			t.Errorf("cpu samples add up to %.4f CPU seconds, want %.4f", sum, want)
		}
	})
}
