package live

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
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
// hour 2.6s into a session, forward an hour 3s later (it caught up), then
// forward 10 minutes at 8.6s, back 30 minutes at 11.6s and forward an
// hour at 14.6s: every sample of every resource keeps the 250ms poll
// spacing within each stretch, and each stretch starts at the wall clock
// where a forward step re-anchored it (exact times); no two samples of a
// resource share or invert a time; each step is logged once.
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
		steps := []struct {
			atMs int64
			d    time.Duration
		}{{2600, -time.Hour}, {5600, time.Hour}, {8600, 10 * time.Minute}, {11600, -30 * time.Minute}, {14600, time.Hour}}
		elapsed := time.Duration(0)
		for _, st := range steps {
			time.Sleep(time.Duration(st.atMs)*time.Millisecond - elapsed)
			elapsed = time.Duration(st.atMs) * time.Millisecond
			clock.step(st.d)
		}
		time.Sleep(17600*time.Millisecond - elapsed)
		s.Close()

		// The stamp of a reading at mono ms: the wall clock is ahead of
		// the session's start by 0 until 8.6s, then by 10 min (re-anchored),
		// then 10 min − 30 min = behind: the 10 min stretch goes on; at
		// 14.6s by 40 min (re-anchored).
		stampOf := func(ms int64) int64 {
			switch {
			case ms < 8600:
				return t0 + ms
			case ms < 14600:
				return t0 + ms + (10 * time.Minute).Milliseconds()
			default:
				return t0 + ms + (40 * time.Minute).Milliseconds()
			}
		}
		var want []int64
		for ms := int64(250); ms <= 17500; ms += 250 {
			want = append(want, stampOf(ms))
		}
		want = append(want, stampOf(17600)) // the last sample, at Close
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
			for i := 1; i < len(got); i++ {
				if got[i] <= got[i-1] {
					t.Fatalf("%s: sample %d at +%dms does not follow sample %d at +%dms", res, i, got[i]-t0, i-1, got[i-1]-t0)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d samples at %v, want %d at %v", res, len(got), offsets(got, t0), len(want), offsets(want, t0))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: sample %d at +%dms, want +%dms; all: %v", res, i, got[i]-t0, want[i]-t0, offsets(got, t0))
				}
			}
		}
		// CPU shares are measured over monotonic intervals: a
		// re-anchoring does not stretch one.
		for _, b := range sent {
			for _, ser := range b.Series {
				if ser.Resource != ansible.ResourceCPU {
					continue
				}
				for i, v := range ser.Vs {
					if v < 99 || v > 101 {
						t.Fatalf("CPU sample at +%dms is %v%%, want 100%% (the fake's share)", ser.Ts[i]-t0, v)
					}
				}
			}
		}
		out := logs.String()
		if n := strings.Count(out, "wall clock stepped"); n != len(steps) {
			t.Fatalf("%d lines tell of a wall clock step, want %d:\n%s", n, len(steps), out)
		}
		for _, w := range []string{"step=-1h0m0s", "step=1h0m0s", "step=10m0s", "step=-30m0s"} {
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

// manualClock is a Clock the test moves by hand: advance moves both
// clocks, step the wall clock alone.
type manualClock struct {
	wall time.Time
	mono time.Duration
}

func (c *manualClock) Read() (time.Time, time.Duration) { return c.wall, c.mono }

func (c *manualClock) advance(d time.Duration) { c.wall, c.mono = c.wall.Add(d), c.mono+d }

func (c *manualClock) step(d time.Duration) { c.wall = c.wall.Add(d) }

// TestTimelineSteps runs sequences of readings 250ms apart with wall clock
// steps between them: each reading's time on the timeline (as an offset
// from the first), the skew fromWall maps by, and the log lines are exact.
func TestTimelineSteps(t *testing.T) {
	const h, m, s, ms = time.Hour, time.Minute, time.Second, time.Millisecond
	type reading struct {
		step time.Duration // the wall clock's step before the reading
		want time.Duration // the timeline at the reading, from the first
		skew time.Duration // wall clock − timeline that fromWall maps by
	}
	tests := []struct {
		name     string
		readings []reading
		logs     []string // in order, one per line
	}{{
		name: "forward step re-anchors",
		readings: []reading{
			{0, 250 * ms, 0}, {h, h + 500*ms, 0}, {0, h + 750*ms, 0},
		},
		logs: []string{"msg=\"wall clock stepped; sample times re-anchored to it\" step=1h0m0s"},
	}, {
		// A VM suspended for 10 minutes: its monotonic clock stood still.
		name: "resumed VM",
		readings: []reading{
			{0, 250 * ms, 0}, {10 * m, 10*m + 500*ms, 0}, {0, 10*m + 750*ms, 0},
		},
		logs: []string{"step=10m0s"},
	}, {
		name: "backward step keeps the spacing until the wall clock catches up",
		readings: []reading{
			{0, 250 * ms, 0}, {-h, 500 * ms, -h}, {0, 750 * ms, -h},
			{30 * m, s, -30 * m},        // still behind: logged, spacing kept
			{40 * m, 10*m + 1250*ms, 0}, // ahead by 10 minutes: re-anchored
			{0, 10*m + 1500*ms, 0},
		},
		logs: []string{
			"msg=\"wall clock stepped behind the sample times; they keep the monotonic clock's spacing until it catches up\" step=-1h0m0s behind=1h0m0s",
			"step=30m0s behind=30m0s",
			"msg=\"wall clock stepped; sample times re-anchored to it\" step=40m0s",
		},
	}, {
		name: "back and forth by the same step",
		readings: []reading{
			{-h, 250 * ms, -h}, {h, 500 * ms, 0}, {0, 750 * ms, 0},
		},
		logs: []string{"step=-1h0m0s", "step=1h0m0s"},
	}, {
		name: "steps within the threshold move nothing",
		readings: []reading{
			{900 * ms, 250 * ms, 0}, {-1800 * ms, 500 * ms, 0}, {s, 750 * ms, 0}, {-100 * ms, s, 0},
		},
	}, {
		name: "drift adds up to a step",
		readings: []reading{
			{600 * ms, 250 * ms, 0}, {600 * ms, 500*ms + 1200*ms, 0}, {0, 750*ms + 1200*ms, 0},
		},
		logs: []string{"step=1.2s"},
	}, {
		name: "caught up by drift after a backward step",
		readings: []reading{
			{-30 * s, 250 * ms, -30 * s},
			{29500 * ms, 500 * ms, -500 * ms}, // a step, still 500ms behind
			{200 * ms, 750 * ms, -500 * ms},   // 300ms behind: drift
			{400 * ms, s + 100*ms, 0},         // 100ms ahead: re-anchored
			{0, 1250*ms + 100*ms, 0},
		},
		logs: []string{"step=-30s", "step=29.5s behind=500ms", "msg=\"wall clock caught up with the sample times; re-anchored to it\""},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
			clock := &manualClock{wall: start, mono: 5 * time.Second}
			var logs bytes.Buffer
			tl := newTimeline(clock, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			})))
			if got := tl.now(); !got.Equal(start) {
				t.Fatalf("first reading %v, want the wall clock %v", got, start)
			}
			prev := start
			for i, r := range tc.readings {
				clock.step(r.step)
				clock.advance(250 * time.Millisecond)
				got := tl.instant()
				if d := got.at.Sub(start); d != r.want {
					t.Fatalf("reading %d at %v, want %v", i, d, r.want)
				}
				if got.mono != clock.mono {
					t.Fatalf("reading %d: monotonic %v, want %v", i, got.mono, clock.mono)
				}
				if !got.at.After(prev) {
					t.Fatalf("reading %d at %v does not follow %v", i, got.at, prev)
				}
				prev = got.at
				// fromWall of the wall clock's now is the timeline's now
				// less the skew kept.
				if mapped, want := tl.fromWall(clock.wall), clock.wall.Add(-r.skew); !mapped.Equal(want) {
					t.Fatalf("reading %d: wall %v maps to %v, want %v (skew %v)", i, clock.wall, mapped, want, r.skew)
				}
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if logs.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.logs) {
				t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(tc.logs), logs.String())
			}
			for i, w := range tc.logs {
				if !strings.Contains(lines[i], w) {
					t.Errorf("log line %d does not say %s: %s", i, w, lines[i])
				}
			}
		})
	}
}

