package live

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
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

// times returns the times of a resource's samples sent per counter, in
// milliseconds after ms0.
func (s *sentBatches) times(resource string, ms0 int64) map[int64][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64][]int64{}
	for _, b := range s.batches {
		for _, sr := range b.Series {
			if sr.Resource != resource {
				continue
			}
			for _, t := range sr.Ts {
				out[sr.Counter] = append(out[sr.Counter], t-ms0)
			}
		}
	}
	return out
}

// checkTimes checks the times of the samples of each resource sent per
// counter, in milliseconds after ms0, against want; it reports whether
// they all matched.
func (s *sentBatches) checkTimes(t *testing.T, when string, ms0 int64, want map[int64][]int64) bool {
	t.Helper()
	ok := true
	for _, r := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
		if got := s.times(r, ms0); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s sample times per counter %v, want %v", when, r, got, want)
			ok = false
		}
	}
	return ok
}

// checkNoTaskAtCounter0 checks that no series sent with no task (counter
// 0) names a task.
func (s *sentBatches) checkNoTaskAtCounter0(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		for _, sr := range b.Series {
			if sr.Counter == 0 && (sr.Task != "" || sr.UUID != "") {
				t.Errorf("a counter 0 series names task %q (uuid %q), want none", sr.Task, sr.UUID)
			}
		}
	}
}

// sleeper returns a function that sleeps until ms milliseconds after t0
// on synctest's clock, then waits for the bubble's goroutines to block.
func sleeper(t0 time.Time) func(ms int64) {
	return func(ms int64) {
		time.Sleep(t0.Add(time.Duration(ms) * time.Millisecond).Sub(time.Now()))
		synctest.Wait()
	}
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
		// The events of the first second arrive, late: a task started at
		// 550ms, another at 1020ms (the newest event).
		ms0 := t0.UnixMilli()
		evs.Add([]ansible.JobEvent{
			{Counter: 1, TimeMs: ms0},
			{Counter: 3, TimeMs: ms0 + 550, TaskStart: true, TaskUUID: "a", Task: "first"},
			{Counter: 5, TimeMs: ms0 + 1020, TaskStart: true, TaskUUID: "b", Task: "second"},
		})
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		// Polls at 100..1000ms are settled: 100..500 before the first task;
		// the poll at 600 covers 500..600, which holds the start at 550,
		// so it closes the time before it (restamped 549); 700..1000 in
		// the first task.
		if !sent.checkTimes(t, "at 2150ms", ms0, map[int64][]int64{0: {100, 200, 300, 400, 500, 549}, 3: {700, 800, 900, 1000}}) {
			t.FailNow()
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
		// The poll at 1100 covers the start at 1020: restamped 1019.
		if !sent.checkTimes(t, "after Close", ms0, map[int64][]int64{
			0: {100, 200, 300, 400, 500, 549}, 3: {700, 800, 900, 1000, 1019},
			5: {1200, 1300, 1400, 1500, 1600, 1700, 1800, 1900, 2000, 2100, 2150},
		}) {
			t.FailNow()
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

// TestSessionMaxPendingUnknownTask: while the events stall (the AWX API
// is down), samples forced out by MaxPendingSamples that the events do not
// cover yet go out with counter 0 and no task, since the task running
// then may be one not seen yet; those the events cover are attributed as
// usual, and so are the samples still held when the events come back.
// The clock is synctest's: polls every 100ms, flushes every 110ms (never
// at the same instant before 1100ms), at most 6 samples (2 polls) held.
func TestSessionMaxPendingUnknownTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ms0 := t0.UnixMilli()
		st := &fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}
		evs := NewEvents()
		// Task A started before the session; nothing after it is known.
		evs.Add([]ansible.JobEvent{{Counter: 3, TimeMs: ms0 - 100, TaskStart: true, TaskUUID: "a", Task: "A"}})
		sent := &sentBatches{t: t}
		var logs bytes.Buffer
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: st, Events: evs, PollInterval: 100 * time.Millisecond,
			Settle: time.Hour, MaxPendingSamples: 6, FlushInterval: 110 * time.Millisecond,
			Send: sent.send, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		at := sleeper(t0)
		// Flush at 330: polls 100..300 held, one too many: the poll at
		// 100 goes out with no task (the newest event is at -100).
		at(335)
		if got, want := sent.times(ansible.ResourceMemory, ms0), map[int64][]int64{0: {100}}; !reflect.DeepEqual(got, want) {
			t.Errorf("memory sample times per counter at 335ms %v, want %v", got, want)
		}
		// An event of A created at 350 comes: the flush at 440 sends the
		// polls at 200 and 300 as A's; 400 is not covered and stays held.
		evs.Add([]ansible.JobEvent{{Counter: 4, TimeMs: ms0 + 350}})
		// The flushes at 660 and 770 force out the polls at 400 and 500,
		// after the newest event: no task (they were A's, but the events
		// that would say so are not in).
		at(780)
		// AWX answers again: B started at 620, an event at 760. The polls
		// at 600 and 700 were held: the flush at 880 sends 600 as A's and
		// 700 (which covers 600..700, holding B's start) restamped 619, A's.
		evs.Add([]ansible.JobEvent{
			{Counter: 5, TimeMs: ms0 + 620, TaskStart: true, TaskUUID: "b", Task: "B"},
			{Counter: 6, TimeMs: ms0 + 760},
		})
		at(950)
		evs.Complete()
		if n := s.Close(); n != 30 {
			t.Fatalf("%d samples taken, want 30: 9 polls and the last one, of 3 resources", n)
		}
		sent.checkTimes(t, "after Close", ms0, map[int64][]int64{0: {100, 400, 500}, 3: {200, 300, 600, 619}, 5: {800, 900, 950}})
		sent.checkNoTaskAtCounter0(t)
		if n := strings.Count(logs.String(), "sent with no task"); n != 1 || !strings.Contains(logs.String(), "samples=3 max_pending=6") {
			t.Errorf("the samples sent with no task were logged %d times, want once with samples=3 max_pending=6:\n%s", n, logs.String())
		}
	})
}

