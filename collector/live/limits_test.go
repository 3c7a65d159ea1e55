package live

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
)

// limitStats is a fakeStats with a memory limit and an OOM kill count.
type limitStats struct {
	fakeStats
	lmu          sync.Mutex
	limit, kills uint64
}

func (l *limitStats) MemoryLimit() (uint64, error) {
	l.lmu.Lock()
	defer l.lmu.Unlock()
	return l.limit, nil
}

func (l *limitStats) OOMKills() (uint64, bool, error) {
	l.lmu.Lock()
	defer l.lmu.Unlock()
	return l.kills, true, nil
}

// The memory limit and OOM kills of the job's cgroup go out as job info
// with the next batch; a kill is pinned to the task running at the
// memory reading that saw it, and that task's counter is sent once the
// events cover its time. How the job was measured and its forks stay.
func TestSessionLimitsAndOOM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ms0 := t0.UnixMilli()
		st := &limitStats{fakeStats: fakeStats{start: t0, cpuShare: 1, mem: 1000, pids: 2}, limit: 256 << 20}
		evs := NewEvents()
		evs.Add([]ansible.JobEvent{{Counter: 3, TimeMs: ms0 - 100, TaskStart: true, TaskUUID: "a", Task: "A"}})
		sent := &sentBatches{t: t}
		s, err := NewSession(SessionConfig{
			JobID: "j", Stats: st, Events: evs, PollInterval: 250 * time.Millisecond,
			Info:   ansible.JobInfo{TemplateID: "7", Measured: ansible.MeasuredCgroup, Forks: 4},
			Settle: time.Hour, FlushInterval: 100 * time.Millisecond, Send: sent.send, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		at := sleeper(t0)
		at(600)
		evs.Add([]ansible.JobEvent{{Counter: 5, TimeMs: ms0 + 650, TaskStart: true, TaskUUID: "b", Task: "B"}})
		at(900)
		st.lmu.Lock()
		st.kills = 1 // killed in B, seen by the poll at 1000
		st.lmu.Unlock()
		at(1100)
		s.SetInfo(ansible.JobInfo{TemplateID: "7", Status: "failed", Forks: 4})
		at(1300)
		evs.Add([]ansible.JobEvent{{Counter: 7, TimeMs: ms0 + 1300, TaskStart: true, TaskUUID: "c", Task: "C"}})
		at(1600)
		evs.Add([]ansible.JobEvent{{Counter: 9, TimeMs: ms0 + 1590, Hosts: 4}}) // playbook_on_stats
		evs.Complete()
		s.Close()

		var last ship.JobInfo
		for _, b := range sent.batches {
			if b.JobInfo != (ship.JobInfo{}) {
				last = b.JobInfo
			}
		}
		want := ship.JobInfo{TemplateID: "7", Status: "failed", Measured: ansible.MeasuredCgroup, Forks: 4, Hosts: 4,
			MemoryLimitBytes: 256 << 20, OOMKills: 1, OOMCounter: 5}
		if last != want {
			t.Errorf("last info sent %+v, want %+v", last, want)
		}
	})
}

func TestCommandForks(t *testing.T) {
	pdd := t.TempDir()
	f := func(want int, env []string, argv ...string) {
		t.Helper()
		if got := commandForks(argv, env); got != want {
			t.Errorf("commandForks(%q, %q) = %d, want %d", argv, env, got, want)
		}
	}
	f(3, nil, "ansible-runner", "run", pdd, "-p", "site.yml", "--forks", "3")
	f(3, nil, "ansible-runner", "run", pdd, "--forks=3")
	f(ansible.DefaultForks, nil, "ansible-runner", "run", pdd, "-p", "site.yml")
	f(9, []string{"ANSIBLE_FORKS=9"}, "ansible-runner", "run", pdd)
	f(2, []string{"ANSIBLE_FORKS=9"}, "/usr/bin/ansible-playbook", "-f", "2", "site.yml")
	f(ansible.DefaultForks, nil, "ansible-playbook", "site.yml")
	f(0, nil, "sh", "-c", "ansible-playbook -f 2 site.yml")
	f(0, nil)
}
