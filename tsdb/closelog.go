package tsdb

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// closingHandler is the log handler the embedded TSDB writes through.
// Closing the TSDB cancels a head compaction in flight, which it logs as
// "compaction failed … context canceled" at error level; nothing failed
// (the head is still in the WAL and the compaction runs again at the next
// start), so once the store is closing that record is written at info
// level saying so.
//
// The TSDB also only logs a failed write of the out-of-order log (its
// commit returns success, the samples being in memory): that record
// makes the store's log unsound (diskspace.go), as a failed commit does.
// Every record passes on.
type closingHandler struct {
	slog.Handler
	closing *atomic.Bool
	disk    *diskGuard
}

// wblFailedMsg is the TSDB's record of a failed out-of-order log write.
const wblFailedMsg = "Failed to log out of order samples into the WAL"

func (h closingHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.disk != nil && r.Message == wblFailedMsg {
		h.disk.failed(fmt.Errorf("write to out-of-order log: %s", recordErr(r)))
	}
	if h.closing.Load() && r.Level >= slog.LevelError && r.Message == "compaction failed" && canceledRecord(r) {
		out := slog.NewRecord(r.Time, slog.LevelInfo, "compaction stopped by closing the store; it runs again at the next start", r.PC)
		return h.Handler.Handle(ctx, out)
	}
	return h.Handler.Handle(ctx, r)
}

func (h closingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return closingHandler{Handler: h.Handler.WithAttrs(as), closing: h.closing, disk: h.disk}
}

func (h closingHandler) WithGroup(name string) slog.Handler {
	return closingHandler{Handler: h.Handler.WithGroup(name), closing: h.closing, disk: h.disk}
}

// recordErr is the err attribute of a record, "" for none.
func recordErr(r slog.Record) string {
	msg := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			msg = a.Value.String()
			return false
		}
		return true
	})
	return msg
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
