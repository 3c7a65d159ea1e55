package tsdb

// Disk space is an admission rule of the embedded store. Below
// Options.MinFreeDisk free bytes on the data dir's file system every
// write is refused with ErrInsufficientStorage before it reaches the
// write-ahead log, reads go on, and writes resume by themselves once
// space is freed. A write that fails in the log anyway (the rule off, or
// another process filling the disk faster than the rule looks) leaves
// a torn record at the log's tail: from then on the store refuses every
// write with ErrLogUnsound until it is reopened, whose repair cuts the
// torn tail in place (repair.go). The store reopens itself once there is
// room again (relog.go), or serve is restarted. Nothing acknowledged
// after the failure can then sit behind the torn record, where the
// repair would drop it.
//
// Why a reopen and not a fresh segment: the head of a failed commit has
// already created its new series in memory, and Prometheus logs them
// again on rollback, which fails too while the disk is full. A later write to such a
// series logs samples that refer to a series record the log does not
// hold, and the replay drops them. Only a replay rebuilds memory from
// what the log really holds.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/tsdb/wlog"
)

// DefaultMinFreeDisk is the free space below which the embedded store
// refuses writes when Options.MinFreeDisk is zero: one write-ahead log
// segment (wlog.DefaultSegmentSize, 128 MiB, the segment size the store
// uses). Segments grow as they are written rather than being allocated
// whole, so this is not what the log needs to go on: it is room for
// what the store writes while it refuses (the log's last page and
// segment when it closes, a checkpoint of the head, the head's chunk
// files, a compaction's block) and for the writes admitted between two
// looks at the disk. A block's writer reserves a whole chunk file of
// blockChunkSegmentSize (32 MiB) with fallocate before it writes a
// chunk, and gives back what it did not use when the block is done: a
// compaction running while writes are refused needs that much of the
// threshold at once, and a backfill write (backfill.go) is admitted only
// with that much free above it. A repair needs none: it cuts the log in
// place.
const DefaultMinFreeDisk = int64(wlog.DefaultSegmentSize)

// blockChunkSegmentSize is the size of the chunk files of the blocks the
// store writes (ptsdb.Options.MaxBlockChunkSegmentSize), compactions and
// backfill blocks alike. Prometheus' chunk writer allocates each chunk
// file whole when it starts one (chunks.DefaultChunkSegmentSize, 512 MiB,
// by default), which on ext4, xfs or tmpfs reserves real space until the
// block is finished: with 512 MiB every block written needed four times
// DefaultMinFreeDisk free. Smaller files change only how many a large
// block has (one per 32 MiB of chunks); readers see no difference.
const blockChunkSegmentSize = 32 << 20

// diskCheckInterval is how long a reading of the free space is used:
// the file system is asked again at most this often, or sooner once the
// writes admitted since use up half the room above the threshold.
const diskCheckInterval = time.Second

var (
	// ErrInsufficientStorage is a write refused because the data dir's
	// file system has less free space than Options.MinFreeDisk; it is
	// taken again once space is freed (a server answers 507 with
	// Retry-After).
	ErrInsufficientStorage = errors.New("insufficient free disk space")
	// ErrLogUnsound is a write refused because an earlier write failed in
	// the write-ahead log: nothing more is acknowledged until the store
	// is reopened and its log repaired, which it does by itself once there
	// is room (relog.go; a server answers 503 with Retry-After).
	ErrLogUnsound = errors.New("write-ahead log write failed")
)

// Refusal reasons of the peakline_disk_refused_writes_total counter.
const (
	refusedLowSpace = "min_free_disk"
	refusedLog      = "wal_write_failed"
)

// WriteStatus says whether the embedded store takes writes now.
type WriteStatus struct {
	// FreeBytes is the free space of the data dir's file system at the
	// last look; MinFreeBytes the threshold (0 for no rule).
	FreeBytes    int64
	MinFreeBytes int64
	// Refusing is set while writes are refused; Reason says why and what
	// ends it.
	Refusing bool
	Reason   string
}

// diskGuard admits writes by the free space of the data dir and keeps
// the log's soundness. Its hot path is a few atomic loads.
type diskGuard struct {
	dir     string
	minFree int64 // <= 0: no rule
	now     func() time.Time

	mu        sync.Mutex   // one look at the file system at a time
	free      atomic.Int64 // bytes free at the last look, -1 before the first
	checkedAt atomic.Int64 // unix ns of the last look, by now
	written   atomic.Int64 // bytes estimated written since the last look
	statErr   atomic.Pointer[error]
	// refusedBytes is the estimate of the last write when it was refused
	// for space, 0 once one is admitted: the status says refusing while
	// such a write would still not fit.
	refusedBytes atomic.Int64

	logErr atomic.Pointer[error] // the first failed log write, for good

	refused *prometheus.CounterVec
}

