package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/peakline/peakline/collector/ship"
)

// webWaitedJob has two tasks of 2 s with CPU and stall samples every
// 250 ms: "held up" waited for a CPU 0.0625 s and on memory 0.005 s per
// sample (25 % and 2 % of its 2 s), "ran freely" not at all.
func webWaitedJob(startMs int64) *ship.Batch {
	b := &ship.Batch{JobID: "web-waited", LastEvent: &ship.Event{Counter: 9, TimeMs: startMs + 4000}}
	for i, name := range []string{"held up", "ran freely"} {
		t0 := startMs + int64(i)*2000
		b.Tasks = append(b.Tasks, ship.Task{Counter: int64(3 + 3*i), UUID: webUUID(i), Name: name, StartMs: t0})
		cpuWait, memWait := map[int]float64{0: 0.0625}[i], map[int]float64{0: 0.005}[i]
		for _, r := range []struct {
			res string
			v   float64
		}{{"cpu", 40}, {"cpu_stall", cpuWait}, {"memory_stall", memWait}} {
			s := ship.Series{Resource: r.res, Counter: int64(3 + 3*i), UUID: webUUID(i), Task: name}
			for k := 1; k <= 8; k++ {
				s.Ts, s.Vs = append(s.Ts, t0+int64(250*k)-1), append(s.Vs, r.v)
			}
			b.Series = append(b.Series, s)
		}
	}
	return b
}

// testWebWaited: the task table's "Waited" column shows each task's
// share of its wall time stalled on CPU and on memory, sorts by it, and
// is absent for a job measured without stall figures.
func testWebWaited(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/web-waited")
	tab.waitLoads(t, 1)
	tab.waitText(t, `table.tasks thead`, "Waited")
	cells := func() string {
		return webEval[string](t, tab, `[...document.querySelectorAll('table.tasks tbody tr')].map((tr) =>
			tr.querySelector('.task-name').textContent + ': ' + tr.querySelector('td.waited').textContent).join('; ')`)
	}
	if got, want := cells(), "held up: CPU 25 % · mem 2.0 %; ran freely: CPU 0.0 % · mem 0.0 %"; got != want {
		t.Errorf("waited cells %q, want %q", got, want)
	}
	title := webEval[string](t, tab, `document.querySelector('table.tasks tbody tr td.waited').title`)
	if !strings.Contains(title, "waiting for a CPU: 25 %") || !strings.Contains(title, "waiting on memory: 2.0 %") {
		t.Errorf("waited cell title %q, want both shares spelled out", title)
	}
	// Sorting by it puts the most stalled first, then reverses.
	webEval[bool](t, tab, `(document.querySelector('button[data-key="waited"]').click(), true)`)
	if got := cells(); !strings.HasPrefix(got, "held up:") {
		t.Errorf("sorted by waited: %q, want held up first", got)
	}
	webEval[bool](t, tab, `(document.querySelector('button[data-key="waited"]').click(), true)`)
	if got := cells(); !strings.HasPrefix(got, "ran freely:") {
		t.Errorf("sorted by waited again: %q, want ran freely first", got)
	}
	// A job without stall figures has no such column.
	tab.navigate(t, base+"/jobs/web-cgroup")
	tab.waitLoads(t, 1)
	tab.waitText(t, `table.tasks thead`, "Duration")
	if n := webEval[int](t, tab, `document.querySelectorAll('table.tasks td.waited, button[data-key="waited"]').length`); n != 0 {
		t.Errorf("a job without stall figures shows %d waited cells or headers, want none", n)
	}
	tab.checkProblems(t)
}
