package tsdb

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	ptsdb "github.com/prometheus/prometheus/tsdb"
)

// logBuffer collects a store's log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// headJobs lists the jobs with a series in the head.
func headJobs(t *testing.T, s *Store) []string {
	t.Helper()
	ir, err := s.db.Head().Index()
	if err != nil {
		t.Fatal(err)
	}
	defer ir.Close()
	vals, err := ir.LabelValues(context.Background(), LabelJob, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Clone(v)
	}
	slices.Sort(out)
	return out
}

// blockRanges is the [min, max) of every block, sorted.
func blockRanges(s *Store) [][2]int64 {
	var out [][2]int64
	for _, b := range s.db.Blocks() {
		out = append(out, [2]int64{b.Meta().MinTime, b.Meta().MaxTime})
	}
	slices.SortFunc(out, func(a, b [2]int64) int { return cmpInt64(a[0], b[0]) })
	return out
}

// blockIDs maps each job of ids to the ULIDs of the blocks holding it.
func blockIDs(t *testing.T, s *Store, ids ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, id := range ids {
		targets, err := s.blocksWith(context.Background(), labels.MustNewMatcher(labels.MatchEqual, LabelJob, id))
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			out[id] = append(out[id], tg.block.Meta().ULID.String())
		}
	}
	return out
}

func dayOf(ms int64) int64 { return alignDown(ms, backfillDayMs) }

// Old samples go to a block of their day, never to the head; a batch
// sent again is stored once and writes no block.
func TestBackfillWritesDayBlocks(t *testing.T) {
	s, dir := openTest(t)
	ctx := context.Background()
	recent := time.Now().Add(-time.Minute).UnixMilli()
	old := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	// Starts 3 s before midnight: its samples fall on two days.
	midnight := time.Date(2021, 6, 2, 0, 0, 0, 0, time.UTC).UnixMilli() - 3000
	fx := map[string]*Batch{"new": exampleBatch("new", recent), "old": exampleBatch("old", old), "midnight": exampleBatch("midnight", midnight)}
	for _, id := range []string{"new", "old", "midnight"} {
		res, err := s.Append(ctx, fx[id])
		if err != nil || res.Samples != 72 || res.Tasks != 4 {
			t.Fatalf("append %s = %+v, %v, want 72 samples and 4 records (3 tasks, 1 last event)", id, res, err)
		}
	}
	if got := headJobs(t, s); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("jobs in the head = %v, want only the recent one", got)
	}
	want := [][2]int64{
		{dayOf(old), dayOf(old) + backfillDayMs},
		{dayOf(midnight), dayOf(midnight) + backfillDayMs},
		{dayOf(midnight) + backfillDayMs, dayOf(midnight) + 2*backfillDayMs},
	}
	if got := blockRanges(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("block ranges = %v, want one per day %v", got, want)
	}
	for _, b := range s.db.Blocks() {
		if m := b.Meta(); !m.Compaction.FromOutOfOrder() {
			t.Fatalf("backfill block %s lacks the out-of-order hint", b.Meta().ULID)
		}
	}
	check := func(when string) {
		t.Helper()
		for id, b := range fx {
			if got, want := readSamples(t, s, id), wantSamples([]*Batch{b}); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: %d samples, want %d", id, when, len(got), len(want))
			}
		}
	}
	check("after backfill")
	for _, id := range []string{"old", "midnight"} {
		res, err := s.Append(ctx, fx[id])
		if err != nil || res.Samples != 0 || res.Tasks != 0 || res.Duplicates != 72 {
			t.Fatalf("second append of %s = %+v, %v, want 72 duplicates and nothing new", id, res, err)
		}
	}
	if got := blockRanges(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("block ranges after the retries = %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after a restart")
	if res, err := s.Append(ctx, fx["old"]); err != nil || res.Samples != 0 || res.Duplicates != 72 {
		t.Fatalf("append of old after a restart = %+v, %v, want 72 duplicates", res, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), backfillTmpPrefix) {
			t.Fatalf("throw-away head %s left in the data directory", e.Name())
		}
	}
}

