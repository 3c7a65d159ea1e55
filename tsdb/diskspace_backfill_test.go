package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	ptsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/peakline/peakline/tsdb/disktest"
)

// noBlockLeftovers requires dir to hold no throw-away head of a backfill
// write, no unfinished block and no block at all.
func noBlockLeftovers(t *testing.T, s *Store, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), backfillTmpPrefix) || strings.HasSuffix(e.Name(), ".tmp-for-creation") {
			t.Errorf("a refused backfill write left %s behind", e.Name())
		}
	}
	if n := len(s.db.Blocks()); n != 0 {
		t.Errorf("%d blocks loaded after a refused backfill write, want none", n)
	}
}

// Below MinFreeDisk plus the chunk file a block's writer allocates whole,
// a write of old samples (a backfill block) is refused before it writes
// anything, naming --min-free-disk and the chunk file, while writes to
// the head still fit and are taken; /healthz's status does not refuse.
// Once space is freed the old samples are taken, and all survive a
// reopen.
func TestBackfillLowDiskRefused(t *testing.T) {
	const minFree = 8 << 20
	reg := prometheus.NewRegistry()
	s, env := openOnTmpfs(t, minFree, reg)
	defer s.Close()
	// Room for head writes above the threshold, not for a chunk file.
	filler := disktest.Fill(t, env.mnt, minFree+blockChunkSegmentSize-4<<20)
	env.clock.Advance(diskCheckInterval)
	old := testNow.Add(-48 * time.Hour).UnixMilli()
	acked := map[string]int{}
	_, err := s.Append(context.Background(), diskBatch(0, 4000, old))
	if !errors.Is(err, ErrInsufficientStorage) || !strings.Contains(err.Error(), "--min-free-disk 8.0MiB") ||
		!strings.Contains(err.Error(), "chunk file takes 32.0MiB") {
		t.Fatalf("backfill write below --min-free-disk plus a chunk file: %v, want %v naming both", err, ErrInsufficientStorage)
	}
	noBlockLeftovers(t, s, env.dir)
	if got := rawStoreSamples(t, s, "disk-0000"); got != 0 {
		t.Fatalf("refused backfill write stored %d samples", got)
	}
	if got := counter(t, reg, "peakline_disk_refused_writes_total", "min_free_disk"); got != 1 {
		t.Fatalf("peakline_disk_refused_writes_total{reason=min_free_disk} = %v, want 1", got)
	}
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() while head writes fit = %+v, want not refusing", st)
	}
	res, err := s.Append(context.Background(), diskBatch(1, 4000, testNow.Add(-time.Hour).UnixMilli()))
	if err != nil || res.Samples != 4000 || res.Tasks != 1 {
		t.Fatalf("head write next to the refused backfill: %+v, %v", res, err)
	}
	acked["disk-0001"] = res.Samples + res.Tasks
	disktest.Free(t, filler)
	env.clock.Advance(diskCheckInterval)
	res, err = s.Append(context.Background(), diskBatch(0, 4000, old))
	if err != nil || res.Samples != 4000 || res.Tasks != 1 {
		t.Fatalf("backfill write after space was freed: %+v, %v", res, err)
	}
	acked["disk-0000"] = res.Samples + res.Tasks
	if n := len(s.db.Blocks()); n != 1 {
		t.Fatalf("%d blocks after the backfill write, want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkAcked(t, env.dir, env.opts, acked)
}

// With the rule off, a backfill write that runs out of space inside the
// block write (the chunk file's allocation) is a clean refusal: it is
// ErrInsufficientStorage (a server's 507), not a failed log; the block,
// written in a directory of its own, is gone with its throw-away head;
// the head part of a write with old and recent samples is rolled back;
// writes to the head go on, old samples are taken once space is freed,
// and everything acknowledged survives a reopen.
func TestBackfillOutOfSpaceRefusedCleanly(t *testing.T) {
	s, env := openOnTmpfs(t, -1, nil)
	defer s.Close()
	recent := func(i int) int64 { return testNow.Add(-2*time.Hour + time.Duration(i)*10*time.Second).UnixMilli() }
	w := &diskWriter{t: t, startMs: recent, acked: map[string]int{}, next: 10}
	if err := w.write(s); err != nil {
		t.Fatal(err)
	}
	filler := disktest.Fill(t, env.mnt, 4<<20)
	old := testNow.Add(-48 * time.Hour).UnixMilli()
	_, err := s.Append(context.Background(), diskBatch(0, 4000, old))
	if !errors.Is(err, ErrInsufficientStorage) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrLogUnsound) {
		t.Fatalf("backfill write out of space: %v, want %v for no space left", err, ErrInsufficientStorage)
	}
	// One job, old samples and recent ones: all or nothing.
	mixed := diskBatch(1, 4000, old)
	mixed.Series = append(mixed.Series, SeriesData{Resource: "memory", Counter: 3, UUID: "u-disk-0001", Task: "fill the disk",
		Ts: []int64{recent(0), recent(0) + 10}, Vs: []float64{1 << 20, 2 << 20}})
	if _, err := s.Append(context.Background(), mixed); !errors.Is(err, ErrInsufficientStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write of old and recent samples out of space: %v, want %v", err, ErrInsufficientStorage)
	}
	for _, job := range []string{"disk-0000", "disk-0001"} {
		if got := rawStoreSamples(t, s, job); got != 0 {
			t.Fatalf("refused write of job %s stored %d samples", job, got)
		}
	}
	noBlockLeftovers(t, s, env.dir)
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() after refused backfill writes = %+v, want not refusing", st)
	}
	for range 20 {
		if err := w.write(s); err != nil {
			t.Fatalf("head write %d after the refused backfill: %v", w.next-1, err)
		}
	}
	disktest.Free(t, filler)
	for i, b := range []*Batch{diskBatch(0, 4000, old), mixed} {
		res, err := s.Append(context.Background(), b)
		if err != nil || res.Samples != 4000+2*i || res.Tasks != 1 {
			t.Fatalf("write of job %s after space was freed: %+v, %v", b.JobID, res, err)
		}
		w.acked[b.JobID] = res.Samples + res.Tasks
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := checkAcked(t, env.dir, env.opts, w.acked)
	if d := r.Damage(); len(d.Logs) != 0 {
		t.Fatalf("the log is corrupt after refused backfill writes: %+v", d.Logs)
	}
}

