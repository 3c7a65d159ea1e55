package ansible

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A job event file is one JSON object, and runner puts the task's whole
// output in it (stdout, event_data.res): a task that prints a log makes an
// event file as large as the log. json.Decoder holds a whole value in
// memory, so decodeEvent reads the object a byte at a time instead,
// keeping the few fields rawEvent names and checking, then forgetting,
// everything else. It accepts and refuses what json.Unmarshal into a
// rawEvent does (FuzzDecodeEvent compares the two), except that a field it
// keeps may be at most maxFieldBytes long.

// maxFieldBytes bounds one kept field's JSON text (a task name, a uuid, a
// time); an event is at most a few of them.
const maxFieldBytes = 1 << 20

// maxKeyBytes bounds the JSON text of a key compared with the kept names:
// a longer one (escapes included) is none of them.
const maxKeyBytes = 256

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// decodeEvent decodes the JSON object of an event file read from r into
// raw, holding memory for the fields it keeps only. Read errors of r are
// returned as they are.
func decodeEvent(r io.Reader, raw *rawEvent) error {
	s := &eventScanner{r: bufio.NewReader(r)}
	c, err := s.space()
	if err == io.EOF {
		return errors.New("unexpected end of JSON input")
	}
	if err != nil {
		return err
	}
	if c == '{' {
		err = s.object(true, func(key string, c byte) error { return s.eventField(raw, key, c) })
	} else {
		err = s.scalarOrSkip(c, "", "ansible.rawEvent", nil)
		if err == io.EOF && (c == '-' || c >= '0' && c <= '9') {
			err = nil // a number ends the input
			s.setTypeErr(fmt.Errorf("json: cannot unmarshal number into Go value of type ansible.rawEvent"))
		}
	}
	if err != nil {
		return s.eof(err)
	}
	switch c, err := s.space(); {
	case err == io.EOF:
	case err != nil:
		return err
	default:
		return fmt.Errorf("invalid character %q after top-level value at byte %d", c, s.off)
	}
	return s.typeErr
}

// eventField decodes (or skips) the value, starting with c, of a top-level
// member named key.
func (s *eventScanner) eventField(raw *rawEvent, key string, c byte) error {
	switch {
	case matchKey(key, "uuid"):
		return s.keep(c, key, &raw.UUID)
	case matchKey(key, "counter"):
		return s.keep(c, key, &raw.Counter)
	case matchKey(key, "event"):
		return s.keep(c, key, &raw.Event)
	case matchKey(key, "created"):
		return s.keep(c, key, &raw.Created)
	case matchKey(key, "event_data"):
		if c != '{' {
			// null clears it, as json.Unmarshal does; other types are
			// errors.
			return s.scalarOrSkip(c, key, "object", func() { raw.EventData = nil })
		}
		if raw.EventData == nil {
			raw.EventData = &eventData{}
		}
		d := raw.EventData
		return s.object(true, func(key string, c byte) error {
			switch {
			case matchKey(key, "res"):
				return s.res(c, &d.Res)
			case matchKey(key, "processed"):
				return s.hosts(c, &d.Processed)
			}
			for _, f := range []struct {
				name string
				dst  *string
			}{{"task", &d.Task}, {"name", &d.Name}, {"task_uuid", &d.TaskUUID}, {"play", &d.Play}, {"role", &d.Role}, {"task_path", &d.TaskPath}, {"playbook", &d.Playbook}} {
				if matchKey(key, f.name) {
					return s.keep(c, key, f.dst)
				}
			}
			return s.skip(c)
		})
	}
	return s.skip(c)
}

// res reads event_data.res starting with c as eventRes.UnmarshalJSON
// does, keeping only its rc: an object's last "rc" member (keys matched
// as encoding/json matches them), nil unless an integer.
func (s *eventScanner) res(c byte, dst *eventRes) error {
	*dst = eventRes{}
	if c != '{' {
		return s.skip(c)
	}
	var rc []byte
	seen := false
	err := s.object(true, func(key string, c byte) error {
		if !matchKey(key, "rc") {
			return s.skip(c)
		}
		s.capturing, s.buf, s.limit, s.over = true, append(s.buf[:0], c), maxFieldBytes, false
		err := s.skip(c)
		s.capturing = false
		rc, seen = nil, true
		if err == nil && !s.over {
			rc = append([]byte(nil), s.buf...)
		}
		return err
	})
	if err == nil && seen {
		dst.RC = parseRC(rc)
	}
	return err
}

// hosts reads event_data.processed starting with c as
// hostSet.UnmarshalJSON does: the distinct keys of an object, 0 for any
// other JSON.
func (s *eventScanner) hosts(c byte, dst *hostSet) error {
	*dst = 0
	if c != '{' {
		return s.skip(c)
	}
	keys := map[string]bool{}
	err := s.object(true, func(key string, c byte) error {
		keys[key] = true
		return s.skip(c)
	})
	if err == nil {
		*dst = hostSet(len(keys))
	}
	return err
}

