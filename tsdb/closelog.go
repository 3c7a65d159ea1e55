package tsdb

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
)

// closingHandler is the log handler the embedded TSDB writes through.
// Closing the TSDB cancels a head compaction in flight, which it logs as
// "compaction failed … context canceled" at error level; nothing failed
// (the head is still in the WAL and the compaction runs again at the next
// start), so once the store is closing that record is written at info
// level saying so. Every other record passes unchanged.
type closingHandler struct {
	slog.Handler
	closing *atomic.Bool
}

func (h closingHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.closing.Load() && r.Level >= slog.LevelError && r.Message == "compaction failed" && canceledRecord(r) {
		out := slog.NewRecord(r.Time, slog.LevelInfo, "compaction stopped by closing the store; it runs again at the next start", r.PC)
		return h.Handler.Handle(ctx, out)
	}
	return h.Handler.Handle(ctx, r)
}

func (h closingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return closingHandler{Handler: h.Handler.WithAttrs(as), closing: h.closing}
}

func (h closingHandler) WithGroup(name string) slog.Handler {
	return closingHandler{Handler: h.Handler.WithGroup(name), closing: h.closing}
}

// canceledRecord reports whether a record's err attribute says its
// context was canceled.
func canceledRecord(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), context.Canceled.Error()) {
			found = true
			return false
		}
		return true
	})
	return found
}
