package tsdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// The canceled compaction of a closing store is logged at info level
// saying what happened; the same record before Close, and every other
// record, pass at their own level.
func TestClosingHandler(t *testing.T) {
	var buf bytes.Buffer
	closing := new(atomic.Bool)
	log := slog.New(closingHandler{Handler: slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), closing: closing}).With("component", "tsdb")
	canceled := fmt.Errorf("compact head: persist head block: %w", context.Canceled)
	line := func(f func()) string {
		t.Helper()
		buf.Reset()
		f()
		s := buf.String()
		return s[strings.Index(s, "level="):]
	}
	cases := []struct {
		closing bool
		log     func()
		want    string
	}{
		{false, func() { log.Error("compaction failed", "err", canceled) }, `level=ERROR msg="compaction failed" component=tsdb err="compact head: persist head block: context canceled"` + "\n"},
		{true, func() { log.Error("compaction failed", "err", canceled) }, `level=INFO msg="compaction stopped by closing the store; it runs again at the next start" component=tsdb` + "\n"},
		{true, func() { log.Error("compaction failed", "err", errors.New("write block: no space left on device")) }, `level=ERROR msg="compaction failed" component=tsdb err="write block: no space left on device"` + "\n"},
		{true, func() { log.Error("WAL truncation failed", "err", canceled) }, `level=ERROR msg="WAL truncation failed" component=tsdb err="compact head: persist head block: context canceled"` + "\n"},
		{true, func() { log.Info("compact blocks", "count", 2) }, `level=INFO msg="compact blocks" component=tsdb count=2` + "\n"},
	}
	for i, c := range cases {
		closing.Store(c.closing)
		if got := line(c.log); got != c.want {
			t.Errorf("case %d: logged\n%s want\n%s", i, got, c.want)
		}
	}
}