// matchKey reports whether a JSON key names the field name, as
// encoding/json matches them: exactly, else under Unicode case folding.
func matchKey(key, name string) bool { return key == name || strings.EqualFold(key, name) }

// eventScanner reads JSON a byte at a time. While capturing, the bytes
// read are kept in buf (up to limit; over tells there were more).
type eventScanner struct {
	r       *bufio.Reader
	off     int64 // bytes read
	depth   int
	typeErr error // the first value of a wrong type, reported if the JSON is valid

	capturing bool
	buf       []byte
	limit     int
	over      bool
}

func (s *eventScanner) next() (byte, error) {
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, err
	}
	s.off++
	if s.capturing {
		if len(s.buf) < s.limit {
			s.buf = append(s.buf, c)
		} else {
			s.over = true
		}
	}
	return c, nil
}

// unread puts back the byte next returned last.
func (s *eventScanner) unread() {
	_ = s.r.UnreadByte()
	s.off--
	if s.capturing && !s.over && len(s.buf) > 0 {
		s.buf = s.buf[:len(s.buf)-1]
	}
}

// space returns the next byte that is not JSON whitespace.
func (s *eventScanner) space() (byte, error) {
	for {
		c, err := s.next()
		if err != nil || !isJSONSpace(c) {
			return c, err
		}
	}
}

// eof turns an io.EOF inside a value into the error it is.
func (s *eventScanner) eof(err error) error {
	if err == io.EOF {
		return fmt.Errorf("%w: the JSON ends at byte %d inside a value", io.ErrUnexpectedEOF, s.off)
	}
	return err
}

func (s *eventScanner) syntax(c byte, where string) error {
	return fmt.Errorf("invalid character %q %s at byte %d", c, where, s.off)
}

// keep captures the value starting with c and decodes it into dst with
// encoding/json; a type mismatch is kept for the end.
func (s *eventScanner) keep(c byte, key string, dst any) error {
	s.capturing, s.buf, s.limit, s.over = true, append(s.buf[:0], c), maxFieldBytes, false
	err := s.skip(c)
	s.capturing = false
	if err != nil {
		return err
	}
	if s.over {
		s.setTypeErr(fmt.Errorf("field %q is longer than %d bytes", key, maxFieldBytes))
		return nil
	}
	if err := json.Unmarshal(s.buf, dst); err != nil {
		s.setTypeErr(err)
	}
	return nil
}

// scalarOrSkip skips a value starting with c where JSON of type want was
// expected: null calls onNull (when set), anything else is a type error.
func (s *eventScanner) scalarOrSkip(c byte, key, want string, onNull func()) error {
	if err := s.skip(c); err != nil {
		return err
	}
	if c == 'n' {
		if onNull != nil {
			onNull()
		}
		return nil
	}
	if key == "" {
		s.setTypeErr(fmt.Errorf("json: cannot unmarshal %s into Go value of type %s", jsonKind(c), want))
	} else {
		s.setTypeErr(fmt.Errorf("json: cannot unmarshal %s into field %q of type %s", jsonKind(c), key, want))
	}
	return nil
}

func (s *eventScanner) setTypeErr(err error) {
	if s.typeErr == nil {
		s.typeErr = err
	}
}

func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// skip checks and forgets the value starting with c.
func (s *eventScanner) skip(c byte) error {
	switch {
	case c == '"':
		return s.restOfString()
	case c == '{':
		return s.object(false, func(_ string, c byte) error { return s.skip(c) })
	case c == '[':
		return s.array()
	case c == 't':
		return s.literal("rue")
	case c == 'f':
		return s.literal("alse")
	case c == 'n':
		return s.literal("ull")
	case c == '-' || c >= '0' && c <= '9':
		return s.number(c)
	}
	return s.syntax(c, "looking for beginning of value")
}

// object reads the members of an object after its '{', calling member with
// each key (unescaped when named; "" otherwise, or when longer than
// maxKeyBytes) and the first byte of its value, which member reads.
func (s *eventScanner) object(named bool, member func(key string, c byte) error) error {
	if s.depth++; s.depth > maxJSONDepth {
		return errors.New("exceeded max depth")
	}
	defer func() { s.depth-- }()
	c, err := s.space()
	if err != nil {
		return s.eof(err)
	}
	if c == '}' {
		return nil
	}
	for {
		if c != '"' {
			return s.syntax(c, "looking for beginning of object key string")
		}
		key, err := s.key(named)
		if err != nil {
			return err
		}
		if c, err = s.space(); err != nil {
			return s.eof(err)
		}
		if c != ':' {
			return s.syntax(c, "after object key")
		}
		if c, err = s.space(); err != nil {
			return s.eof(err)
		}
		if err := member(key, c); err != nil {
			return s.eof(err)
		}
		var end bool
		if c, end, err = s.after('}', "after object key:value pair"); end || err != nil {
			return err
		}
	}
}