// Two imports into the same day overlap; Prometheus's compaction merges
// them into one block of that day, and its log lines are summarised.
func TestBackfillSameDayMerges(t *testing.T) {
	var logs logBuffer
	s, err := Open(t.TempDir(), Options{}, logs.logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	old := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	fx := map[string]*Batch{"a": exampleBatch("a", old), "b": exampleBatch("b", old+3_600_000)}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Append(ctx, fx[id]); err != nil {
			t.Fatal(err)
		}
	}
	day := [2]int64{dayOf(old), dayOf(old) + backfillDayMs}
	if got := blockRanges(s); !reflect.DeepEqual(got, [][2]int64{day, day}) {
		t.Fatalf("block ranges = %v, want two of %v", got, day)
	}
	if err := s.db.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if got := blockRanges(s); !reflect.DeepEqual(got, [][2]int64{day}) {
		t.Fatalf("block ranges after compaction = %v, want one of %v", got, day)
	}
	for id, b := range fx {
		if got, want := readSamples(t, s, id), wantSamples([]*Batch{b}); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after the merge: %d samples, want %d", id, len(got), len(want))
		}
	}
	s.blockLog.flush()
	var summaries int
	for _, l := range logs.lines() {
		for _, per := range []string{"Overlapping blocks", "write block", "compact blocks"} {
			if strings.Contains(l, per) {
				t.Fatalf("per-block line logged: %s", l)
			}
		}
		if strings.Contains(l, "tsdb block activity") {
			summaries++
			if !strings.Contains(l, "written=2") || !strings.Contains(l, "merged=1") || !strings.Contains(l, "overlap_warnings=") {
				t.Fatalf("summary %q lacks written=2, merged=1 and overlap_warnings", l)
			}
		}
	}
	if summaries != 1 {
		t.Fatalf("%d summary lines, want 1:\n%s", summaries, strings.Join(logs.lines(), "\n"))
	}
}