// TestSessionSettleKeepsNewestTask: a sample that outlives Settle with no
// event after it goes out attributed to the newest task start known (a
// long task writes no events for a while), unlike one forced out by
// MaxPendingSamples, once the source answered Settle after it: an answer
// shows no task start up to its time. Polls every 100ms, flushes every
// 110ms, Settle 300ms; the source answers at 405 and 560.
func TestSessionSettleKeepsNewestTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ms0 := t0.UnixMilli()
		st := &fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}
		evs := NewEvents()
		evs.Add([]ansible.JobEvent{{Counter: 3, TimeMs: ms0 - 100, TaskStart: true, TaskUUID: "a", Task: "A"}})
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: st, Events: evs, PollInterval: 100 * time.Millisecond,
			Settle: 300 * time.Millisecond, FlushInterval: 110 * time.Millisecond,
			Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		at := sleeper(t0)
		check := func(when string, want map[int64][]int64) {
			t.Helper()
			sent.checkTimes(t, when, ms0, want)
		}
		at(405)
		evs.Answered(time.Now())
		at(555)
		// The flush at 440 sent the poll at 100: 300ms old, and the source
		// answered at 405 ≥ 100+300. The poll at 200 is old enough at 550,
		// but the source did not answer since 500: held.
		check("at 555ms", map[int64][]int64{3: {100}})
		evs.Answered(time.Now())
		at(665)
		// The flush at 660 sent the poll at 200 (answered at 560 ≥ 500);
		// 300 waits for an answer at 600 or later.
		check("at 665ms", map[int64][]int64{3: {100, 200}})
		if p := s.PendingSamples(); p != 12 {
			t.Errorf("%d samples pending, want 12 (polls 300..600)", p)
		}
		evs.Answered(time.Now())
		if n := s.Close(); n != 21 {
			t.Fatalf("%d samples taken, want 21: 6 polls and the last one, of 3 resources", n)
		}
		// The source answered at 665, when the last sample is taken: all
		// go out, A's.
		check("after Close", map[int64][]int64{3: {100, 200, 300, 400, 500, 600, 665}})
	})
}

