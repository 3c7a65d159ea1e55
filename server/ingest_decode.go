package server

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// encoding/json spent half of a JSON ingest's server CPU on the batch's
// number arrays: a scan of the whole document, then per number a
// reflected store (and a method call for each value, to refuse null).
// decodeBatchFast reads the batch as collectors send it (the known keys
// spelled exactly, each once; strings without escapes; integers where
// int64 goes; no null) in one pass. Anything else, valid or not, is left
// to encoding/json, so that every refusal and every odd spelling is
// decoded as before. FuzzIngestFastDecode checks that what the fast
// reader takes, encoding/json decodes to the same batch.

// jsonScan is a cursor over a JSON document; ok turns false at the
// first thing the fast reader leaves to encoding/json.
type jsonScan struct {
	b  []byte
	i  int
	ok bool
}

// decodeBatchFast reads doc into in and reports whether it could.
func decodeBatchFast(doc []byte, in *ingestBatch) bool {
	s := &jsonScan{b: doc, ok: true}
	s.object(func(key []byte) {
		switch string(key) {
		case "job_id":
			in.JobID = s.str()
		case "template_id":
			in.TemplateID = s.str()
		case "template_name":
			in.TemplateName = s.str()
		case "status":
			in.Status = s.str()
		case "playbook":
			in.Playbook = s.str()
		case "measured":
			in.Measured = s.str()
		case "forks":
			in.Forks = s.int()
		case "hosts":
			in.Hosts = s.int()
		case "memory_limit_bytes":
			in.MemoryLimitBytes = s.int()
		case "oom_kills":
			in.OOMKills = s.int()
		case "oom_counter":
			in.OOMCounter = s.int()
		case "project_revision":
			in.ProjectRevision = s.str()
		case "ee_image":
			in.EEImage = s.str()
		case "last_event":
			e := &ingestEvent{}
			s.object(func(key []byte) {
				switch string(key) {
				case "counter":
					e.Counter = s.int()
				case "time":
					e.Time = s.int()
				default:
					s.ok = false
				}
			})
			in.LastEvent = e
		case "tasks":
			in.Tasks = []ingestTask{}
			s.array(func() {
				var t ingestTask
				s.object(func(key []byte) { s.task(key, &t) })
				in.Tasks = append(in.Tasks, t)
			})
		case "series":
			in.Series = []ingestSeries{}
			s.array(func() {
				var sr ingestSeries
				s.object(func(key []byte) { s.series(key, &sr) })
				in.Series = append(in.Series, sr)
			})
		default:
			s.ok = false
		}
	})
	s.space()
	return s.ok && s.i == len(s.b)
}

func (s *jsonScan) task(key []byte, t *ingestTask) {
	switch string(key) {
	case "counter":
		t.Counter = s.int()
	case "uuid":
		t.UUID = s.str()
	case "name":
		t.Name = s.str()
	case "start":
		t.Start = s.int()
	case "play":
		t.Play = s.str()
	case "role":
		t.Role = s.str()
	case "task_path":
		t.Path = s.str()
	default:
		s.ok = false
	}
}

func (s *jsonScan) series(key []byte, sr *ingestSeries) {
	switch string(key) {
	case "resource":
		sr.Resource = s.str()
	case "counter":
		sr.Counter = s.int()
	case "uuid":
		sr.UUID = s.str()
	case "task":
		sr.Task = s.str()
	case "t":
		sr.T = make([]int64, 0, s.numbers())
		s.array(func() { sr.T = append(sr.T, s.int()) })
	case "v":
		sr.V = make([]sampleValue, 0, s.numbers())
		s.array(func() { sr.V = append(sr.V, sampleValue(s.float())) })
	default:
		s.ok = false
	}
}

// numbers is how many values the array of numbers at the cursor holds
// (its commas and one), to size its slice; it reads nothing.
func (s *jsonScan) numbers() int {
	end := bytes.IndexByte(s.b[s.i:], ']')
	if end < 0 {
		return 0
	}
	return bytes.Count(s.b[s.i:s.i+end], []byte{','}) + 1
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips white space and consumes c, or fails.
func (s *jsonScan) next(c byte) bool {
	s.space()
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != c {
		s.ok = false
		return false
	}
	s.i++
	return true
}

// peek skips white space and reports whether c comes next.
func (s *jsonScan) peek(c byte) bool {
	s.space()
	return s.ok && s.i < len(s.b) && s.b[s.i] == c
}

// object reads {"key": value, ...}, calling f at each value with its
// key; a key given twice fails (encoding/json's rule for it is left to
// encoding/json).
func (s *jsonScan) object(f func(key []byte)) {
	if !s.next('{') {
		return
	}
	if s.peek('}') {
		s.i++
		return
	}
	var seenKeys [16][]byte
	seen := seenKeys[:0]
	for s.ok {
		key := s.rawStr()
		if !s.next(':') || len(seen) == len(seenKeys) {
			s.ok = false
			return
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				s.ok = false
				return
			}
		}
		seen = append(seen, key)
		f(key)
		if s.peek(',') {
			s.i++
			continue
		}
		s.next('}')
		return
	}
}

// array reads [value, ...], calling f at each value.
func (s *jsonScan) array(f func()) {
	if !s.next('[') {
		return
	}
	if s.peek(']') {
		s.i++
		return
	}
	for s.ok {
		f()
		if s.peek(',') {
			s.i++
			continue
		}
		s.next(']')
		return
	}
}

// rawStr reads a string without escapes or control characters, in valid
// UTF-8, and returns its bytes.
func (s *jsonScan) rawStr() []byte {
	if !s.next('"') {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				s.ok = false
			}
			return v
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil
		}
		s.i++
	}
	s.ok = false
	return nil
}

func (s *jsonScan) str() string { return string(s.rawStr()) }

// number returns the bytes of a JSON number and whether it is an
// integer (no fraction, no exponent).
func (s *jsonScan) number() (num []byte, integer bool) {
	s.space()
	start, integer := s.i, true
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		s.ok = false
		return nil, false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		integer = false
		if !s.digits() {
			return nil, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		integer = false
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return nil, false
		}
	}
	return s.b[start:s.i], integer
}

// digits reads one or more decimal digits.
func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start {
		s.ok = false
	}
	return s.ok
}

func (s *jsonScan) int() int64 {
	num, integer := s.number()
	if !s.ok || !integer {
		s.ok = false
		return 0
	}
	v, err := strconv.ParseInt(yoloString(num), 10, 64)
	if err != nil {
		s.ok = false
	}
	return v
}

func (s *jsonScan) float() float64 {
	num, _ := s.number()
	if !s.ok {
		return 0
	}
	v, err := strconv.ParseFloat(yoloString(num), 64)
	if err != nil {
		s.ok = false
	}
	return v
}
