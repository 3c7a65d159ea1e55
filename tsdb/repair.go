package tsdb

// Damage on disk, handled before the Prometheus TSDB opens the directory:
//
//   - Every block is checked (meta.json parses, the index and every series
//     entry in it decode with their CRCs, every chunk's CRC32C verifies,
//     the tombstones file parses). A damaged block is moved aside to
//     DATA/quarantine/<ulid>-<reason>, logged with its time range, and the
//     store opens without it: one bad block never keeps serve down, and
//     every other job stays readable.
//   - The write-ahead logs (wal, wbl) are read through once. A corrupt
//     log is cut right after its last good record and every later
//     segment deleted, as Prometheus's repair would, and the log says
//     how much that drops (segments, bytes, records). The cut is made
//     in place (cutLog), so it needs no free space: Prometheus's own
//     repair copies the good part of the corrupt segment, up to a whole
//     128 MiB segment, and cannot start on a full disk.
//   - A log whose checkpoint is missing or unreadable cannot be opened;
//     the error then says what is wrong and what to do.
//
// Reading every chunk at start costs one sequential read of the blocks;
// it is logged with its duration.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/model/labels"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"
	"github.com/prometheus/prometheus/tsdb/record"
	"github.com/prometheus/prometheus/tsdb/tombstones"
	"github.com/prometheus/prometheus/tsdb/wlog"
)

// QuarantineDir is the folder under the data dir that damaged blocks are
// moved to.
const QuarantineDir = "quarantine"

// Reasons a block is quarantined (the suffix of its quarantine folder).
const (
	ReasonMeta       = "bad-meta"
	ReasonIndex      = "bad-index"
	ReasonChunks     = "bad-chunks"
	ReasonTombstones = "bad-tombstones"
)

// QuarantinedBlock is a block found damaged and moved aside.
type QuarantinedBlock struct {
	ULID   string `json:"ulid"`
	MinMs  int64  `json:"min_time"` // 0 when meta.json was unreadable
	MaxMs  int64  `json:"max_time"`
	Reason string `json:"reason"`
	Path   string `json:"path"` // where it is now
}

// LogDamage is what a corrupt write-ahead log loses when Prometheus
// repairs it: the rest of the corrupt segment and every later segment.
type LogDamage struct {
	Dir             string // "wal" or "wbl"
	Segment         int    // the first corrupt segment
	Offset          int64  // of the first bad record in it
	DroppedSegments int    // later segments deleted
	DroppedBytes    int64  // of the corrupt segment's tail and the later segments
	// DroppedRecords counts the records readable in the later segments;
	// records after the bad one in the corrupt segment itself cannot be
	// told apart from garbage, so the loss is at least this.
	DroppedRecords int
	Err            string

	// Where the repair cuts: right after the last good record, in its
	// segment (the segment before Segment when the bad record opens one).
	cutSegment int
	cutOffset  int64
	lastSeg    int // the log's last segment
}

// Damage is what Open found wrong on disk.
type Damage struct {
	// Quarantined lists every block in DATA/quarantine, moved there by
	// this start or an earlier one: the store stays degraded until an
	// operator restores or removes them.
	Quarantined []QuarantinedBlock
	// Logs lists the write-ahead logs repaired at this start.
	Logs []LogDamage
}

// Damage returns what Open found wrong on disk.
func (s *Store) Damage() Damage { return s.damage }

// checkDisk runs before the TSDB opens dir: it quarantines damaged blocks
// and measures what repairing the logs will drop. An error is returned
// only for what the TSDB could not open past.
func checkDisk(dir string, logger *slog.Logger, reg prometheus.Registerer) (Damage, error) {
	var d Damage
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	start := time.Now()
	blocks, err := checkBlocks(dir, logger)
	if err != nil {
		return d, err
	}
	if blocks > 0 {
		logger.Info("blocks checked", "blocks", blocks, "duration", time.Since(start))
	}
	for _, sub := range []string{"wal", "wbl"} {
		ld, err := checkLog(dir, sub)
		if err != nil {
			return d, err
		}
		if ld != nil {
			logger.Error("write-ahead log is corrupt: repairing it drops what follows the first bad record",
				"dir", filepath.Join(dir, sub), "segment", ld.Segment, "offset", ld.Offset,
				"dropped_segments", ld.DroppedSegments, "dropped_bytes", ld.DroppedBytes,
				"dropped_records_at_least", ld.DroppedRecords, "err", ld.Err)
			if err := cutLog(filepath.Join(dir, sub), ld); err != nil {
				return d, err
			}
			d.Logs = append(d.Logs, *ld)
		}
	}
	if d.Quarantined, err = listQuarantine(dir); err != nil {
		return d, err
	}
	f := promauto.With(reg)
	f.NewGauge(prometheus.GaugeOpts{Name: "peakline_quarantined_blocks",
		Help: "Damaged blocks moved to DATA/quarantine (by this start or earlier), whose samples are not served."}).Set(float64(len(d.Quarantined)))
	var segs, bytes, recs float64
	for _, ld := range d.Logs {
		segs, bytes, recs = segs+float64(ld.DroppedSegments), bytes+float64(ld.DroppedBytes), recs+float64(ld.DroppedRecords)
	}
	f.NewGauge(prometheus.GaugeOpts{Name: "peakline_wal_repair_dropped_segments",
		Help: "Write-ahead log segments deleted by the repair of a corrupt log at the last start."}).Set(segs)
	f.NewGauge(prometheus.GaugeOpts{Name: "peakline_wal_repair_dropped_bytes",
		Help: "Write-ahead log bytes dropped by the repair of a corrupt log at the last start."}).Set(bytes)
	f.NewGauge(prometheus.GaugeOpts{Name: "peakline_wal_repair_dropped_records",
		Help: "Write-ahead log records (at least) dropped by the repair of a corrupt log at the last start."}).Set(recs)
	return d, nil
}

