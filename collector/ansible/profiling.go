package ansible

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The cgroup_perf_recap callback writes one record per poll: the poll's time
// (unix seconds, float), the task's name and uuid as the plugin saw them, and
// the value (cpu percent, memory MiB, pid count). The plugin only hooks
// v2_playbook_on_task_start, so handlers' samples carry the previous task's
// name and uuid; Read fixes that by time when job events exist.

// sample is one parsed plugin record, value already in the stored unit.
type sample struct {
	ms       int64 // unix milliseconds
	value    float64
	resource uint8 // index into resources
	uuid     string
	name     string
}

// profileFile is a plugin output file, recognised by its name:
// <feature>.<ext> (one file per resource) or
// <n>-<task_uuid>-<feature>.<ext> (one file per task; n is the plugin's own
// task index, not a job-event counter, and is ignored).
type profileFile struct {
	path     string
	resource uint8
	csv      bool   // CSV, else RFC 7464 JSON text sequence
	uuid     string // task uuid from the name; "" for one file per resource
}

// parseProfileName recognises a plugin output file name.
func parseProfileName(name string) (f profileFile, ok bool) {
	stem, ok := strings.CutSuffix(name, ".csv")
	f.csv = ok
	if !ok {
		if stem, ok = strings.CutSuffix(name, ".json"); !ok {
			return f, false
		}
	}
	feature := stem
	if i := strings.LastIndexByte(stem, '-'); i >= 0 {
		feature = stem[i+1:]
		idx, uuid, ok := strings.Cut(stem[:i], "-")
		if !ok || uuid == "" || !isDigits(idx) {
			return f, false
		}
		f.uuid = uuid
	}
	for i, r := range resources {
		if feature == r {
			f.resource = uint8(i)
			return f, true
		}
	}
	return f, false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// lineError locates a parse error inside a profiling file.
type lineError struct {
	line   int // 1-based
	record int // 1-based JSON-seq record number; 0 for CSV
	err    error
}

func (e *lineError) Error() string {
	if e.record > 0 {
		return fmt.Sprintf("line %d (record %d): %v", e.line, e.record, e.err)
	}
	return fmt.Sprintf("line %d: %v", e.line, e.err)
}

func (e *lineError) Unwrap() error { return e.err }

// newSample checks a record's timestamp (unix seconds) and value (plugin
// unit) and converts them to the stored units.
func newSample(resource uint8, tsSec, value float64, uuid, name string) (sample, error) {
	// 1e11 s is the year 5138: anything later is a unit mistake (ms, µs).
	if math.IsNaN(tsSec) || tsSec <= 0 || tsSec >= 1e11 {
		return sample{}, fmt.Errorf("%w: timestamp %v is not unix seconds", ErrBadValue, tsSec)
	}
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return sample{}, fmt.Errorf("%w: value %v is not finite", ErrBadValue, value)
	}
	// cpuacct.usage, memory.usage_in_bytes and pids.current never go down
	// past zero; a negative value is a corrupt file, not a measurement.
	if value < 0 {
		return sample{}, fmt.Errorf("%w: value %v is negative", ErrBadValue, value)
	}
	if resources[resource] == ResourceMemory {
		// The plugin writes bytes/1024/1024; ×2^20 is exact in float64
		// short of overflow.
		if value *= 1 << 20; math.IsInf(value, 0) {
			return sample{}, fmt.Errorf("%w: memory value %v MiB is out of range", ErrBadValue, value/(1<<20))
		}
	}
	return sample{
		ms:       int64(math.Round(tsSec * 1000)),
		value:    value,
		resource: resource,
		uuid:     uuid,
		name:     name,
	}, nil
}

const recordSeparator = 0x1E

// jsonSeqRecord is one cgroup_perf_recap JSON-seq record.
type jsonSeqRecord struct {
	Timestamp *float64 `json:"timestamp"`
	TaskName  string   `json:"task_name"`
	TaskUUID  string   `json:"task_uuid"`
	Value     *float64 `json:"value"`
}

// maxRecordBytes bounds one JSON-seq record or CSV row, and so the memory a
// profiling file's read holds whatever its size: the plugins write about
// 100 bytes a record.
const maxRecordBytes = 1 << 20

// errLongRecord is the error of a record longer than maxRecordBytes.
var errLongRecord = fmt.Errorf("record longer than %d bytes", maxRecordBytes)