// TestSessionOutageLongerThanSettle: the source does not answer for
// longer than Settle (the AWX API is down) while tasks B and C start.
// The samples are held, not sent as the last task known (A), and go to
// B and C once the source answers with the events it missed. Then it
// goes down again until the job ends: the samples taken after its last
// answer go out with no task (D started then, unseen), those before it
// with the task known. Polls every 100ms, flushes every 130ms, Settle
// 300ms; the clock is synctest's.
func TestSessionOutageLongerThanSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ms0 := t0.UnixMilli()
		st := &fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}
		evs := NewEvents()
		evs.Add([]ansible.JobEvent{{Counter: 3, TimeMs: ms0 - 100, TaskStart: true, TaskUUID: "a", Task: "A"}})
		evs.Answered(t0)
		sent := &sentBatches{t: t}
		var logs bytes.Buffer
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: st, Events: evs, PollInterval: 100 * time.Millisecond,
			Settle: 300 * time.Millisecond, FlushInterval: 130 * time.Millisecond,
			Send: sent.send, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		at := sleeper(t0)
		check := func(when string, want map[int64][]int64) {
			t.Helper()
			sent.checkTimes(t, when, ms0, want)
		}
		at(995)
		// Polls 100..900, up to 900ms old: none sent.
		check("at 995ms, the source down since 0", map[int64][]int64{})
		if p := s.PendingSamples(); p != 27 {
			t.Errorf("%d samples pending at 995ms, want 27 (polls 100..900)", p)
		}
		// At 1005 the source answers with what it missed: B started at
		// 420, C at 810, an event at 990.
		at(1005)
		evs.Add([]ansible.JobEvent{
			{Counter: 5, TimeMs: ms0 + 420, TaskStart: true, TaskUUID: "b", Task: "B"},
			{Counter: 7, TimeMs: ms0 + 810, TaskStart: true, TaskUUID: "c", Task: "C"},
			{Counter: 8, TimeMs: ms0 + 990},
		})
		evs.Answered(time.Now())
		at(1595)
		// The flush at 1040 sent the polls up to 990: the poll at 500
		// covers 400..500, which holds B's start (restamped 419, A's), the
		// one at 900 C's (restamped 809, B's). The poll at 1000 and later
		// wait: the source has not answered since 1005.
		want := map[int64][]int64{3: {100, 200, 300, 400, 419}, 5: {600, 700, 800, 809}}
		check("at 1595ms, the source down since 1005", want)
		if n := s.Close(); n != 3*16 {
			t.Fatalf("%d samples taken, want 48: 15 polls and the last one, of 3 resources", n)
		}
		// The poll at 1000 is before the last answer: C's. The later ones
		// are not known (D started at 1150, unseen): no task.
		want[7] = []int64{1000}
		want[0] = []int64{1100, 1200, 1300, 1400, 1500, 1595}
		check("after Close", want)
		sent.checkNoTaskAtCounter0(t)
		if n := strings.Count(logs.String(), "after the event source last answered"); n != 1 || !strings.Contains(logs.String(), "samples=18") {
			t.Errorf("the samples sent with no task at the end were logged %d times, want once with samples=18:\n%s", n, logs.String())
		}
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

// points returns a resource's samples sent per counter as "t:v" with t in
// milliseconds after ms0.
func (s *sentBatches) points(resource string, ms0 int64) map[int64][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64][]string{}
	for _, b := range s.batches {
		for _, sr := range b.Series {
			if sr.Resource != resource {
				continue
			}
			for i, t := range sr.Ts {
				out[sr.Counter] = append(out[sr.Counter], fmt.Sprintf("%d:%g", t-ms0, sr.Vs[i]))
			}
		}
	}
	return out
}

