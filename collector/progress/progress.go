// Package progress reports how far a long pass has come (reading a tree's
// files, an AWX job's events, a bench run's steps) on a writer, stderr as
// a rule: a progress bar (schollz/progressbar) when the writer is a
// terminal, else one plain line every few seconds and one when the pass
// ends, with no carriage return or escape sequence, so that a log or a CI
// transcript stays readable. It knows nothing of what is counted.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// DefaultEvery is how often a plain report prints a line while the pass
// goes on.
const DefaultEvery = 5 * time.Second

// Options tune a Bar; the zero value takes the defaults.
type Options struct {
	// Terminal forces the bar (true) or the plain lines (false); nil
	// decides by IsTerminal(w).
	Terminal *bool
	// Every is the interval between plain lines (DefaultEvery).
	Every time.Duration
	// Now is the clock of the plain lines (time.Now).
	Now func() time.Time
	// Unit names what is counted in plain lines ("files", "events");
	// empty, the counts stand alone.
	Unit string
}

// IsTerminal reports whether w is a terminal: an *os.File whose
// descriptor is one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Bar reports the progress of one pass over total steps. It is safe for
// concurrent use; a nil *Bar does nothing.
type Bar struct {
	bar *progressbar.ProgressBar // on a terminal; else nil

	mu       sync.Mutex
	w        io.Writer
	what     string
	unit     string
	total    int
	done     int
	every    time.Duration
	now      func() time.Time
	started  time.Time
	lastLine time.Time
	finished bool
}

// New starts reporting a pass named what over total steps (total < 0:
// unknown) on w.
func New(w io.Writer, total int, what string, opts Options) *Bar {
	tty := IsTerminal(w)
	if opts.Terminal != nil {
		tty = *opts.Terminal
	}
	b := &Bar{w: w, what: what, unit: opts.Unit, total: total, every: opts.Every, now: opts.Now}
	if b.every <= 0 {
		b.every = DefaultEvery
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.started = b.now()
	b.lastLine = b.started
	if tty {
		b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return b
}

// Set records that n steps are done.
func (b *Bar) Set(n int) {
	if b == nil {
		return
	}
	if b.bar != nil {
		_ = b.bar.Set(n)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = n
	b.maybeLine()
}

// Add records n more steps done.
func (b *Bar) Add(n int) {
	if b == nil {
		return
	}
	if b.bar != nil {
		_ = b.bar.Add(n)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	b.maybeLine()
}

// Describe renames the pass from now on (the step under way).
func (b *Bar) Describe(what string) {
	if b == nil {
		return
	}
	if b.bar != nil {
		b.bar.Describe(what)
		return
	}
	b.mu.Lock()
	b.what = what
	b.mu.Unlock()
}

// Finish ends the report: the bar is cleared; plain output ends with a
// line of the steps done and the time taken. Calls after the first do
// nothing.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	if b.bar != nil {
		_ = b.bar.Finish()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	fmt.Fprintf(b.w, "%s: %s, done in %s\n", b.what, b.count(), b.now().Sub(b.started).Round(time.Millisecond))
}

// maybeLine prints a plain line when Every has passed since the last.
func (b *Bar) maybeLine() {
	if b.finished {
		return
	}
	now := b.now()
	if now.Sub(b.lastLine) < b.every {
		return
	}
	b.lastLine = now
	fmt.Fprintf(b.w, "%s: %s after %s\n", b.what, b.count(), now.Sub(b.started).Round(time.Second))
}

// count renders the steps done: "12 of 50 files (24%)".
func (b *Bar) count() string {
	unit := ""
	if b.unit != "" {
		unit = " " + b.unit
	}
	if b.total <= 0 {
		return fmt.Sprintf("%d%s", b.done, unit)
	}
	return fmt.Sprintf("%d of %d%s (%d%%)", b.done, b.total, unit, b.done*100/b.total)
}