// splitRecords splits an RFC 7464 stream at its record separators: the
// first token is what comes before the first RS, each next one a record
// without its RS.
func splitRecords(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, recordSeparator); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// parseJSONSeq appends the samples of an RFC 7464 JSON text sequence
// (0x1E, JSON text, LF) read from src to dst, one record at a time. defUUID
// stands in for records without a task_uuid. Parse errors are *lineError;
// src's read errors are returned as they are. Empty input is no samples.
func parseJSONSeq(dst []sample, src io.Reader, resource uint8, defUUID string, in *interner) ([]sample, error) {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordBytes)
	sc.Split(splitRecords)
	line := 1
	record := 0
	for first := true; sc.Scan(); first = false {
		raw := sc.Bytes()
		recLine := line
		line += bytes.Count(raw, []byte{'\n'})
		if first {
			// Whitespace before the first RS is tolerated (an editor's newline).
			for i, c := range raw {
				if !isJSONSpace(c) {
					return dst, &lineError{line: recLine + bytes.Count(raw[:i], []byte{'\n'}), record: 1, err: fmt.Errorf("found %q where a record separator 0x1E should start the record", c)}
				}
			}
			continue
		}
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue // RFC 7464 2.1: consecutive RSs may be ignored
		}
		record++
		r, ts, v, fast := fastRecord(text, in)
		if !fast {
			if err := json.Unmarshal(text, &r); err != nil {
				return dst, &lineError{line: recLine, record: record, err: explainJSONSeqError(text, err)}
			}
			if r.Timestamp == nil || r.Value == nil {
				return dst, &lineError{line: recLine, record: record, err: errors.New(`record lacks "timestamp" or "value"`)}
			}
			ts, v = *r.Timestamp, *r.Value
		}
		uuid := r.TaskUUID
		if uuid == "" {
			uuid = defUUID
		}
		s, err := newSample(resource, ts, v, in.get(uuid), in.get(r.TaskName))
		if err != nil {
			return dst, &lineError{line: recLine, record: record, err: err}
		}
		dst = append(dst, s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return dst, &lineError{line: line, record: record + 1, err: errLongRecord}
		}
		return dst, err
	}
	return dst, nil
}

// explainJSONSeqError turns encoding/json's error on a record into one that
// says what went wrong with the file. It runs only on the error path.
func explainJSONSeqError(text []byte, err error) error {
	var r jsonSeqRecord
	if derr := json.NewDecoder(bytes.NewReader(text)).Decode(&r); errors.Is(derr, io.ErrUnexpectedEOF) {
		// RFC 7464 2.4: the writer died mid-record.
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return fmt.Errorf("record is a JSON %s, want an object", typ.Value)
		}
		return fmt.Errorf("field %q is a JSON %s, want a %s", typ.Field, typ.Value, typ.Type)
	}
	// Python's json.dumps writes NaN and Infinity, which are not JSON.
	for _, tok := range []string{"NaN", "Infinity"} {
		if bytes.Contains(text, []byte(tok)) {
			return fmt.Errorf("%w: %s is not finite (%w)", ErrBadValue, tok, err)
		}
	}
	return err
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// csvHeader is tolerated as a first row, though the plugin writes none.
const csvHeader = "timestamp"

// parseCSV appends the samples of cgroup_perf_recap CSV rows
// (timestamp,task_name,task_uuid,value; CRLF; no header) read from src to
// dst, one row at a time. A row with more than 4 fields has an unquoted
// task name containing commas: the middle fields are the name. defUUID
// stands in for rows with an empty task uuid. Parse errors are *lineError;
// src's read errors are returned as they are.
func parseCSV(dst []sample, src io.Reader, resource uint8, defUUID string, in *interner) ([]sample, error) {
	// encoding/csv holds a whole row (quoted fields span lines): rowLimit
	// fails a row that grows past maxRecordBytes.
	lim := &rowLimit{r: src}
	r := csv.NewReader(lim)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	lastLine := 0 // where the latest row started
	for row := 0; ; row++ {
		lim.n = 0
		rec, err := r.Read()
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			var pe *csv.ParseError
			switch {
			case errors.Is(err, errLongRecord):
				return dst, &lineError{line: lastLine + 1, err: errLongRecord}
			case errors.As(err, &pe):
				return dst, &lineError{line: pe.Line, err: pe.Err}
			}
			return dst, err // src's own error
		}
		line, _ := r.FieldPos(0)
		lastLine = line
		if len(rec) < 4 {
			return dst, &lineError{line: line, err: fmt.Errorf("got %d fields, want 4: timestamp,task_name,task_uuid,value", len(rec))}
		}
		if row == 0 && strings.TrimSpace(rec[0]) == csvHeader {
			continue
		}
		ts, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
		if err != nil {
			return dst, &lineError{line: line, err: fmt.Errorf("cannot parse timestamp: %w", err)}
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(rec[len(rec)-1]), 64)
		if err != nil {
			return dst, &lineError{line: line, err: fmt.Errorf("cannot parse value: %w", err)}
		}
		name := rec[1]
		if len(rec) > 4 {
			name = strings.Join(rec[1:len(rec)-2], ",")
		}
		uuid := rec[len(rec)-2]
		if uuid == "" {
			uuid = defUUID
		}
		s, err := newSample(resource, ts, value, in.get(uuid), in.get(name))
		if err != nil {
			return dst, &lineError{line: line, err: err}
		}
		dst = append(dst, s)
	}
}

// rowLimit passes reads through until n, the bytes read since the caller
// last reset it, exceeds maxRecordBytes plus encoding/csv's read-ahead.
type rowLimit struct {
	r io.Reader
	n int
}

func (l *rowLimit) Read(p []byte) (int, error) {
	if l.n > maxRecordBytes+64<<10 {
		return 0, errLongRecord
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

// interner makes the task names and uuids repeated on every record share
// one string each. The zero value is not usable; a nil *interner is, and
// interns nothing.
type interner struct{ m map[string]string }

func newInterner() *interner { return &interner{m: make(map[string]string)} }

func (in *interner) get(s string) string {
	if in == nil {
		return s
	}
	if v, ok := in.m[s]; ok {
		return v
	}
	in.m[s] = s
	return s
}