// TestTimelineInvariants reads a timeline through random advances and
// wall clock steps: the timeline never goes back, never advances less
// than the monotonic clock (no samples squashed together), advances by
// exactly the monotonic time unless it re-anchored at the wall clock, is
// never more than the threshold behind the wall clock, and never further
// ahead of it than the wall clock stepped back in all.
func TestTimelineInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 9))
	start := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	clock := &manualClock{wall: start}
	tl := newTimeline(clock, slog.New(slog.DiscardHandler))
	prev := tl.instant()
	var back time.Duration // the sum of backward steps
	reanchored := 0
	for i := range 20000 {
		var d time.Duration
		switch rng.IntN(10) {
		case 0: // a step
			d = time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour
		case 1: // drift
			d = time.Duration(rng.Int64N(int64(2*time.Second))) - time.Second
		}
		clock.step(d)
		if d < 0 {
			back -= d
		}
		clock.advance(time.Duration(1 + rng.Int64N(int64(time.Second))))
		got := tl.instant()
		dt, dm := got.at.Sub(prev.at), got.mono-prev.mono
		switch {
		case dt < dm:
			t.Fatalf("reading %d: timeline advanced %v, the monotonic clock %v", i, dt, dm)
		case dt > dm:
			if !got.at.Equal(clock.wall) {
				t.Fatalf("reading %d: timeline jumped %v beyond the monotonic clock to %v, not to the wall clock %v", i, dt-dm, got.at, clock.wall)
			}
			reanchored++
		}
		if behind := clock.wall.Sub(got.at); behind > wallStepThreshold {
			t.Fatalf("reading %d: timeline %v behind the wall clock", i, behind)
		}
		if ahead := got.at.Sub(clock.wall); ahead > back {
			t.Fatalf("reading %d: timeline %v ahead of the wall clock, which stepped back %v in all", i, ahead, back)
		}
		prev = got
	}
	if reanchored == 0 {
		t.Fatal("no reading re-anchored the timeline")
	}
}
