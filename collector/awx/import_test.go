package awx

import (
	"slices"
	"testing"

	"github.com/peakline/peakline/collector/ansible"
)

// keptEvents keeps the task starts, the newest event and the oldest
// naming a playbook, each once, in counter order, whatever order the
// events come in.
func TestKeptEvents(t *testing.T) {
	start := func(c int64) ansible.JobEvent { return ansible.JobEvent{Counter: c, TaskStart: true} }
	other := func(c int64) ansible.JobEvent { return ansible.JobEvent{Counter: c} }
	withPlaybook := func(ev ansible.JobEvent) ansible.JobEvent { ev.Playbook = "site.yml"; return ev }
	f := func(in []ansible.JobEvent, want []int64) {
		t.Helper()
		var k keptEvents
		for _, ev := range in {
			k.add(ev)
		}
		got := k.events()
		if got == nil {
			t.Fatalf("events of %v: nil, want a non-nil slice", in)
		}
		var counters []int64
		for _, ev := range got {
			counters = append(counters, ev.Counter)
		}
		if !slices.Equal(counters, want) {
			t.Fatalf("events of %v: counters %v, want %v", in, counters, want)
		}
	}
	f(nil, nil)
	f([]ansible.JobEvent{other(1)}, []int64{1})
	f([]ansible.JobEvent{withPlaybook(other(1)), start(2), other(3), other(4), start(5), other(6), other(7)}, []int64{1, 2, 5, 7})
	// The newest event is a task start: kept once.
	f([]ansible.JobEvent{withPlaybook(start(1)), other(2), start(3)}, []int64{1, 3})
	// Out of order: the oldest playbook event and the newest event still win.
	f([]ansible.JobEvent{other(9), withPlaybook(other(5)), start(4), withPlaybook(other(2)), other(3)}, []int64{2, 4, 9})
}