// isULID reports whether name looks like a block's ULID.
func isULID(name string) bool {
	if len(name) != 26 {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c) {
			return false
		}
	}
	return true
}

// checkBlocks checks every block dir and quarantines the damaged ones.
// It returns the number of blocks checked.
func checkBlocks(dir string, logger *slog.Logger) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read data dir: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !isULID(e.Name()) {
			continue
		}
		n++
		bdir := filepath.Join(dir, e.Name())
		meta, reason, cerr := checkBlock(bdir)
		if cerr == nil {
			continue
		}
		q := QuarantinedBlock{ULID: e.Name(), Reason: reason}
		if meta != nil {
			q.MinMs, q.MaxMs = meta.MinTime, meta.MaxTime
		}
		if err := os.MkdirAll(filepath.Join(dir, QuarantineDir), 0o755); err != nil {
			return n, fmt.Errorf("create quarantine dir: %w", err)
		}
		q.Path = filepath.Join(dir, QuarantineDir, e.Name()+"-"+reason)
		if _, err := os.Stat(q.Path); err == nil { // quarantined before, and restored
			q.Path += "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
		if err := os.Rename(bdir, q.Path); err != nil {
			return n, fmt.Errorf("quarantine block %s: %w", e.Name(), err)
		}
		logger.Error("block is damaged: moved aside, its samples are not served",
			"block", q.ULID, "min_time", msTime(q.MinMs, meta != nil), "max_time", msTime(q.MaxMs, meta != nil),
			"reason", reason, "err", cerr, "moved_to", q.Path)
	}
	return n, nil
}