func newDiskGuard(dir string, minFree int64, now func() time.Time, reg prometheus.Registerer) *diskGuard {
	g := &diskGuard{dir: dir, minFree: minFree, now: now}
	g.free.Store(-1)
	f := promauto.With(reg)
	g.refused = f.NewCounterVec(prometheus.CounterOpts{Name: "peakline_disk_refused_writes_total",
		Help: "Writes refused by the store: below --min-free-disk (min_free_disk) or after a failed write-ahead log write (wal_write_failed)."},
		[]string{"reason"})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "peakline_disk_free_bytes",
		Help: "Free bytes of the data dir's file system at the last look (at most a second old)."},
		func() float64 { return float64(g.reading()) })
	f.NewGauge(prometheus.GaugeOpts{Name: "peakline_disk_min_free_bytes",
		Help: "Free bytes below which writes are refused (--min-free-disk); 0 for no rule."}).Set(float64(max(minFree, 0)))
	return g
}

// reading returns the free bytes, looking again when the last look is
// older than diskCheckInterval.
func (g *diskGuard) reading() int64 {
	if g.now().UnixNano()-g.checkedAt.Load() >= int64(diskCheckInterval) || g.free.Load() < 0 {
		g.look()
	}
	return g.free.Load()
}

// look asks the file system for its free space (for unprivileged users,
// as statfs's f_bavail) unless another caller just did.
func (g *diskGuard) look() {
	g.mu.Lock()
	defer g.mu.Unlock()
	at := g.now().UnixNano()
	if at-g.checkedAt.Load() < int64(diskCheckInterval) && g.free.Load() >= 0 && g.written.Load() == 0 {
		return // looked while this caller waited
	}
	g.statfs(at)
}

// lookNow asks the file system for its free space, however recent the
// last look, and returns it.
func (g *diskGuard) lookNow() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.statfs(g.now().UnixNano())
	return g.free.Load()
}

// statfs reads the free space as of at (unix ns); g.mu is held.
func (g *diskGuard) statfs(at int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.dir, &st); err != nil {
		err = fmt.Errorf("statfs %s: %w", g.dir, err)
		g.statErr.Store(&err)
		g.free.Store(0)
	} else {
		g.statErr.Store(nil)
		g.free.Store(int64(st.Bavail) * int64(st.Bsize))
	}
	g.written.Store(0)
	g.checkedAt.Store(at)
}

// admit refuses a write of about bytes when the log is unsound or the
// free space, less what was admitted since the last look, is below the
// threshold. reserve is space the write holds only while it runs (the
// chunk file a backfill block's writer allocates whole, see
// blockChunkSegmentSize): it must fit above the threshold too, but is
// not counted as written.
func (g *diskGuard) admit(bytes, reserve int64) error {
	if p := g.logErr.Load(); p != nil {
		g.refused.WithLabelValues(refusedLog).Inc()
		return fmt.Errorf("%w (%v): writes are refused until the store reopens and repairs the log, which it does by itself once %s are free", ErrLogUnsound, *p, fmtBytes(g.reopenFree()))
	}
	if g.minFree <= 0 {
		return nil
	}
	free := g.reading()
	if free-g.written.Load()-bytes-reserve < g.minFree && g.written.Load() > 0 {
		// The writes since the last look may have used less than
		// estimated; a refused write looks only once per reading.
		g.look()
		free = g.free.Load()
	}
	if free-g.written.Load()-bytes-reserve < g.minFree {
		g.refused.WithLabelValues(refusedLowSpace).Inc()
		if reserve == 0 {
			// Writes of the head may fit where a block does not: the
			// status says refusing only once they do not.
			g.refusedBytes.Store(bytes)
		}
		return g.lowSpace(free, bytes, reserve)
	}
	g.refusedBytes.Store(0)
	if g.written.Add(bytes) > (free-g.minFree)/2 {
		g.checkedAt.Store(0) // look again at the next write
	}
	return nil
}

// lowSpace is the refusal of a write of about bytes, holding reserve
// more while it runs, with free bytes free.
func (g *diskGuard) lowSpace(free, bytes, reserve int64) error {
	if p := g.statErr.Load(); p != nil {
		return fmt.Errorf("%w: %v", ErrInsufficientStorage, *p)
	}
	size := fmtBytes(bytes)
	if reserve > 0 {
		size += fmt.Sprintf(" (old samples: a block, whose chunk file takes %s while it is written)", fmtBytes(reserve))
	}
	return fmt.Errorf("%w: %s free on the file system of %s, and a write of about %s would leave less than --min-free-disk %s; writes resume once space is freed",
		ErrInsufficientStorage, fmtBytes(free), g.dir, size, fmtBytes(g.minFree))
}

// failed records a failed write to the log; the first one is kept.
func (g *diskGuard) failed(err error) {
	g.logErr.CompareAndSwap(nil, &err)
}

// reopenFree is the free space a reopen after a failed log write needs
// (relog.go): room for the replay, and above the threshold.
func (g *diskGuard) reopenFree() int64 { return max(g.minFree, minStartFree) }

