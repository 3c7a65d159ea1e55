package live

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// steppingClock is the bubble's clock with a wall clock that the test
// steps: the monotonic reading is the time since start, the wall clock
// that plus offset.
type steppingClock struct {
	start time.Time
	mu    sync.Mutex
	off   time.Duration
}

func (c *steppingClock) Read() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mono := time.Since(c.start)
	return c.start.Add(mono + c.off).Round(0), mono
}

func (c *steppingClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// syncBuffer is a log destination safe for the session's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestSessionTimesFollowTheMonotonicClock steps the wall clock back an
// hour 2.6s into a session, and forward an hour 3s later: every sample
// sent keeps the 250ms poll spacing from the session's start (exact
// times), and each step is logged once.
func TestSessionTimesFollowTheMonotonicClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &steppingClock{start: time.Now()}
		t0 := clock.start.UnixMilli()
		var logs syncBuffer
		var mu sync.Mutex
		var sent []ship.Batch
		s, err := NewSession(SessionConfig{
			JobID: "42", Stats: &fakeStats{start: time.Now(), cpuShare: 1, mem: 1000, pids: 2},
			PollInterval: 250 * time.Millisecond, FlushInterval: time.Second,
			Send: func(body []byte, _ int) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, decodeBody(t, body))
			},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Clock:  clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		time.Sleep(2600 * time.Millisecond)
		clock.step(-time.Hour)
		time.Sleep(3000 * time.Millisecond)
		clock.step(time.Hour)
		time.Sleep(3000 * time.Millisecond) // to 8.6s
		s.Close()

		// Polls at 250ms … 8500ms, and the last sample at 8600ms.
		var want []int64
		for ms := int64(250); ms <= 8500; ms += 250 {
			want = append(want, t0+ms)
		}
		want = append(want, t0+8600)
		mu.Lock()
		defer mu.Unlock()
		for _, res := range []string{ansible.ResourceCPU, ansible.ResourceMemory, ansible.ResourcePids} {
			var got []int64
			for _, b := range sent {
				for _, ser := range b.Series {
					if ser.Resource == res {
						got = append(got, ser.Ts...)
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d samples at %v, want %d", res, len(got), offsets(got, t0), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: sample %d at +%dms, want +%dms; all: %v", res, i, got[i]-t0, want[i]-t0, offsets(got, t0))
				}
			}
		}
		out := logs.String()
		if n := strings.Count(out, "wall clock stepped"); n != 2 {
			t.Fatalf("%d lines tell of a wall clock step, want 2 (back, then forward):\n%s", n, out)
		}
		for _, w := range []string{"step=-1h0m0s", "step=1h0m0s"} {
			if !strings.Contains(out, w) {
				t.Errorf("log does not say %s:\n%s", w, out)
			}
		}
	})
}

// offsets renders times as milliseconds after t0.
func offsets(ts []int64, t0 int64) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t - t0
	}
	return out
}

// TestTimelineMapsAnswersAcrossAStep: after the wall clock stepped back an
// hour, a source's answer at the wall clock's now is the timeline's now,
// so that samples settle as before the step rather than an hour later.
func TestTimelineMapsAnswersAcrossAStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &steppingClock{start: time.Now()}
		var logs syncBuffer
		tl := newTimeline(clock, slog.New(slog.NewTextHandler(&logs, nil)))
		if got := tl.now(); !got.Equal(clock.start) {
			t.Fatalf("first reading %v, want the wall clock %v", got, clock.start)
		}
		time.Sleep(time.Second)
		clock.step(-time.Hour)
		time.Sleep(time.Second)
		wall, _ := clock.Read()
		if got, want := tl.fromWall(wall), clock.start.Add(2*time.Second); !got.Equal(want) {
			t.Fatalf("wall %v maps to %v, want %v", wall, got, want)
		}
		if got, want := tl.now(), clock.start.Add(2*time.Second); !got.Equal(want) {
			t.Fatalf("now %v, want %v", got, want)
		}
		// Half a second of drift is no step.
		clock.step(500 * time.Millisecond)
		tl.now()
		if n := strings.Count(logs.String(), "wall clock stepped"); n != 1 {
			t.Fatalf("%d step lines, want 1:\n%s", n, logs.String())
		}

		evs := NewEvents()
		evs.mapWall(tl.fromWall)
		wall, _ = clock.Read()
		evs.Answered(wall)
		if !evs.answeredSince(clock.start.Add(2*time.Second).UnixMilli()) || evs.answeredSince(clock.start.Add(2*time.Second).UnixMilli()+501) {
			t.Fatalf("answered at %d, want %d (the timeline's now plus the 500ms drift)", evs.answeredMs, clock.start.Add(2500*time.Millisecond).UnixMilli())
		}
	})
}
