package tsdb

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The embedded TSDB logs a line per block it writes, merges or drops, two
// per step of an out-of-order compaction (written or empty), and on every
// block reload while blocks overlap a warning listing all of them (tens
// of kilobytes on a backfilled store). Those records are counted instead
// and written as one summary line per blockLogInterval, and at the end of
// each delete pass and at Close.

// blockLogInterval is how often the counted records are summarised.
const blockLogInterval = time.Minute

// blockRecords maps the messages counted to their key in the summary;
// "" counts nothing (steps whose outcome another record reports).
var blockRecords = map[string]string{
	"write block completed":                        "written",
	"compact blocks":                               "merged",
	"write block resulted in empty block":          "empty",
	"compact blocks resulted in empty block":       "empty",
	"compact ooo head resulted in no blocks":       "empty",
	"Deleting obsolete block":                      "dropped",
	"Overlapping blocks found during reloadBlocks": "overlap_warnings",
	"Overlapping blocks found during opening":      "overlap_warnings",
	"Found overlapping blocks during compaction":   "overlap_merges",
	"out-of-order compaction started":              "ooo_compactions",
	"Starting selected series compaction":          "selected_compactions",
	"write block started":                          "",
	"Found healthy block":                          "",
	"out-of-order compaction completed":            "",
	"Head portion block created":                   "",
	"Ending selected series compaction":            "",
	"Head GC started":                              "",
	"Head GC completed":                            "",
	"Compactions disabled":                         "",
	"Compactions enabled":                          "",
}

// blockLogKeys is the order of the summary's keys.
var blockLogKeys = []string{"written", "merged", "empty", "dropped", "overlap_warnings", "overlap_merges", "ooo_compactions", "selected_compactions"}

// blockLog counts block records. It is safe for concurrent use.
type blockLog struct {
	out slog.Handler
	now func() time.Time

	mu     sync.Mutex
	counts map[string]int
	since  time.Time
}

func newBlockLog(out slog.Handler, now func() time.Time) *blockLog {
	return &blockLog{out: out, now: now, counts: map[string]int{}, since: now()}
}

// count counts one record; it reports false for a record not counted.
func (l *blockLog) count(msg string) bool {
	key, ok := blockRecords[msg]
	if !ok {
		return false
	}
	l.mu.Lock()
	l.counts[key]++
	l.mu.Unlock()
	return true
}

// flush writes the summary of the records counted since the last one, if
// any block was written, merged, dropped or reported overlapping.
func (l *blockLog) flush() {
	l.mu.Lock()
	counts, since := l.counts, l.since
	l.counts, l.since = map[string]int{}, l.now()
	l.mu.Unlock()
	attrs := []slog.Attr{slog.Duration("over", l.now().Sub(since).Round(time.Second))}
	for _, k := range blockLogKeys {
		if counts[k] > 0 {
			attrs = append(attrs, slog.Int(k, counts[k]))
		}
	}
	if len(attrs) == 1 {
		return
	}
	r := slog.NewRecord(l.now(), slog.LevelInfo, "tsdb block activity", 0)
	r.AddAttrs(attrs...)
	_ = l.out.Handle(context.Background(), r)
}

// blockLogHandler passes every record but the counted ones to Handler.
type blockLogHandler struct {
	slog.Handler
	log *blockLog
}

func (h blockLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError && h.log.count(r.Message) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h blockLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return blockLogHandler{Handler: h.Handler.WithAttrs(as), log: h.log}
}

func (h blockLogHandler) WithGroup(name string) slog.Handler {
	return blockLogHandler{Handler: h.Handler.WithGroup(name), log: h.log}
}

// runBlockLog writes the summary every blockLogInterval until Close.
func (s *Store) runBlockLog() {
	defer s.stopped.Done()
	tick := time.NewTicker(blockLogInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.blockLog.flush()
		}
	}
}
