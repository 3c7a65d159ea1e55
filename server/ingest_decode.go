package server

import (
	"bytes"
	"slices"
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
	// cols holds the series' times and values: each series' t and v are
	// slices of its columns (nil: each its own).
	cols *writeBuf
}

// decodeBatchFast reads doc into in and reports whether it could. The
// series' times and values are slices of cols' columns when cols is not
// nil, valid until cols is reused.
func decodeBatchFast(doc []byte, in *ingestBatch, cols *writeBuf) bool {
	s := &jsonScan{b: doc, ok: true, cols: cols}
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
		if s.cols == nil {
			sr.T = make([]int64, 0, s.numbers())
			s.array(func() { sr.T = append(sr.T, s.int()) })
			return
		}
		c := s.cols
		from := len(c.ts)
		c.ts = slices.Grow(c.ts, s.numbers())
		s.array(func() { c.ts = append(c.ts, s.int()) })
		sr.T = c.ts[from:len(c.ts):len(c.ts)]
	case "v":
		if s.cols == nil {
			sr.V = make([]sampleValue, 0, s.numbers())
			s.array(func() { sr.V = append(sr.V, sampleValue(s.float())) })
			return
		}
		c := s.cols
		from := len(c.vs)
		c.vs = slices.Grow(c.vs, s.numbers())
		s.array(func() { c.vs = append(c.vs, s.float()) })
		sr.V = asSampleValues(c.vs[from:len(c.vs):len(c.vs)])
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

// accumulate reads the decimal digits at the cursor (none or more) and
// folds them into u, u×10 + digit each; it returns u and how many it
// read. Past 19 digits u wraps: callers count the digits and hand such
// numbers to strconv.
func (s *jsonScan) accumulate(u uint64) (uint64, int) {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i] - '0'
		if c > 9 {
			break
		}
		u = u*10 + uint64(c)
		s.i++
	}
	return u, s.i - start
}

// int reads an integer. Up to 18 digits it adds them up as it reads
// them (no overflow is possible); longer ones go to strconv, which
// refuses what int64 cannot hold.
func (s *jsonScan) int() int64 {
	s.space()
	start := s.i
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	d0 := s.i
	u, n := s.accumulate(0)
	switch {
	case n == 0 || (n > 1 && s.b[d0] == '0'): // JSON has no leading zeros
		s.ok = false
		return 0
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'): // not an integer
		s.ok = false
		return 0
	case n > 18:
		v, err := strconv.ParseInt(yoloString(s.b[start:s.i]), 10, 64)
		if err != nil {
			s.ok = false
		}
		return v
	}
	if neg {
		return -int64(u)
	}
	return int64(u)
}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float reads a number. A decimal of at most 15 digits without an
// exponent (what collectors send) is its digits as an integer, below
// 2^53 and so exact as a float64, divided by a power of ten that is
// exact too: one correctly rounded division, the float64 nearest to the
// decimal, as strconv.ParseFloat finds it. Other numbers go to strconv.
func (s *jsonScan) float() float64 {
	s.space()
	start := s.i
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	frac := 0
	d0 := s.i
	mant, digits := s.accumulate(0)
	if digits == 0 || (digits > 1 && s.b[d0] == '0') {
		s.ok = false
		return 0
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		mant, frac = s.accumulate(mant)
		if frac == 0 {
			s.ok = false
			return 0
		}
		digits += frac
	}
	if digits > 15 || (s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E')) {
		s.i = start
		return s.parseFloat()
	}
	f := float64(mant) / exactPow10[frac]
	if neg {
		return -f
	}
	return f
}

// parseFloat reads a number by strconv.
func (s *jsonScan) parseFloat() float64 {
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