// Deleting an old job drops the block that holds only it, rewrites the
// one it shares with another job of its day, and leaves every other block
// as it was; nothing of the other jobs is lost.
func TestDeleteTouchesOnlyItsBlocks(t *testing.T) {
	s, dir := openTest(t)
	ctx := context.Background()
	day1 := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	day5 := time.Date(2019, 3, 5, 12, 0, 0, 0, time.UTC).UnixMilli()
	fx := map[string]*Batch{
		"a": exampleBatch("a", day1), "b": exampleBatch("b", day5), "c": exampleBatch("c", day5+60_000),
		"d": exampleBatch("d", day5+5*backfillDayMs), "new": exampleBatch("new", time.Now().Add(-time.Minute).UnixMilli()),
	}
	for _, id := range []string{"new", "a", "b", "c", "d"} {
		if _, err := s.Append(ctx, fx[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Compact(ctx); err != nil { // b and c into one block
		t.Fatal(err)
	}
	before := blockIDs(t, s, "a", "b", "c", "d")
	if len(before["a"]) != 1 || len(before["d"]) != 1 || !slices.Equal(before["b"], before["c"]) || len(before["b"]) != 1 {
		t.Fatalf("blocks before the deletes = %v, want one each, b and c sharing", before)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	after := blockIDs(t, s, "a", "b", "c", "d")
	if len(after["a"]) != 0 || !slices.Equal(after["b"], before["b"]) || !slices.Equal(after["d"], before["d"]) {
		t.Fatalf("blocks after deleting a = %v, before %v: want a's dropped, the others untouched", after, before)
	}
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	after = blockIDs(t, s, "b", "c", "d")
	if len(after["b"]) != 0 || len(after["c"]) != 1 || after["c"][0] == before["c"][0] || !slices.Equal(after["d"], before["d"]) {
		t.Fatalf("blocks after deleting b = %v, before %v: want c's rewritten, d's untouched", after, before)
	}
	if got := len(s.db.Blocks()); got != 2 {
		t.Fatalf("%d blocks left, want 2 (c's day and d's day)", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, counts := blockSamples(t, dir, []string{"a", "b", "c", "d"})
	for id, want := range map[string]int{"a": 0, "b": 0, "c": rawCount([]*Batch{fx["c"]}), "d": rawCount([]*Batch{fx["d"]})} {
		if counts[id] != want {
			t.Fatalf("blocks on disk hold %d samples of %s, want %d", counts[id], id, want)
		}
	}
	s, err := Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"c", "d", "new"} {
		if got, want := readSamples(t, s, id), wantSamples([]*Batch{fx[id]}); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %d samples, want %d", id, len(got), len(want))
		}
	}
}

// Closing the store stops the cleanup pass between blocks; the next Open
// resumes with the blocks not done yet and rewrites none twice. Jobs whose
// blocks were done are released at once.
func TestDeletePassResumesAfterClose(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	hold := make(chan struct{})
	s, err := Open(dir, Options{HoldDeletes: hold}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	fx := map[string]*Batch{}
	var deleted []string
	for i := range 7 {
		id := "job-" + string(rune('a'+i))
		fx[id] = exampleBatch(id, base+int64(i)*backfillDayMs)
		if _, err := s.Append(ctx, fx[id]); err != nil {
			t.Fatal(err)
		}
		if i < 6 {
			deleted = append(deleted, id)
		}
	}
	for _, id := range deleted {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error)
	s.afterBlock = func(ctx context.Context, rewritten int) {
		if rewritten == 2 {
			go func() { closed <- s.Close() }()
			<-ctx.Done() // Close cancels the pass
		}
	}
	hold <- struct{}{}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	records := map[string]int{}
	entries, err := os.ReadDir(filepath.Join(dir, deletionsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, deletionsDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"removed_ms"`) {
			records["removed"]++
		} else {
			records["pending"]++
		}
	}
	if !reflect.DeepEqual(records, map[string]int{"removed": 2, "pending": 4}) {
		t.Fatalf("records after the interrupted pass = %v, want 2 removed and 4 pending", records)
	}

	hold = make(chan struct{})
	s, err = Open(dir, Options{HoldDeletes: hold}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rewrites := 0
	s.afterBlock = func(context.Context, int) { rewrites++ }
	hold <- struct{}{}
	if err := s.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	if rewrites != 4 {
		t.Fatalf("resumed pass rewrote %d blocks, want the 4 not done", rewrites)
	}
	for _, id := range deleted {
		if n := rawStoreSamples(t, s, id); n != 0 {
			t.Fatalf("%s: %d samples left after the resumed pass", id, n)
		}
	}
	if got, want := readSamples(t, s, "job-g"), wantSamples([]*Batch{fx["job-g"]}); !reflect.DeepEqual(got, want) {
		t.Fatalf("job-g: %d samples, want %d", len(got), len(want))
	}
	if got := len(s.db.Blocks()); got != 1 {
		t.Fatalf("%d blocks left, want job-g's only", got)
	}
}

// A store written before backfill blocks, with old jobs in the
// out-of-order head and its write-behind log, opens and reads in full
// under the small window, and a delete there finishes without walking the
// years of its out-of-order span block range by block range in the log.
func TestOpenStoreWithOldOutOfOrderHead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	now := time.Now()
	o := ptsdb.DefaultOptions()
	o.RetentionDuration = 0
	o.OutOfOrderTimeWindow = int64(100 * 365 * 24 * time.Hour / time.Millisecond)
	db, err := ptsdb.Open(dir, nil, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx := map[string]*Batch{
		"new":  exampleBatch("new", now.Add(-time.Minute).UnixMilli()),
		"old":  exampleBatch("old", time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()),
		"old2": exampleBatch("old2", time.Date(2023, 7, 1, 12, 0, 0, 0, time.UTC).UnixMilli()),
	}
	for _, id := range []string{"new", "old", "old2"} {
		rows, _ := batchRows(fx[id], now.UnixMilli())
		app := db.Appender(ctx)
		for _, r := range rows {
			for i, ts := range r.ts {
				if _, err := app.Append(0, r.ls, ts, r.vs[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s, err := Open(dir, Options{}, logs.logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := s.db.Head(); h.MinOOOTime() > fx["old"].Tasks[0].StartMs {
		t.Fatalf("out-of-order head starts at %d, want the 2019 job replayed into it", h.MinOOOTime())
	}
	for id, b := range fx {
		if got, want := readSamples(t, s, id), wantSamples([]*Batch{b}); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s in the old store: %d samples, want %d", id, len(got), len(want))
		}
	}
	if err := s.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rawStoreSamples(t, s, "old"); n != 0 {
		t.Fatalf("old: %d samples left after its delete", n)
	}
	for _, id := range []string{"new", "old2"} {
		if got, want := readSamples(t, s, id), wantSamples([]*Batch{fx[id]}); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after deleting old: %d samples, want %d", id, len(got), len(want))
		}
	}
	if n := len(logs.lines()); n > 40 {
		t.Fatalf("%d log lines for opening and one delete, want at most 40:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}