// TestSessionTaskBoundaries: a memory peak in the last moments of a task
// is that task's, whether the next task's start is seen before the next
// poll (a boundary sample is taken at once, stamped 1ms before the start)
// or after it (the poll's sample is restamped so). Times and values are
// exact: the clock is synctest's.
func TestSessionTaskBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ms0 := t0.UnixMilli()
		st := &fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}
		evs := NewEvents()
		// Task A started before the session: no boundary for it.
		evs.Add([]ansible.JobEvent{{Counter: 3, TimeMs: ms0 - 100, TaskStart: true, TaskUUID: "a", Task: "A"}})
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "j", Stats: st, Events: evs, PollInterval: 250 * time.Millisecond,
			Settle: time.Hour, FlushInterval: 100 * time.Millisecond, Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		at := sleeper(t0)
		setPeak := func(v uint64) {
			st.mu.Lock()
			st.peak = v
			st.mu.Unlock()
		}
		at(600)
		setPeak(5000) // A allocates and ends at its peak, after the poll at 500
		at(700)       // B's start (650) is seen before the poll at 750
		evs.Add([]ansible.JobEvent{
			{Counter: 4, TimeMs: ms0 + 640},
			{Counter: 5, TimeMs: ms0 + 650, TaskStart: true, TaskUUID: "b", Task: "B"},
		})
		at(1100)
		setPeak(7000) // B peaks after the poll at 1000
		at(1300)      // C's start (1200) is seen after the poll at 1250
		evs.Add([]ansible.JobEvent{{Counter: 7, TimeMs: ms0 + 1200, TaskStart: true, TaskUUID: "c", Task: "C"}})
		at(1505)
		setPeak(9000) // C peaks after the poll at 1500
		at(1530)      // D's start (1510) is seen 30ms after that poll
		evs.Add([]ansible.JobEvent{{Counter: 9, TimeMs: ms0 + 1510, TaskStart: true, TaskUUID: "d", Task: "D"}})
		at(1800)
		evs.Add([]ansible.JobEvent{{Counter: 10, TimeMs: ms0 + 1790}})
		evs.Complete()
		if n := s.Close(); n != 26 {
			t.Fatalf("%d samples taken, want 26: 7 polls (CPU) or 6 (memory, PIDs: 750 skipped), 2 boundaries (CPU 1), the last", n)
		}

		f := func(resource string, want map[int64][]string) {
			t.Helper()
			if got := sent.points(resource, ms0); !reflect.DeepEqual(got, want) {
				t.Errorf("%s samples per counter (ms:value)\n got %v\nwant %v", resource, got, want)
			}
		}
		f(ansible.ResourceMemory, map[int64][]string{
			3: {"250:1000", "500:1000", "649:5000"}, // the boundary sample holds A's peak
			5: {"1000:1000", "1199:7000"},           // the poll at 1250, restamped
			7: {"1500:1000", "1509:9000"},           // a boundary sample, 30ms after the poll
			9: {"1750:1000", "1800:1000"},
		})
		// CPU: the boundary sample covers 500..700; the poll at 750, 50ms
		// after it, is skipped: the next covers 700..1000. All at one CPU.
		f(ansible.ResourceCPU, map[int64][]string{
			3: {"250:100", "500:100", "649:100"},
			5: {"1000:100", "1199:100"},
			7: {"1500:100", "1509:100"}, // 30ms is too short a CPU window: the poll at 1750, restamped
			9: {"1800:100"},
		})
		f(ansible.ResourcePids, map[int64][]string{
			3: {"250:2", "500:2", "649:2"},
			5: {"1000:2", "1199:2"},
			7: {"1500:2", "1509:2"},
			9: {"1750:2", "1800:2"},
		})
	})
}

// TestSessionHold: a held session sends nothing, however settled its
// samples (no events: each is settled at once) and past
// MaxPendingSamples; Release lets them go, all of them. Discard of a held
// session drops every sample and sends none, then or at Close.
func TestSessionHold(t *testing.T) {
	start := func(t *testing.T) (*Session, *sentBatches) {
		st := &fakeStats{start: time.Now(), cpuShare: 1, mem: 1000, pids: 2}
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: st, PollInterval: 100 * time.Millisecond, MaxPendingSamples: 3,
			FlushInterval: 250 * time.Millisecond, Hold: true, Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		time.Sleep(time.Second)
		synctest.Wait()
		// 10 polls of 3 resources; none sent.
		if sent.samples != 0 || s.PendingSamples() != 30 {
			t.Fatalf("held: sent %d, pending %d; want 0 and 30", sent.samples, s.PendingSamples())
		}
		return s, sent
	}
	t.Run("release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, sent := start(t)
			s.Release()
			time.Sleep(250 * time.Millisecond)
			synctest.Wait()
			if sent.samples < 30 || sent.samples+s.PendingSamples() != s.Samples() {
				t.Fatalf("released: sent %d, pending %d of %d; want the 30 held sent", sent.samples, s.PendingSamples(), s.Samples())
			}
			s.Close()
			if sent.samples != s.Samples() {
				t.Fatalf("closed: sent %d of %d", sent.samples, s.Samples())
			}
		})
	})
	t.Run("discard", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, sent := start(t)
			dropped, gone := s.Discard()
			// StopSampling took one last sample of memory and of pids;
			// CPU has no tail at the instant of its last poll.
			if dropped != 32 || gone != 0 || s.Samples() != 32 {
				t.Fatalf("Discard = %d dropped, %d sent of %d taken; want 32, 0, 32", dropped, gone, s.Samples())
			}
			time.Sleep(time.Second)
			s.Close()
			synctest.Wait()
			if sent.samples != 0 || len(sent.batches) != 0 || s.PendingSamples() != 0 {
				t.Fatalf("after Discard and Close: sent %d samples in %d batches, %d pending; want none",
					sent.samples, len(sent.batches), s.PendingSamples())
			}
		})
	})
}