func msTime(ms int64, known bool) string {
	if !known {
		return "unknown"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// checkBlock checks one block dir; on damage it returns the reason and
// the error (and the meta, when it was readable).
func checkBlock(bdir string) (*ptsdb.BlockMeta, string, error) {
	b, err := os.ReadFile(filepath.Join(bdir, "meta.json"))
	if err != nil {
		return nil, ReasonMeta, fmt.Errorf("read meta.json: %w", err)
	}
	var meta ptsdb.BlockMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, ReasonMeta, fmt.Errorf("parse meta.json: %w", err)
	}
	if meta.Version != 1 {
		return nil, ReasonMeta, fmt.Errorf("meta.json: version %d, want 1", meta.Version)
	}
	if meta.MinTime > meta.MaxTime {
		return nil, ReasonMeta, fmt.Errorf("meta.json: minTime %d after maxTime %d", meta.MinTime, meta.MaxTime)
	}
	starts, err := checkChunks(filepath.Join(bdir, "chunks"))
	if err != nil {
		return &meta, ReasonChunks, err
	}
	if err := checkIndex(filepath.Join(bdir, "index"), starts); err != nil {
		if errors.Is(err, errMissingChunk) {
			return &meta, ReasonChunks, err
		}
		return &meta, ReasonIndex, err
	}
	if _, _, err := tombstones.ReadTombstones(bdir); err != nil {
		return &meta, ReasonTombstones, fmt.Errorf("read tombstones: %w", err)
	}
	return &meta, "", nil
}

// errMissingChunk marks an index entry whose chunk is not in the chunk
// files (a truncated or removed file).
var errMissingChunk = errors.New("chunk missing from the chunk files")

// checkIndex opens an index, decodes every series entry in it and checks
// that each chunk it refers to starts where checkChunks found a chunk
// (starts: per chunk file, in name order, the offsets of its chunks).
func checkIndex(path string, starts [][]int64) error {
	ir, err := index.NewFileReader(path, index.DecodePostingsRaw)
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	defer ir.Close()
	name, value := index.AllPostingsKey()
	p, err := ir.Postings(context.Background(), name, value)
	if err != nil {
		return fmt.Errorf("read index postings: %w", err)
	}
	var (
		builder labels.ScratchBuilder
		chks    []chunks.Meta
	)
	for p.Next() {
		if err := ir.Series(p.At(), &builder, &chks); err != nil {
			return fmt.Errorf("read index series %d: %w", p.At(), err)
		}
		for _, c := range chks {
			seg, off := chunks.BlockChunkRef(c.Ref).Unpack()
			if seg >= len(starts) {
				return fmt.Errorf("series %s: %w: chunk file %d of %d", builder.Labels(), errMissingChunk, seg+1, len(starts))
			}
			if _, ok := slices.BinarySearch(starts[seg], int64(off)); !ok {
				return fmt.Errorf("series %s: %w: no chunk at offset %d of chunk file %d", builder.Labels(), errMissingChunk, off, seg+1)
			}
		}
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("read index postings: %w", err)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunksFormatV1 is the only chunk file version (unexported upstream).
const chunksFormatV1 = 1

// checkChunks verifies every chunk file of a block: the segment header
// and each chunk's CRC32C over its encoding and data (see the Prometheus
// tsdb/docs/format/chunks.md). It returns, per file in name order (the
// files' index in a chunk reference), the offsets where its chunks start.
func checkChunks(dir string) ([][]int64, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("read chunks dir: %w", err)
	}
	buf := make([]byte, 0, 1024)
	var starts [][]int64
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		offs, err := checkChunkFile(filepath.Join(dir, e.Name()), &buf)
		if err != nil {
			return nil, fmt.Errorf("chunk file %s: %w", e.Name(), err)
		}
		starts = append(starts, offs)
	}
	return starts, nil
}

func checkChunkFile(path string, buf *[]byte) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [chunks.SegmentHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if m := binary.BigEndian.Uint32(hdr[:4]); m != chunks.MagicChunks {
		return nil, fmt.Errorf("bad magic %#x", m)
	}
	if v := hdr[4]; v != chunksFormatV1 {
		return nil, fmt.Errorf("bad format version %d", v)
	}
	off := int64(chunks.SegmentHeaderSize)
	var starts []int64
	for {
		n, err := binary.ReadUvarint(r)
		if errors.Is(err, io.EOF) {
			return starts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("chunk at %d: read length: %w", off, err)
		}
		if n == 0 || n > 1<<30 {
			return nil, fmt.Errorf("chunk at %d: implausible length %d", off, n)
		}
		size := int(n) + chunks.ChunkEncodingSize + crc32.Size
		if cap(*buf) < size {
			*buf = make([]byte, size)
		}
		b := (*buf)[:size]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("chunk at %d: truncated: %w", off, err)
		}
		body := b[:size-crc32.Size]
		if want, got := binary.BigEndian.Uint32(b[size-crc32.Size:]), crc32.Checksum(body, castagnoli); want != got {
			return nil, fmt.Errorf("chunk at %d: checksum %08x, stored %08x", off, got, want)
		}
		starts = append(starts, off)
		off += int64(uvarintLen(n) + size)
	}
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// checkLog reads a write-ahead log (DATA/wal or DATA/wbl) through and
// returns what repairing its first corruption drops, or nil when it is
// clean. It fails when the log's checkpoint is missing or unreadable, as
// the TSDB cannot replay the log then.
func checkLog(dir, sub string) (*LogDamage, error) {
	ldir := filepath.Join(dir, sub)
	if _, err := os.Stat(ldir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	first, last, err := wlog.Segments(ldir)
	if err != nil {
		return nil, fmt.Errorf("%s: list segments: %w (move %s aside to start without the samples not yet in blocks, the last ~2h)", sub, err, ldir)
	}
	if first < 0 {
		return nil, nil
	}
	// Only the WAL has checkpoints: the WBL is truncated by deleting its
	// oldest segments.
	if sub == "wal" {
		if err := checkCheckpoint(sub, ldir, first); err != nil {
			return nil, err
		}
	}
	sc, err := scanLog(wlog.SegmentRange{Dir: ldir, First: -1, Last: -1})
	if err == nil {
		return nil, nil
	}
	var cerr *wlog.CorruptionErr
	if !errors.As(err, &cerr) || cerr.Segment < 0 {
		return nil, fmt.Errorf("%s: read: %w", sub, err)
	}
	// The repair keeps the records before the bad one: the bad record
	// starts where the last good one of its segment ended.
	ld := &LogDamage{Dir: sub, Segment: cerr.Segment, DroppedSegments: last - cerr.Segment, Err: cerr.Err.Error(),
		cutSegment: cerr.Segment, lastSeg: last}
	if sc.lastSegment == cerr.Segment {
		ld.Offset = sc.lastOffset
	}
	if sc.lastSegment >= 0 {
		// A torn record at the end of a segment shows as a bad record at
		// the start of the next one: the cut goes after the last good
		// record, which drops the torn part too.
		ld.cutSegment, ld.cutOffset = sc.lastSegment, sc.lastOffset
	}
	if st, err := os.Stat(wlog.SegmentName(ldir, cerr.Segment)); err == nil && st.Size() > ld.Offset {
		ld.DroppedBytes += st.Size() - ld.Offset
	}
	for k := cerr.Segment + 1; k <= last; k++ {
		if st, err := os.Stat(wlog.SegmentName(ldir, k)); err == nil {
			ld.DroppedBytes += st.Size()
		}
		later, _ := scanLog(wlog.SegmentRange{Dir: ldir, First: k, Last: k})
		ld.DroppedRecords += later.records
	}
	return ld, nil
}

// cutLog repairs a corrupt log in place: it deletes every segment after
// the cut's, newest first, and truncates the cut's segment right after
// its last good record. Both only free space. The TSDB then opens a log
// that reads cleanly and writes on in a new segment.
func cutLog(ldir string, ld *LogDamage) error {
	for k := ld.lastSeg; k > ld.cutSegment; k-- {
		if err := os.Remove(wlog.SegmentName(ldir, k)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("repair %s: delete segment %d: %w", ldir, k, err)
		}
	}
	seg := wlog.SegmentName(ldir, ld.cutSegment)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("repair %s: open segment %d: %w", ldir, ld.cutSegment, err)
	}
	defer f.Close()
	if err := f.Truncate(ld.cutOffset); err != nil {
		return fmt.Errorf("repair %s: cut segment %d at %d: %w", ldir, ld.cutSegment, ld.cutOffset, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("repair %s: sync segment %d: %w", ldir, ld.cutSegment, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("repair %s: close segment %d: %w", ldir, ld.cutSegment, err)
	}
	if d, err := os.Open(ldir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// checkCheckpoint fails when the WAL's segments do not follow its last
// checkpoint, or the checkpoint does not read: the TSDB cannot replay it.
func checkCheckpoint(sub, ldir string, first int) error {
	cpDir, cpIdx, err := wlog.LastCheckpoint(ldir)
	switch {
	case errors.Is(err, record.ErrNotFound):
		if first > 0 {
			return missingCheckpoint(sub, ldir, first, fmt.Errorf("no checkpoint, segments start at %d", first))
		}
	case err != nil:
		return missingCheckpoint(sub, ldir, first, err)
	case cpIdx+1 < first:
		return missingCheckpoint(sub, ldir, first, fmt.Errorf("last checkpoint is %d, segments start at %d", cpIdx, first))
	default:
		if sc, err := scanLog(wlog.SegmentRange{Dir: cpDir, First: -1, Last: -1}); err != nil {
			return missingCheckpoint(sub, ldir, first, fmt.Errorf("%s unreadable after %d records: %w", filepath.Base(cpDir), sc.records, err))
		}
	}
	return nil
}

func missingCheckpoint(sub, ldir string, first int, err error) error {
	return fmt.Errorf("%s checkpoint.%08d is missing or damaged (%v): move %s aside to start without the samples not yet in blocks (the last ~2h)",
		sub, max(first-1, 0), err, ldir)
}

// logScan is what reading a log through found.
type logScan struct {
	records     int
	lastSegment int   // of the last good record, -1 for none
	lastOffset  int64 // where the last good record ends in its segment
}

// scanLog reads the records of a segment range; the error is the first
// corruption met.
func scanLog(sr wlog.SegmentRange) (logScan, error) {
	sc := logScan{lastSegment: -1}
	rc, err := wlog.NewSegmentsRangeReader(sr)
	if err != nil {
		return sc, err
	}
	defer rc.Close()
	r := wlog.NewReader(rc)
	for r.Next() {
		sc.records++
		sc.lastSegment, sc.lastOffset = r.Segment(), r.Offset()
	}
	return sc, r.Err()
}

// listQuarantine lists the blocks in DATA/quarantine, with the time range
// of those whose meta.json still parses.
func listQuarantine(dir string) ([]QuarantinedBlock, error) {
	qdir := filepath.Join(dir, QuarantineDir)
	entries, err := os.ReadDir(qdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read quarantine dir: %w", err)
	}
	var out []QuarantinedBlock
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		id, reason, _ := strings.Cut(e.Name(), "-")
		q := QuarantinedBlock{ULID: id, Reason: reason, Path: filepath.Join(qdir, e.Name())}
		if b, err := os.ReadFile(filepath.Join(q.Path, "meta.json")); err == nil {
			var m ptsdb.BlockMeta
			if json.Unmarshal(b, &m) == nil {
				q.MinMs, q.MaxMs = m.MinTime, m.MaxTime
			}
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b QuarantinedBlock) int { return strings.Compare(a.ULID, b.ULID) })
	return out, nil
}
