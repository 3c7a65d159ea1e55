package ansible

import (
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

// parseJSONSeq appends the samples of an RFC 7464 JSON text sequence
// (0x1E, JSON text, LF) to dst. defUUID stands in for records without a
// task_uuid. Errors are *lineError. Empty input is no samples.
func parseJSONSeq(dst []sample, data []byte, resource uint8, defUUID string, in *interner) ([]sample, error) {
	line := 1
	rest := data
	// Whitespace before the first RS is tolerated (an editor's newline).
	for len(rest) > 0 && rest[0] != recordSeparator {
		if !isJSONSpace(rest[0]) {
			return dst, &lineError{line: line, record: 1, err: fmt.Errorf("found %q where a record separator 0x1E should start the record", rest[0])}
		}
		if rest[0] == '\n' {
			line++
		}
		rest = rest[1:]
	}
	record := 0
	for len(rest) > 0 {
		rest = rest[1:] // the RS
		end := bytes.IndexByte(rest, recordSeparator)
		if end < 0 {
			end = len(rest)
		}
		raw := rest[:end]
		rest = rest[end:]
		recLine := line
		line += bytes.Count(raw, []byte{'\n'})
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue // RFC 7464 2.1: consecutive RSs may be ignored
		}
		record++
		r, ts, v, fast := fastRecord(text, in)
		if fast {
			r.Timestamp, r.Value = &ts, &v
		} else if err := json.Unmarshal(text, &r); err != nil {
			return dst, &lineError{line: recLine, record: record, err: explainJSONSeqError(text, err)}
		}
		if r.Timestamp == nil || r.Value == nil {
			return dst, &lineError{line: recLine, record: record, err: errors.New(`record lacks "timestamp" or "value"`)}
		}
		uuid := r.TaskUUID
		if uuid == "" {
			uuid = defUUID
		}
		s, err := newSample(resource, *r.Timestamp, *r.Value, in.get(uuid), in.get(r.TaskName))
		if err != nil {
			return dst, &lineError{line: recLine, record: record, err: err}
		}
		dst = append(dst, s)
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
// (timestamp,task_name,task_uuid,value; CRLF; no header) to dst. A row with
// more than 4 fields has an unquoted task name containing commas: the middle
// fields are the name. defUUID stands in for rows with an empty task uuid.
// Errors are *lineError.
func parseCSV(dst []sample, data []byte, resource uint8, defUUID string, in *interner) ([]sample, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	for row := 0; ; row++ {
		rec, err := r.Read()
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return dst, &lineError{line: pe.Line, err: pe.Err}
			}
			return dst, &lineError{line: 1, err: err}
		}
		line, _ := r.FieldPos(0)
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