// A block larger than one chunk file (blockChunkSegmentSize) has several;
// the start's block check (repair.go) follows the chunk references into
// each and passes the block whole.
func TestCheckBlockOfManyChunkFiles(t *testing.T) {
	dir := t.TempDir()
	opts := ptsdb.DefaultHeadOptions()
	opts.ChunkDirRoot = t.TempDir()
	h, err := ptsdb.NewHead(nil, nil, nil, nil, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	app := h.Appender(context.Background())
	for i := range 50 {
		ls := labels.FromStrings("__name__", "m", "i", fmt.Sprint(i))
		for k := range int64(2000) {
			if _, err := app.Append(0, ls, k*1000, float64(k*int64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	// 64 KiB files stand for 32 MiB ones, as a block of 100 000 samples
	// stands for a large one.
	c, err := ptsdb.NewLeveledCompactorWithOptions(context.Background(), nil, slog.New(slog.DiscardHandler), []int64{blockRangeMs},
		nil, ptsdb.LeveledCompactorOptions{MaxBlockChunkSegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.Write(dir, ptsdb.NewRangeHead(h, math.MinInt64, math.MaxInt64), 0, 2000*1000, nil)
	if err != nil || len(ids) != 1 {
		t.Fatalf("write block: %v %v", ids, err)
	}
	bdir := filepath.Join(dir, ids[0].String())
	files, err := os.ReadDir(filepath.Join(bdir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("the block has %d chunk files, want several", len(files))
	}
	meta, reason, err := checkBlock(bdir)
	if err != nil {
		t.Fatalf("check of a block of %d chunk files: %s: %v", len(files), reason, err)
	}
	if meta.Stats.NumSamples != 100_000 {
		t.Fatalf("the block holds %d samples, want 100000", meta.Stats.NumSamples)
	}
}
