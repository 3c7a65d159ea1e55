package ansible

import "strconv"

// fastRecord parses the one record shape the profiling plugins write,
// {"timestamp": N, "task_name": "S", "task_uuid": "S", "value": N}, keys
// in any order, without reflection or allocation. It gives up (ok false)
// on anything else — escapes in strings, other keys or value types, odd
// numbers — and the caller then uses encoding/json, which also produces
// the error messages. The two agree on every record fastRecord accepts.
func fastRecord(text []byte, in *interner) (r jsonSeqRecord, ts, v float64, ok bool) {
	p := 0
	skip := func() {
		for p < len(text) && isJSONSpace(text[p]) {
			p++
		}
	}
	expect := func(c byte) bool {
		skip()
		if p < len(text) && text[p] == c {
			p++
			return true
		}
		return false
	}
	// str returns the bytes of a string without escapes or control bytes.
	str := func() ([]byte, bool) {
		if !expect('"') {
			return nil, false
		}
		start := p
		for p < len(text) {
			switch c := text[p]; {
			case c == '"':
				p++
				return text[start : p-1], true
			case c == '\\' || c < 0x20 || c >= 0x80: // escapes, control bytes, non-ASCII (UTF-8 checks)
				return nil, false
			}
			p++
		}
		return nil, false
	}
	num := func() (float64, bool) {
		skip()
		start := p
		for p < len(text) && (text[p] >= '0' && text[p] <= '9' || text[p] == '.' || text[p] == '-' || text[p] == '+' || text[p] == 'e' || text[p] == 'E') {
			p++
		}
		tok := text[start:p]
		if !jsonNumber(tok) {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(tok), 64)
		return f, err == nil
	}
	if !expect('{') {
		return r, 0, 0, false
	}
	var seen [4]bool
	for i := 0; ; i++ {
		if i > 0 {
			if expect('}') {
				break
			}
			if !expect(',') {
				return r, 0, 0, false
			}
		}
		key, good := str()
		if !good || !expect(':') {
			return r, 0, 0, false
		}
		var k int
		switch string(key) {
		case "timestamp":
			k = 0
			ts, good = num()
		case "task_name":
			k = 1
			var b []byte
			b, good = str()
			r.TaskName = in.getBytes(b)
		case "task_uuid":
			k = 2
			var b []byte
			b, good = str()
			r.TaskUUID = in.getBytes(b)
		case "value":
			k = 3
			v, good = num()
		default:
			return r, 0, 0, false
		}
		if !good || seen[k] {
			return r, 0, 0, false
		}
		seen[k] = true
	}
	skip()
	if p != len(text) || !seen[0] || !seen[3] {
		return r, 0, 0, false
	}
	return r, ts, v, true
}

// jsonNumber reports whether tok is a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(tok []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	if i < len(tok) && tok[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(tok)
}

// getBytes interns a string given as bytes; the lookup does not allocate.
func (in *interner) getBytes(b []byte) string {
	if in == nil {
		return string(b)
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	s := string(b)
	in.m[s] = s
	return s
}
