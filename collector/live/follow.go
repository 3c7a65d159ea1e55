package live

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// followMaxTries is how many scans a job event file may stay unreadable as
// JSON before the follower gives up on it. ansible-runner writes
// <counter>-<uuid>.json.tmp and renames it, so a complete name normally
// holds complete JSON; other writers may not.
const followMaxTries = 40

// eventFollower tails a job_events directory while the job runs and tells
// which task was running at a given time. It is safe for concurrent use:
// one goroutine scans (run), others ask (taskAt, settled, takeTasks).
type eventFollower struct {
	// locate returns the job_events directory, or "" while it is not known
	// yet (ansible-runner has not made artifacts/<ident> so far).
	locate func() string
	log    *slog.Logger
	reader *ansible.EventReader

	mu    sync.Mutex
	dir   string
	read  map[string]bool // file names read or given up on
	tries map[string]int  // file names not yet valid JSON: scans so far
	// starts are the task starts seen, ordered by created time, then
	// counter; unsent counts the starts not yet taken by takeTasks.
	starts []ansible.JobEvent
	unsent []ansible.JobEvent
	// last is the event with the highest counter; lastTaken tells whether
	// takeTasks returned it already.
	last      ansible.JobEvent
	haveLast  bool
	lastTaken bool
	// newestMs is the newest created time of any event seen: every task
	// that started at or before it is known (events arrive in order).
	newestMs int64
}

// newEventFollower returns a follower of the directory locate finds.
func newEventFollower(locate func() string, log *slog.Logger) *eventFollower {
	return &eventFollower{
		locate: locate,
		log:    log,
		reader: ansible.NewEventReader(),
		read:   map[string]bool{},
		tries:  map[string]int{},
	}
}

// fixedDir is a locate function for a directory known up front.
func fixedDir(dir string) func() string { return func() string { return dir } }

// run scans every interval until ctx is done, then once more so that the
// events of the job's last moments are in.
func (f *eventFollower) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f.scan()
		select {
		case <-ctx.Done():
			f.scan()
			return
		case <-t.C:
		}
	}
}

// scan reads the event files that appeared since the previous scan.
func (f *eventFollower) scan() {
	f.mu.Lock()
	dir := f.dir
	f.mu.Unlock()
	if dir == "" {
		if dir = f.locate(); dir == "" {
			return
		}
		f.mu.Lock()
		f.dir = dir
		f.mu.Unlock()
		f.log.Info("following job events", "dir", dir)
	}
	paths, err := ansible.ListEventFiles(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("cannot follow job events", "err", err)
		}
		return
	}
	var got []ansible.JobEvent
	for _, p := range paths {
		name := filepath.Base(p)
		if f.read[name] {
			continue
		}
		ev, err := f.reader.ReadFile(p)
		switch {
		case err == nil:
			f.read[name] = true
			delete(f.tries, name)
			got = append(got, ev)
		case errors.Is(err, fs.ErrNotExist):
			// Renamed or removed between the listing and the read.
		default:
			// Not yet valid: a writer that does not rename may still be
			// writing. Try again next scan, for a while.
			f.tries[name]++
			if f.tries[name] >= followMaxTries {
				f.read[name] = true
				delete(f.tries, name)
				f.log.Warn("ignoring job event file", "err", err)
			}
		}
	}
	if len(got) > 0 {
		f.add(got)
	}
}

// add records events.
func (f *eventFollower) add(evs []ansible.JobEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sorted := true
	for _, ev := range evs {
		f.newestMs = max(f.newestMs, ev.TimeMs)
		if !f.haveLast || ev.Counter > f.last.Counter {
			f.last, f.haveLast, f.lastTaken = ev, true, false
		}
		if !ev.TaskStart {
			continue
		}
		if n := len(f.starts); n > 0 && compareStarts(f.starts[n-1], ev) > 0 {
			sorted = false
		}
		f.starts = append(f.starts, ev)
		f.unsent = append(f.unsent, ev)
	}
	if !sorted {
		slices.SortFunc(f.starts, compareStarts)
	}
}

func compareStarts(a, b ansible.JobEvent) int {
	if c := cmp.Compare(a.TimeMs, b.TimeMs); c != 0 {
		return c
	}
	return cmp.Compare(a.Counter, b.Counter)
}

// taskAt returns the task start with the greatest created time at or before
// ms (the greatest counter among equal times); ok is false before the first
// task.
func (f *eventFollower) taskAt(ms int64) (start ansible.JobEvent, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, _ := slices.BinarySearchFunc(f.starts, ms, func(e ansible.JobEvent, t int64) int {
		if e.TimeMs <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return ansible.JobEvent{}, false
	}
	return f.starts[i-1], true
}

// settled reports whether every task start at or before ms is known: an
// event created at or after ms was seen.
func (f *eventFollower) settled(ms int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.haveLast && f.newestMs >= ms
}

// takeTasks returns the task starts not returned before, and the newest
// event when it changed since the previous call (else ok is false).
func (f *eventFollower) takeTasks() (starts []ansible.JobEvent, last ansible.JobEvent, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	starts, f.unsent = f.unsent, nil
	if f.haveLast && !f.lastTaken {
		f.lastTaken = true
		return starts, f.last, true
	}
	return starts, ansible.JobEvent{}, false
}
