package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/tsdb/wlog"

	"github.com/peakline/peakline/tsdb/disktest"
)

// tmpfsStore is where openOnTmpfs opened a store.
type tmpfsStore struct {
	mnt, dir string
	clock    *fakeClock
	opts     Options
}

// openOnTmpfs opens a store in the folder data of a new 64 MiB tmpfs,
// with MinFreeDisk minFree, a clock at testNow that the test moves, and
// its metrics in reg (nil for none). The caller closes the store.
func openOnTmpfs(t *testing.T, minFree int64, reg prometheus.Registerer) (*Store, tmpfsStore) {
	t.Helper()
	mnt := disktest.MountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	clock := &fakeClock{now: testNow}
	opts := Options{Now: clock.Now, MinFreeDisk: minFree}
	s, err := Open(dir, opts, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, tmpfsStore{mnt: mnt, dir: dir, clock: clock, opts: opts}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// diskBatch is job i of the disk tests: one task and one CPU series of
// n samples of random values, so that its write-ahead log record spans
// several 32 KiB pages.
func diskBatch(i, n int, startMs int64) *Batch {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	job := fmt.Sprintf("disk-%04d", i)
	b := &Batch{JobID: job, Tasks: []Task{{Counter: 3, UUID: "u-" + job, Name: "fill the disk", StartMs: startMs}}}
	sd := SeriesData{Resource: "cpu", Counter: 3, UUID: "u-" + job, Task: "fill the disk"}
	for k := range n {
		sd.Ts = append(sd.Ts, startMs+int64(k)*10)
		sd.Vs = append(sd.Vs, rng.Float64()*400)
	}
	b.Series = append(b.Series, sd)
	return b
}

// checkAcked reopens the store in dir and requires every acknowledged
// sample and task record of acked (job → count) back.
func checkAcked(t *testing.T, dir string, opts Options, acked map[string]int) *Store {
	t.Helper()
	s, err := Open(dir, opts, nil, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	lost := 0
	for job, want := range acked {
		if got := rawStoreSamples(t, s, job); got != want {
			t.Errorf("job %s: %d samples and task records after restart, %d acknowledged", job, got, want)
			lost += want - got
		}
	}
	if lost > 0 {
		t.Fatalf("lost %d acknowledged samples of %d jobs", lost, len(acked))
	}
	return s
}

// diskWriter appends diskBatch jobs one after another and remembers
// what was acknowledged.
type diskWriter struct {
	t       *testing.T
	next    int
	startMs func(i int) int64
	acked   map[string]int
}

// write appends the next job; a refused or failed write is returned.
func (w *diskWriter) write(s *Store) error {
	w.t.Helper()
	i := w.next
	w.next++
	res, err := s.Append(context.Background(), diskBatch(i, 4000, w.startMs(i)))
	if err != nil {
		return err
	}
	if res.Samples != 4000 || res.Tasks != 1 {
		w.t.Fatalf("write %d stored %+v, want 4000 samples and 1 task", i, res)
	}
	w.acked[fmt.Sprintf("disk-%04d", i)] = res.Samples + res.Tasks
	return nil
}

// untilRefused writes until a write is refused and returns its error.
func (w *diskWriter) untilRefused(s *Store) error {
	w.t.Helper()
	for range 2000 {
		if err := w.write(s); err != nil {
			return err
		}
	}
	w.t.Fatalf("%d writes of 4000 samples were all taken", w.next)
	return nil
}

// With the admission rule off, a write fails in the write-ahead log
// itself (no space left), which may leave a torn record. Every later
// write is refused while the disk is full; once space is freed the next
// write reopens the store, which repairs the log, and is taken. A copy
// made before that (a crash) is repaired by its open, on a full disk,
// and every write acknowledged before the failure and after the store
// reopened is there after a restart. The free space left varies where
// in a record the disk fills.
func TestWALWriteFailureLosesNoAck(t *testing.T) {
	// Within the head's window of the clock (testNow), so that every
	// sample goes to the write-ahead log, not to a backfill block
	// (diskspace_backfill_test.go has those).
	inOrder := func(i int) int64 { return testNow.Add(-2*time.Hour + time.Duration(i)*10*time.Second).UnixMilli() }
	// After a first recent job, every job is older than the one before
	// and more than the head's in-order hour behind it, yet above the
	// backfill cut (testNow-3h): their samples go to the out-of-order log.
	outOfOrder := func(i int) int64 {
		if i == 0 {
			return testNow.Add(-time.Minute).UnixMilli()
		}
		return testNow.Add(-90*time.Minute - time.Duration(i)*10*time.Second).UnixMilli()
	}
	ks := []int64{0}
	if !testing.Short() {
		ks = []int64{0, 6}
	}
	repaired := 0
	for _, order := range []struct {
		name    string
		startMs func(int) int64
	}{{"in-order", inOrder}, {"out-of-order", outOfOrder}} {
		for _, k := range ks {
			leave := 4<<20 + k*7777
			t.Run(fmt.Sprintf("%s/leave=%d", order.name, leave), func(t *testing.T) {
				if walFailure(t, leave, order.startMs) {
					repaired++
				}
			})
		}
	}
	if repaired == 0 {
		t.Fatal("no failed write tore the log: the repair after one went untested")
	}
	t.Logf("%d of %d runs left a torn log that the start repaired", repaired, 2*len(ks))
}

// walFailure runs the sequence with leave bytes left free and reports
// whether the failed write left a torn record for the repair.
func walFailure(t *testing.T, leave int64, startMs func(int) int64) (repaired bool) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	clock := &fakeClock{now: testNow}
	opts := Options{Now: clock.Now, MinFreeDisk: -1}
	s, err := Open(dir, opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	filler := disktest.Fill(t, mnt, leave)
	w := &diskWriter{t: t, startMs: startMs, acked: map[string]int{}}
	failed := w.untilRefused(s)
	if !errors.Is(failed, ErrLogUnsound) || !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("write %d: %v, want %v for no space left", w.next-1, failed, ErrLogUnsound)
	}
	before := len(w.acked)
	ackedBefore := maps.Clone(w.acked)
	// While the disk is full, writes are refused and the store does not
	// reopen: the attempts fail for space.
	for range 3 {
		clock.Advance(time.Minute)
		if err := w.write(s); !errors.Is(err, ErrLogUnsound) {
			t.Fatalf("write %d after the failure, disk full: %v, want %v", w.next-1, err, ErrLogUnsound)
		}
	}
	if st := s.WriteStatus(); !st.Refusing || !strings.Contains(st.Reason, "reopens and repairs the log") {
		t.Fatalf("WriteStatus() = %+v, want refusing until the store reopens", st)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// A copy of the open store is what a kill -9 leaves: the torn record
	// at the log's tail as the failed write left it.
	crashed := filepath.Join(mnt, "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	_, tornErr := scanLog(wlog.SegmentRange{Dir: filepath.Join(crashed, "wal"), First: -1, Last: -1})
	repaired = tornErr != nil
	// With space freed the next write reopens the store and is taken.
	clock.Advance(time.Minute)
	for range 20 {
		if err := w.write(s); err != nil {
			t.Fatalf("write %d after the failure, space freed: %v, want it taken", w.next-1, err)
		}
	}
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() = %+v after the store reopened, want not refusing", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The repair needs no free space; the replay after it needs a little
	// room for head chunks, and the refusal says how much.
	filler = disktest.Fill(t, mnt, 0)
	for _, d := range []string{crashed, dir} {
		if _, err := Open(d, opts, nil, nil); !errors.Is(err, ErrInsufficientStorage) || !strings.Contains(err.Error(), "starting needs at least 4.0MiB") {
			t.Fatalf("open on a full disk: %v, want %v saying how much is needed", err, ErrInsufficientStorage)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// With a little more than that, the store opens and repairs its log.
	filler = disktest.Fill(t, mnt, minStartFree+1<<20)
	// (The refused opens above already cut the torn tail.)
	c := checkAcked(t, crashed, opts, ackedBefore)
	if _, err := scanLog(wlog.SegmentRange{Dir: filepath.Join(crashed, "wal"), First: -1, Last: -1}); err != nil {
		t.Fatalf("the log of the crashed store after its repair: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{crashed, filler} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	filler = disktest.Fill(t, mnt, minStartFree+1<<20)
	s = checkAcked(t, dir, opts, w.acked)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := w.write(s); err != nil {
			t.Fatalf("write %d after the reopen: %v", w.next-1, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = checkAcked(t, dir, opts, w.acked)
	if d := s.Damage(); len(d.Logs) != 0 {
		t.Fatalf("the repaired log is corrupt again: %+v", d.Logs)
	}
	t.Logf("%d writes acknowledged before the failure, %d after the store reopened itself and the restart, all there (torn log repaired: %v)", before, len(w.acked)-before, repaired)
	return repaired
}

// Below MinFreeDisk every write is refused before it reaches the log,
// with the free space and the threshold in the error and the status;
// reads go on; once space is freed, writes are taken again at the next
// look at the disk (at most a second later), and nothing acknowledged is
// lost across a reopen.
func TestLowDiskRefusedBeforeWAL(t *testing.T) {
	mnt := disktest.MountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	clock := &fakeClock{now: testNow}
	const minFree = 8 << 20
	opts := Options{Now: clock.Now, MinFreeDisk: minFree}
	reg := prometheus.NewRegistry()
	s, err := Open(dir, opts, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.WriteStatus(); st.Refusing || st.MinFreeBytes != minFree || st.FreeBytes <= minFree {
		t.Fatalf("WriteStatus() on an empty disk = %+v", st)
	}
	filler := disktest.Fill(t, mnt, 12<<20)
	clock.Advance(diskCheckInterval) // the filler is seen at the next look
	// Within the head's window: the writes go to the write-ahead log.
	startMs := func(i int) int64 { return testNow.Add(-2*time.Hour + time.Duration(i)*10*time.Second).UnixMilli() }
	w := &diskWriter{t: t, startMs: startMs, acked: map[string]int{}}
	refused := w.untilRefused(s)
	if !errors.Is(refused, ErrInsufficientStorage) || !strings.Contains(refused.Error(), "would leave less than --min-free-disk 8.0MiB") {
		t.Fatalf("write %d: %v, want %v naming --min-free-disk", w.next-1, refused, ErrInsufficientStorage)
	}
	if len(w.acked) == 0 {
		t.Fatal("no write was taken before the refusal")
	}
	st := s.WriteStatus()
	if !st.Refusing || st.FreeBytes >= minFree+1<<20 || !strings.Contains(st.Reason, "--min-free-disk") {
		t.Fatalf("WriteStatus() while refusing = %+v", st)
	}
	for job, want := range w.acked { // reads go on
		if got := rawStoreSamples(t, s, job); got != want {
			t.Fatalf("job %s reads %d samples while writes are refused, want %d", job, got, want)
		}
	}
	if err := w.write(s); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("second write below the threshold: %v", err)
	}
	if got := counter(t, reg, "peakline_disk_refused_writes_total", "min_free_disk"); got != 2 {
		t.Fatalf("peakline_disk_refused_writes_total{reason=min_free_disk} = %v, want 2", got)
	}
	if got := gauge(t, reg, "peakline_disk_free_bytes"); got != float64(st.FreeBytes) {
		t.Fatalf("peakline_disk_free_bytes = %v, want %d", got, st.FreeBytes)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The last look is still fresh: the disk is not asked again yet.
	if err := w.write(s); !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("write within a second of the last look: %v, want it still refused", err)
	}
	clock.Advance(diskCheckInterval)
	for range 20 {
		if err := w.write(s); err != nil {
			t.Fatalf("write %d after space was freed: %v", w.next-1, err)
		}
	}
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() after space was freed = %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = checkAcked(t, dir, opts, w.acked)
	if d := s.Damage(); len(d.Logs) != 0 {
		t.Fatalf("the log is corrupt after refusals: %+v", d.Logs)
	}
}

// counter is the value of a counter with one label value.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A failed write of the out-of-order log is only logged by the TSDB; the
// record makes the log unsound as a failed commit does, until the next
// write reopens the store.
func TestOutOfOrderLogFailureRefusesWrites(t *testing.T) {
	clock := &fakeClock{now: testNow}
	s := openAt(t, t.TempDir(), Options{Now: clock.Now})
	w := &diskWriter{t: t, startMs: func(i int) int64 { return testNow.Add(-time.Hour).UnixMilli() + int64(i)*100_000 }, acked: map[string]int{}}
	if err := w.write(s); err != nil {
		t.Fatal(err)
	}
	h := closingHandler{Handler: slog.DiscardHandler, closing: new(atomic.Bool), disk: s.disk}
	r := slog.NewRecord(time.Now(), slog.LevelError, wblFailedMsg, 0)
	r.AddAttrs(slog.String("err", "write wbl/00000000: no space left on device"))
	if err := h.WithAttrs([]slog.Attr{slog.String("component", "tsdb")}).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	err := s.disk.admit(walBytes([]row{{}}), 0)
	if !errors.Is(err, ErrLogUnsound) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("admission after a failed out-of-order log write: %v, want %v", err, ErrLogUnsound)
	}
	if st := s.WriteStatus(); !st.Refusing || !strings.Contains(st.Reason, "out-of-order log") {
		t.Fatalf("WriteStatus() = %+v", st)
	}
	// The disk has room: the next write reopens the store (relog.go)
	// and is taken.
	if err := w.write(s); err != nil {
		t.Fatalf("write after the failure, with room to reopen: %v", err)
	}
	if st := s.WriteStatus(); st.Refusing {
		t.Fatalf("WriteStatus() = %+v after the reopen", st)
	}
	for job, want := range w.acked {
		if got := rawStoreSamples(t, s, job); got != want {
			t.Fatalf("job %s: %d samples and task records after the reopen, %d acknowledged", job, got, want)
		}
	}
}
