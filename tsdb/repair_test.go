package tsdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/tsdb/wlog"
)

// syncBuffer is a log sink safe for the TSDB's background goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openDamaged opens dir with a log buffer and a registry.
func openDamaged(t *testing.T, dir string) (*Store, *syncBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	s, err := Open(dir, Options{}, slog.New(slog.NewTextHandler(logs, nil)), reg)
	if err != nil {
		t.Fatalf("open: %v\nlogs:\n%s", err, logs)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, logs, reg
}

// exampleSamples is the samples per resource of exampleBatch.
const exampleSamples = 24

// wantJob checks that a job reads back with all of exampleBatch's
// samples (want true) or is gone (want false).
func wantJob(t *testing.T, s *Store, id string, want bool) {
	t.Helper()
	job, err := s.ReadJob(context.Background(), id, minTime, maxTime)
	if !want {
		if !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("job %s: got %v, want ErrJobNotFound", id, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	if len(job.Columns) != 3 || len(job.Tasks) != 3 {
		t.Fatalf("job %s: %d columns, %d tasks, want 3 and 3", id, len(job.Columns), len(job.Tasks))
	}
	for _, c := range job.Columns {
		if len(c.Ts) != exampleSamples {
			t.Fatalf("job %s %s: %d samples, want %d", id, c.Resource.Name, len(c.Ts), exampleSamples)
		}
	}
}

// oneSegmentEach appends each batch to a store opened for it alone, so
// that each lands in a WAL segment of its own (the WAL starts a segment
// at every open); a nil batch leaves an empty segment.
func oneSegmentEach(t *testing.T, dir string, batches ...*Batch) {
	t.Helper()
	for _, b := range batches {
		s, err := Open(dir, Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b != nil {
			if _, err := s.Append(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// compactStore compacts the head into blocks. With at least five WAL
// segments this also checkpoints the oldest ones and deletes them, so
// their samples are in blocks only.
func compactStore(t *testing.T, dir string) {
	t.Helper()
	s, err := Open(dir, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyStore copies a closed store into a fresh dir, so that each case
// damages its own copy of one real store.
func copyStore(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// walStore holds job w1 in WAL segment 0, w2 in 1, w3 in 2.
func walStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	base := time.Now().Add(-3 * time.Hour).UnixMilli()
	oneSegmentEach(t, dir, exampleBatch("w1", base), exampleBatch("w2", base+60_000), exampleBatch("w3", base+120_000))
	return dir
}

// dataEnd is the end of a WAL segment's records: segments are padded
// with zeros to a page.
func dataEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end == 0 {
		t.Fatalf("%s holds no records", path)
	}
	return int64(end)
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestRepairLastWALSegment: a torn (truncated) or bit-flipped last
// segment is cut at its first bad record; the earlier jobs stay whole,
// and the log and /metrics say how many bytes were dropped.
func TestRepairLastWALSegment(t *testing.T) {
	orig := walStore(t)
	f := func(name string, damage func(t *testing.T, seg string, at int64)) {
		t.Run(name, func(t *testing.T) {
			dir := copyStore(t, orig)
			seg := wlog.SegmentName(filepath.Join(dir, "wal"), 2)
			end := dataEnd(t, seg)
			damage(t, seg, end*9/10) // past the first records
			st, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			s, logs, reg := openDamaged(t, dir)
			d := s.Damage()
			if len(d.Logs) != 1 {
				t.Fatalf("log damage %+v, want one entry\nlogs:\n%s", d.Logs, logs)
			}
			ld := d.Logs[0]
			if ld.Dir != "wal" || ld.Segment != 2 || ld.DroppedSegments != 0 || ld.DroppedRecords != 0 {
				t.Fatalf("log damage %+v, want wal segment 2, no later segment dropped", ld)
			}
			if ld.Offset <= 0 || ld.Offset >= end || ld.Offset > st.Size() || ld.DroppedBytes != st.Size()-ld.Offset {
				t.Fatalf("log damage %+v: offset must be inside the records (< %d) and the dropped bytes the rest of the %d-byte segment", ld, end, st.Size())
			}
			if !strings.Contains(logs.String(), "dropped_bytes="+itoa(ld.DroppedBytes)) {
				t.Fatalf("the log does not say how much was dropped:\n%s", logs)
			}
			if got := gauge(t, reg, "peakline_wal_repair_dropped_bytes"); got != float64(ld.DroppedBytes) {
				t.Fatalf("peakline_wal_repair_dropped_bytes %v, want %d", got, ld.DroppedBytes)
			}
			wantJob(t, s, "w1", true)
			wantJob(t, s, "w2", true)
		})
	}
	f("truncated", func(t *testing.T, seg string, end int64) {
		if err := os.Truncate(seg, end); err != nil {
			t.Fatal(err)
		}
	})
	f("bit flip", func(t *testing.T, seg string, end int64) { flipByte(t, seg, end) })
}

// TestRepairMiddleWALSegment: damage in segment 1 of 0..2 makes the
// repair drop segment 2 whole; the log and /metrics count its segments,
// bytes and records, and the job of segment 0 stays whole.
func TestRepairMiddleWALSegment(t *testing.T) {
	dir := walStore(t)
	wal := filepath.Join(dir, "wal")
	sc, err := scanLog(wlog.SegmentRange{Dir: wal, First: 2, Last: 2})
	records := sc.records
	if err != nil || records == 0 {
		t.Fatalf("segment 2 before the damage: %d records, %v", records, err)
	}
	seg1, seg2 := wlog.SegmentName(wal, 1), wlog.SegmentName(wal, 2)
	flipByte(t, seg1, dataEnd(t, seg1)/2)
	st1, _ := os.Stat(seg1)
	st2, _ := os.Stat(seg2)

	s, logs, reg := openDamaged(t, dir)
	d := s.Damage()
	if len(d.Logs) != 1 {
		t.Fatalf("log damage %+v, want one entry", d.Logs)
	}
	ld := d.Logs[0]
	if ld.Segment != 1 || ld.DroppedSegments != 1 || ld.DroppedRecords != records || ld.DroppedBytes != st1.Size()-ld.Offset+st2.Size() {
		t.Fatalf("log damage %+v, want segment 1, 1 segment and %d records dropped, %d bytes", ld, records, st1.Size()-ld.Offset+st2.Size())
	}
	for _, want := range []string{"segment=1", "dropped_segments=1", "dropped_records_at_least=" + itoa(int64(records))} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, logs)
		}
	}
	if got := gauge(t, reg, "peakline_wal_repair_dropped_segments"); got != 1 {
		t.Fatalf("peakline_wal_repair_dropped_segments %v, want 1", got)
	}
	if got := gauge(t, reg, "peakline_wal_repair_dropped_records"); got != float64(records) {
		t.Fatalf("peakline_wal_repair_dropped_records %v, want %d", got, records)
	}
	wantJob(t, s, "w1", true)
	wantJob(t, s, "w3", false)
}

// TestRepairMissingCheckpoint: a WAL whose checkpoint is gone or garbage
// cannot be replayed; Open says which checkpoint and what to do.
func TestRepairMissingCheckpoint(t *testing.T) {
	orig := t.TempDir()
	// Inside the head's window, so that the samples go through the WAL.
	base := time.Now().Add(-150 * time.Minute).UnixMilli()
	oneSegmentEach(t, orig, exampleBatch("old1", base), exampleBatch("old2", base+60_000), exampleBatch("old3", base+120_000), nil, nil)
	compactStore(t, orig)
	oneSegmentEach(t, orig, exampleBatch("new", base+3_600_000))
	f := func(name string, damage func(t *testing.T, cp string)) {
		t.Run(name, func(t *testing.T) {
			dir := copyStore(t, orig)
			cp, _, err := wlog.LastCheckpoint(filepath.Join(dir, "wal"))
			if err != nil {
				t.Fatalf("no checkpoint after compaction: %v", err)
			}
			damage(t, cp)
			_, err = Open(dir, Options{}, nil, nil)
			if err == nil {
				t.Fatal("open succeeded over a damaged checkpoint")
			}
			for _, want := range []string{"wal " + filepath.Base(cp) + " is missing or damaged", "move " + filepath.Join(dir, "wal") + " aside"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q lacks %q", err, want)
				}
			}
		})
	}
	f("deleted", func(t *testing.T, cp string) {
		if err := os.RemoveAll(cp); err != nil {
			t.Fatal(err)
		}
	})
	f("garbage", func(t *testing.T, cp string) {
		if err := os.WriteFile(filepath.Join(cp, "00000000"), bytes.Repeat([]byte{0xa5}, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// blockStore stores jobs a, b and c ten days apart, each compacted into
// a block of its own; a and b are out of the WAL. It returns the dir and each job's block dir.
func blockStore(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	starts := map[string]int64{}
	// Each job is appended and compacted in an open of its own: one
	// block per job, and by the third open the WAL segments of a and b
	// are checkpointed away (their samples are in blocks only).
	for i, id := range []string{"a", "b", "c"} {
		starts[id] = time.Now().Add(-time.Duration(30-10*i) * 24 * time.Hour).UnixMilli()
		s, err := Open(dir, Options{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(context.Background(), exampleBatch(id, starts[id])); err != nil {
			t.Fatal(err)
		}
		if err := s.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	blocks := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m struct{ MinTime, MaxTime int64 }
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for id, st := range starts {
			if st >= m.MinTime && st < m.MaxTime {
				blocks[id] = filepath.Join(dir, e.Name())
			}
		}
	}
	if len(blocks) != 3 || blocks["a"] == blocks["b"] || blocks["b"] == blocks["c"] || blocks["a"] == blocks["c"] {
		t.Fatalf("jobs in blocks %v, want one block for each of a, b, c", blocks)
	}
	return dir, blocks
}

// TestQuarantineDamagedBlock: a block with a bad meta.json, a flipped bit
// in its chunks, a damaged index or garbage tombstones is moved to
// DATA/quarantine/<ulid>-<reason>, logged with its time range and counted;
// the other jobs stay whole, and it stays listed after another restart.
func TestQuarantineDamagedBlock(t *testing.T) {
	orig, origBlocks := blockStore(t)
	// The checks find nothing wrong in a store written by the store.
	t.Run("healthy", func(t *testing.T) {
		s, logs, reg := openDamaged(t, copyStore(t, orig))
		if d := s.Damage(); len(d.Quarantined) != 0 || len(d.Logs) != 0 {
			t.Fatalf("damage %+v on a healthy store\nlogs:\n%s", d, logs)
		}
		if got := gauge(t, reg, "peakline_quarantined_blocks"); got != 0 {
			t.Fatalf("peakline_quarantined_blocks %v, want 0", got)
		}
		for _, id := range []string{"a", "b", "c"} {
			wantJob(t, s, id, true)
		}
	})
	f := func(reason string, damage func(t *testing.T, block string)) {
		t.Run(reason, func(t *testing.T) {
			dir := copyStore(t, orig)
			blockB := filepath.Join(dir, filepath.Base(origBlocks["b"]))
			damage(t, blockB)
			ulid := filepath.Base(blockB)
			s, logs, reg := openDamaged(t, dir)
			q := s.Damage().Quarantined
			want := filepath.Join(dir, QuarantineDir, ulid+"-"+reason)
			if len(q) != 1 || q[0].ULID != ulid || q[0].Reason != reason || q[0].Path != want {
				t.Fatalf("quarantined %+v, want block %s for %s at %s\nlogs:\n%s", q, ulid, reason, want, logs)
			}
			if _, err := os.Stat(want); err != nil {
				t.Fatal(err)
			}
			line := "block=" + ulid
			if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), "reason="+reason) || !strings.Contains(logs.String(), "min_time=") {
				t.Fatalf("the log does not name the block, its reason and time range:\n%s", logs)
			}
			if got := gauge(t, reg, "peakline_quarantined_blocks"); got != 1 {
				t.Fatalf("peakline_quarantined_blocks %v, want 1", got)
			}
			wantJob(t, s, "a", true)
			wantJob(t, s, "b", false)
			wantJob(t, s, "c", true)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, _, _ := openDamaged(t, dir)
			if q2 := s2.Damage().Quarantined; len(q2) != 1 || q2[0].ULID != ulid || q2[0].Reason != reason {
				t.Fatalf("after a restart quarantined %+v, want still %s", q2, ulid)
			}
		})
	}
	f(ReasonMeta, func(t *testing.T, block string) {
		if err := os.WriteFile(filepath.Join(block, "meta.json"), []byte(`{"ulid": "01`), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	f(ReasonChunks, func(t *testing.T, block string) {
		path := filepath.Join(block, "chunks", "000001")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		flipByte(t, path, st.Size()/2)
	})
	// Cut at a chunk boundary, every chunk left is whole and sound: only
	// the index's references show what is missing.
	f(ReasonChunks, func(t *testing.T, block string) {
		path := filepath.Join(block, "chunks", "000001")
		var buf []byte
		starts, err := checkChunkFile(path, &buf)
		if err != nil || len(starts) == 0 {
			t.Fatalf("chunk starts %v, %v", starts, err)
		}
		if err := os.Truncate(path, starts[len(starts)-1]); err != nil {
			t.Fatal(err)
		}
	})
	f(ReasonChunks, func(t *testing.T, block string) {
		if err := os.Remove(filepath.Join(block, "chunks", "000001")); err != nil {
			t.Fatal(err)
		}
	})
	f(ReasonIndex, func(t *testing.T, block string) {
		path := filepath.Join(block, "index")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, st.Size()/2); err != nil {
			t.Fatal(err)
		}
	})
	f(ReasonTombstones, func(t *testing.T, block string) {
		if err := os.WriteFile(filepath.Join(block, "tombstones"), []byte("garbage, not tombstones"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}
