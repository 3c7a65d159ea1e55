package live

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/peakline/peakline/collector/ansible"
)

// followMaxTries is how many scans a job event file may stay unreadable as
// JSON before the follower gives up on it. ansible-runner writes
// <counter>-<uuid>.json.tmp and renames it, so a complete name normally
// holds complete JSON; other writers may not.
const followMaxTries = 40

// eventFollower tails a job_events directory while the job runs and adds
// the events it reads to its Events. One goroutine scans (run); the
// Events are safe for concurrent use.
//
// Every scan is an answer (Events.Answered): a local directory is never
// down, and what it lists is every event written so far (none while the
// directory is not there yet). So a sample is settled at most one scan
// after it is Settle old, as when only the age counted.
type eventFollower struct {
	// locate returns the job_events directory, or "" while it is not known
	// yet (ansible-runner has not made artifacts/<ident> so far).
	locate func() string
	now    func() time.Time
	log    *slog.Logger
	reader *ansible.EventReader

	events *Events // what was read so far

	mu    sync.Mutex
	dir   string
	read  map[string]bool // file names read or given up on
	tries map[string]int  // file names not yet valid JSON: scans so far
}

// newEventFollower returns a follower of the directory locate finds, on
// the clock now.
func newEventFollower(locate func() string, now func() time.Time, log *slog.Logger) *eventFollower {
	return &eventFollower{
		locate: locate,
		now:    now,
		log:    log,
		reader: ansible.NewEventReader(),
		events: NewEvents(),
		read:   map[string]bool{},
		tries:  map[string]int{},
	}
}

// fixedDir is a locate function for a directory known up front.
func fixedDir(dir string) func() string { return func() string { return dir } }

// run scans every interval until ctx is done, then once more so that the
// events of the job's last moments are in, and completes the Events: the
// caller ends ctx once the job is over, when runner has written them all.
func (f *eventFollower) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f.scan()
		select {
		case <-ctx.Done():
			f.scan()
			f.events.Complete()
			return
		case <-t.C:
		}
	}
}

// scan reads the event files that appeared since the previous scan, and
// tells the Events it answered at the scan's start.
func (f *eventFollower) scan() {
	at := f.now()
	defer func() { f.events.Answered(at) }()
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
		f.events.Add(got)
	}
}
