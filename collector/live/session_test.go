package live

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// sentBatches collects what a session sends.
type sentBatches struct {
	mu      sync.Mutex
	t       *testing.T
	batches []ship.Batch
	samples int
}

func (s *sentBatches) send(body []byte, n int) {
	b := decodeBody(s.t, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	s.samples += n
}

// counters returns the samples sent per (resource, counter).
func (s *sentBatches) counters() map[string]map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[int64]int{}
	for _, b := range s.batches {
		for _, sr := range b.Series {
			if out[sr.Resource] == nil {
				out[sr.Resource] = map[int64]int{}
			}
			out[sr.Resource][sr.Counter] += len(sr.Ts)
		}
	}
	return out
}

// TestSessionHoldsSamplesForLateEvents runs a session whose events come
// late (an AWX API lagging by seconds): samples wait for them however
// long Settle allows, and are then attributed to the right task.
func TestSessionHoldsSamplesForLateEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := &fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}
		evs := NewEvents()
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "42", Info: ansible.JobInfo{TemplateID: "7"}, Stats: st, Events: evs,
			PollInterval: 100 * time.Millisecond, Settle: time.Hour, FlushInterval: 100 * time.Millisecond,
			Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		time.Sleep(2050 * time.Millisecond) // 20 polls
		synctest.Wait()
		if sent.samples != 0 || s.PendingSamples() != 60 {
			t.Fatalf("sent %d samples, %d pending before any event; want 0 sent, 60 pending", sent.samples, s.PendingSamples())
		}
		// The events of the first second arrive: a task started at 500ms,
		// another at 1000ms (the newest event).
		ms0 := t0.UnixMilli()
		evs.Add([]ansible.JobEvent{
			{Counter: 1, TimeMs: ms0},
			{Counter: 3, TimeMs: ms0 + 500, TaskStart: true, TaskUUID: "a", Task: "first"},
			{Counter: 5, TimeMs: ms0 + 1000, TaskStart: true, TaskUUID: "b", Task: "second"},
		})
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		// Polls at 100..1000ms are settled: 100..400 before the first
		// task, 500..900 in it, 1000 in the second.
		want := map[int64]int{0: 4, 3: 5, 5: 1}
		got := sent.counters()
		for _, r := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
			if len(got[r]) != len(want) || got[r][0] != want[0] || got[r][3] != want[3] || got[r][5] != want[5] {
				t.Fatalf("%s samples per counter %v, want %v", r, got[r], want)
			}
		}
		s.StopSampling() // at 2150ms: one last sample of each resource
		taken := s.Samples()
		if taken != 3*22 {
			t.Fatalf("%d samples taken, want 66 (21 polls and the last one)", taken)
		}
		time.Sleep(time.Second)
		if sent.samples != 30 {
			t.Fatalf("sent %d samples after sampling stopped, want still 30: the rest wait for events", sent.samples)
		}
		evs.Complete() // the job's events are all in
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := s.Close(); n != taken || sent.samples != taken || s.PendingSamples() != 0 {
			t.Fatalf("Close: %d taken, %d sent, %d pending; want all %d sent", n, sent.samples, s.PendingSamples(), taken)
		}
		if got := sent.counters()[ansible.ResourceMemory]; got[5] != 22-9 {
			t.Fatalf("memory samples per counter %v, want 13 in the second task", got)
		}
		if sent.batches[0].TemplateID != "7" || sent.batches[0].JobID != "42" || len(sent.batches[0].Tasks) != 2 {
			t.Fatalf("first batch %+v: want job 42, template 7 and both tasks", sent.batches[0])
		}
	})
}

// TestSessionMaxPendingSamples: with no events at all, a bounded session
// holds at most MaxPendingSamples and sends the older ones unattributed.
func TestSessionMaxPendingSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStats{start: time.Now(), cpuShare: 1, mem: 1000, pids: 2}
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: st, Events: NewEvents(), PollInterval: 100 * time.Millisecond,
			Settle: time.Hour, MaxPendingSamples: 10, FlushInterval: 250 * time.Millisecond,
			Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		for range 8 {
			time.Sleep(250 * time.Millisecond)
			synctest.Wait()
			if p := s.PendingSamples(); p > 10+3*2 {
				t.Fatalf("%d samples pending, want at most 10 after a flush and 2 polls", p)
			}
		}
		// 20 polls of 3 resources; the flush at 2000ms left 10 pending
		// (the polls at 2000ms run before or after it: 10 or 13 left).
		if sent.samples+s.PendingSamples() != 60 || sent.samples < 47 {
			t.Fatalf("sent %d, pending %d; want 60 in all, at most 13 pending", sent.samples, s.PendingSamples())
		}
		for r, by := range sent.counters() {
			if len(by) != 1 || by[0] == 0 {
				t.Fatalf("%s samples per counter %v, want counter 0 only", r, by)
			}
		}
		s.Close()
	})
}

func TestNewSessionRefuses(t *testing.T) {
	st := &fakeStats{}
	send := func([]byte, int) {}
	f := func(name string, cfg SessionConfig) {
		t.Helper()
		if _, err := NewSession(cfg); err == nil {
			t.Errorf("%s: NewSession accepted %+v", name, cfg)
		}
	}
	f("no job id", SessionConfig{Stats: st, Send: send})
	f("no stats", SessionConfig{JobID: "1", Send: send})
	f("no sender", SessionConfig{JobID: "1", Stats: st})
	f("poll too short", SessionConfig{JobID: "1", Stats: st, Send: send, PollInterval: time.Millisecond})
	f("memory poll too short", SessionConfig{JobID: "1", Stats: st, Send: send, MemoryInterval: 5 * time.Millisecond})
	if _, err := NewSession(SessionConfig{JobID: "1", Stats: st, Send: send}); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}