// status is what the guard says of writes now.
func (g *diskGuard) status() WriteStatus {
	st := WriteStatus{FreeBytes: g.reading(), MinFreeBytes: max(g.minFree, 0)}
	switch p := g.logErr.Load(); {
	case p != nil:
		st.Refusing = true
		st.Reason = fmt.Sprintf("a write-ahead log write failed (%v): writes are refused until the store reopens and repairs the log, which it does by itself at a write once %s are free", *p, fmtBytes(g.reopenFree()))
	case g.minFree > 0 && st.FreeBytes-g.refusedBytes.Load() < g.minFree:
		st.Refusing = true
		st.Reason = g.lowSpace(st.FreeBytes, g.refusedBytes.Load(), 0).Error()
	}
	return st
}

// WriteStatus says whether the store takes writes now; a remote store
// always does (the engine decides).
func (s *Store) WriteStatus() WriteStatus {
	if s.disk == nil {
		return WriteStatus{}
	}
	return s.disk.status()
}

// admitDisk is the disk-space admission of a write of rows. A write
// with samples below the head's cut (backfill.go) writes a block, whose
// chunk file is allocated whole while it is written: that must fit above
// the threshold too, so that the write is refused here rather than by
// the file system.
func (s *Store) admitDisk(rows []row) error {
	if s.disk == nil {
		return nil
	}
	s.maybeReopen() // relog.go
	if s.disk.logErr.Load() != nil {
		return s.disk.admit(walBytes(rows), 0) // refused
	}
	db, release, err := s.acquireDB()
	if err != nil { // a reopen is under way
		return fmt.Errorf("%w: %w", ErrLogUnsound, err)
	}
	cutMs := s.headCut(db)
	release()
	var reserve int64
	if hasBelow(rows, cutMs) {
		reserve = blockChunkSegmentSize
	}
	return s.disk.admit(walBytes(rows), reserve)
}

// hasBelow reports whether a sample of rows is older than cutMs.
func hasBelow(rows []row, cutMs int64) bool {
	for i := range rows {
		if len(rows[i].ts) > 0 && rows[i].ts[0] < cutMs { // ts increases
			return true
		}
		for _, h := range rows[i].hs {
			if h.T < cutMs {
				return true
			}
		}
	}
	return false
}

// blockWriteErr is the error of a backfill block write: out of space
// (ENOSPC, the admission rule off or the disk filled by another process)
// it is ErrInsufficientStorage, since the block is written into a
// directory of its own and renamed into place only when whole, and the
// failed one is removed: nothing torn is left and nothing else refuses.
func blockWriteErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w (the block was not stored; writes of old samples resume once space is freed)", ErrInsufficientStorage, err)
	}
	return err
}

// rollback rolls app back; Prometheus logs the series the appender
// created while it does, and a failure of that log write makes the log
// unsound as a failed commit does.
func (s *Store) rollback(app rowAppender) {
	err := app.Rollback()
	if err == nil || s.disk == nil {
		return
	}
	s.disk.failed(err)
	s.logger.Error("write-ahead log write failed in a rollback: writes are refused until the store reopens", "err", err)
}

// walBytes estimates what rows add to the write-ahead log: a series
// record for each (when new) and about 16 bytes a sample. It errs high.
func walBytes(rows []row) int64 {
	n := int64(0)
	for i := range rows {
		n += 128 + 16*int64(len(rows[i].ts)+len(rows[i].hs))
	}
	return n
}

// commit commits app; a failed commit of the embedded TSDB, or one that
// lost its out-of-order samples' log write, makes the log unsound.
func (s *Store) commit(app rowAppender) error {
	err := app.Commit()
	if s.disk == nil {
		return err
	}
	if err != nil {
		s.disk.failed(err)
		s.logger.Error("write-ahead log write failed: writes are refused until the store reopens", "err", err)
		return fmt.Errorf("%w: %w", ErrLogUnsound, err)
	}
	if p := s.disk.logErr.Load(); p != nil {
		// The commit itself succeeded, but a log write failed meanwhile
		// (the out-of-order log's failure is only logged by the TSDB,
		// see closelog.go): the samples are in memory, not surely on disk.
		return fmt.Errorf("%w (%v): this write is not acknowledged", ErrLogUnsound, *p)
	}
	return nil
}

// minStartFree is the least free space the store opens with: the TSDB
// writes head chunks while it replays the write-ahead log (new chunk
// files are allocated 128 KiB ahead) and panics when that write fails.
// After a clean close the replay writes next to nothing (the close wrote
// every full chunk); after a crash it writes the chunks of the last
// minute or so of samples, which the threshold of the running store
// (DefaultMinFreeDisk) leaves room for.
const minStartFree = 4 << 20

// checkStartSpace refuses to open dir with less than minStartFree free
// on its file system, saying how much is needed, rather than let the
// replay panic. It runs after the repair, which needs no space. A dir
// without a write-ahead log needs nothing replayed.
func checkStartSpace(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // the TSDB's own open says what is wrong with dir
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < minStartFree {
		return fmt.Errorf("%w: %s free on the file system of %s, starting needs at least %s (replaying the write-ahead log writes the head's chunks): free space there, then start again",
			ErrInsufficientStorage, fmtBytes(free), dir, fmtBytes(minStartFree))
	}
	return nil
}

func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTP"[exp])
}