// key reads an object key after its '"', unescaped when named.
func (s *eventScanner) key(named bool) (string, error) {
	if !named || s.capturing {
		return "", s.restOfString() // a key inside a kept value is kept with it
	}
	s.capturing, s.buf, s.limit, s.over = true, append(s.buf[:0], '"'), maxKeyBytes, false
	err := s.restOfString()
	s.capturing = false
	if err != nil || s.over {
		return "", err
	}
	var key string
	if err := json.Unmarshal(s.buf, &key); err != nil {
		return "", err
	}
	return key, nil
}

func (s *eventScanner) array() error {
	if s.depth++; s.depth > maxJSONDepth {
		return errors.New("exceeded max depth")
	}
	defer func() { s.depth-- }()
	c, err := s.space()
	if err != nil {
		return s.eof(err)
	}
	if c == ']' {
		return nil
	}
	for {
		if err := s.skip(c); err != nil {
			return s.eof(err)
		}
		var end bool
		if c, end, err = s.after(']', "after array element"); end || err != nil {
			return err
		}
	}
}

// after reads what follows an object's member or an array's element: end
// is true at the closing byte; after a ',' c is the next one's first byte;
// anything else is a syntax error naming where.
func (s *eventScanner) after(closing byte, where string) (c byte, end bool, err error) {
	if c, err = s.space(); err != nil {
		return 0, false, s.eof(err)
	}
	switch c {
	case closing:
		return c, true, nil
	case ',':
		if c, err = s.space(); err != nil {
			return 0, false, s.eof(err)
		}
		return c, false, nil
	}
	return c, false, s.syntax(c, where)
}

// restOfString reads a string after its opening quote.
func (s *eventScanner) restOfString() error {
	for {
		if !s.capturing {
			// A task's output is most of a big event: skip the bytes
			// that need no look, a buffer at a time.
			if err := s.skipPlain(); err != nil {
				return s.eof(err)
			}
		}
		c, err := s.next()
		if err != nil {
			return s.eof(err)
		}
		switch {
		case c == '"':
			return nil
		case c < 0x20:
			return s.syntax(c, "in string literal")
		case c == '\\':
			if c, err = s.next(); err != nil {
				return s.eof(err)
			}
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					if c, err = s.next(); err != nil {
						return s.eof(err)
					}
					if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
						return s.syntax(c, "in \\u hexadecimal character escape")
					}
				}
			default:
				return s.syntax(c, "in string escape code")
			}
		}
	}
}

// skipPlain skips string bytes up to the next quote, backslash or control
// byte (or the end of the input).
func (s *eventScanner) skipPlain() error {
	for {
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				return err
			}
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		i := 0
		for i < len(buf) && buf[i] != '"' && buf[i] != '\\' && buf[i] >= 0x20 {
			i++
		}
		_, _ = s.r.Discard(i)
		s.off += int64(i)
		if i < len(buf) {
			return nil
		}
	}
}

func (s *eventScanner) literal(rest string) error {
	for i := range len(rest) {
		c, err := s.next()
		if err != nil {
			return s.eof(err)
		}
		if c != rest[i] {
			return s.syntax(c, "in literal")
		}
	}
	return nil
}

// number reads a number starting with c, in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *eventScanner) number(c byte) error {
	var err error
	digits := func() (int, error) { // reads digits; c is the byte after them
		n := 0
		for {
			if c, err = s.next(); err != nil {
				return n, err
			}
			if c < '0' || c > '9' {
				return n, nil
			}
			n++
		}
	}
	if c == '-' {
		if c, err = s.next(); err != nil {
			return s.eof(err)
		}
	}
	switch {
	case c == '0':
		if c, err = s.next(); err != nil {
			return err // io.EOF: the number ends the input
		}
	case c >= '1' && c <= '9':
		if _, err = digits(); err != nil {
			return err
		}
	default:
		return s.syntax(c, "in numeric literal")
	}
	if c == '.' {
		n, err := digits()
		if n == 0 {
			if err != nil {
				return s.eof(err)
			}
			return s.syntax(c, "after decimal point in numeric literal")
		}
		if err != nil {
			return err
		}
	}
	if c == 'e' || c == 'E' {
		if c, err = s.next(); err != nil {
			return s.eof(err)
		}
		if c == '+' || c == '-' {
			if c, err = s.next(); err != nil {
				return s.eof(err)
			}
		}
		if c < '0' || c > '9' {
			return s.syntax(c, "in exponent of numeric literal")
		}
		if _, err = digits(); err != nil {
			return err
		}
	}
	s.unread()
	return nil
}
