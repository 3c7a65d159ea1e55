package remote

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// jsonStream reads JSON values from an engine's answer a token at a
// time, holding no more of the answer than its read buffer and one
// token: a string of at most maxStringBytes, a number of at most
// maxNumberBytes. What a decoder keeps of the answer is its own (and
// charged to its reservation); the stream keeps nothing.
//
// Errors of the underlying reader (the answer's limit, a timeout) are
// returned as they are; an answer that is not JSON of the expected
// shape gives an error wrapping errSyntax.
type jsonStream struct {
	r   *bufio.Reader
	tok []byte // the current string or number, reused
}

// maxStringBytes is the longest string of an answer a decoder takes: a
// label name or value, far longer than any Peakline writes.
const maxStringBytes = 1 << 20

// maxNumberBytes is the longest number token: a float64 needs at most
// 24 characters, a time with decimals fewer.
const maxNumberBytes = 64

// errSyntax marks an answer that is not the JSON the decoder expects.
var errSyntax = errors.New("malformed answer")

// jsonReadBuffer is the size of a stream's read buffer.
const jsonReadBuffer = 64 << 10

func newJSONStream(r io.Reader) *jsonStream {
	return &jsonStream{r: bufio.NewReaderSize(r, jsonReadBuffer)}
}

func syntaxf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errSyntax, fmt.Sprintf(format, args...))
}

// eof turns the end of the answer within a value into a syntax error.
func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return syntaxf("answer ends within a value")
	}
	return err
}

// peek skips white space and returns the next byte without reading it;
// at the end of the answer it returns io.EOF.
func (s *jsonStream) peek() (byte, error) {
	for {
		b, err := s.r.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\n', '\r':
			_, _ = s.r.Discard(1)
			continue
		}
		return b[0], nil
	}
}

// expect reads the byte c, after white space.
func (s *jsonStream) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return eof(err)
	}
	if got != c {
		return syntaxf("want %q, got %q", c, got)
	}
	_, err = s.r.ReadByte()
	return err
}

// null reads a null if one comes next and reports whether it did.
func (s *jsonStream) null() (bool, error) {
	c, err := s.peek()
	if err != nil {
		return false, eof(err)
	}
	if c != 'n' {
		return false, nil
	}
	b, err := s.r.Peek(4)
	if err != nil || string(b) != "null" {
		return false, eof(syntaxf("want null"))
	}
	_, err = s.r.Discard(4)
	return true, err
}

// object reads an object (or null), calling field for each key; field
// must read the key's value.
func (s *jsonStream) object(field func(key string) error) error {
	if isNull, err := s.null(); isNull || err != nil {
		return err
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return eof(err)
		}
		if c == '}' {
			_, err = s.r.ReadByte()
			return err
		}
		if !first {
			if err := s.expect(','); err != nil {
				return err
			}
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
}

// array reads an array (or null), calling elem for each element; elem
// must read it.
func (s *jsonStream) array(elem func() error) error {
	if isNull, err := s.null(); isNull || err != nil {
		return err
	}
	if err := s.expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return eof(err)
		}
		if c == ']' {
			_, err = s.r.ReadByte()
			return err
		}
		if !first {
			if err := s.expect(','); err != nil {
				return err
			}
		}
		if err := elem(); err != nil {
			return err
		}
	}
}

// strBytes reads a string. The bytes it returns are the stream's until
// the next read: a decoder that keeps them copies them (string(b)).
func (s *jsonStream) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	s.tok = append(s.tok[:0], '"')
	escaped := false
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return nil, eof(err)
		}
		if len(s.tok) > maxStringBytes {
			return nil, syntaxf("a string longer than %d bytes", maxStringBytes)
		}
		s.tok = append(s.tok, c)
		switch {
		case c == '\\':
			escaped = true
			next, err := s.r.ReadByte()
			if err != nil {
				return nil, eof(err)
			}
			s.tok = append(s.tok, next)
		case c == '"':
			if !escaped && utf8.Valid(s.tok) {
				return s.tok[1 : len(s.tok)-1], nil
			}
			// Escapes and invalid UTF-8 (U+FFFD) as encoding/json reads them.
			var out string
			if err := json.Unmarshal(s.tok, &out); err != nil {
				return nil, syntaxf("string: %v", err)
			}
			s.tok = append(s.tok[:0], out...)
			return s.tok, nil
		case c < 0x20:
			return nil, syntaxf("control character in a string")
		}
	}
}

// str reads a string and returns a copy.
func (s *jsonStream) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// number reads a bare token up to the next delimiter: a JSON number, or
// what strconv takes besides (NaN, Inf, which some engines write). The
// bytes are the stream's until the next read.
func (s *jsonStream) number() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		return nil, eof(err)
	}
	s.tok = s.tok[:0]
	for {
		// Scan what the reader holds: one call per buffer, not per byte.
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				if errors.Is(err, io.EOF) && len(s.tok) > 0 {
					return s.tok, nil
				}
				return nil, eof(err)
			}
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		i := 0
		for i < len(buf) && !numberEnds[buf[i]] {
			i++
		}
		if len(s.tok)+i > maxNumberBytes {
			return nil, syntaxf("a number longer than %d bytes", maxNumberBytes)
		}
		s.tok = append(s.tok, buf[:i]...)
		_, _ = s.r.Discard(i)
		if i == len(buf) {
			continue
		}
		switch c := buf[i]; {
		case c == '"' || c == '[' || c == '{' || c == ':' || len(s.tok) == 0:
			return nil, syntaxf("want a number, got %q", c)
		}
		return s.tok, nil
	}
}

// numberEnds holds the bytes that end a bare token, and those that may
// not appear in one.
var numberEnds = func() (t [256]bool) {
	for _, c := range []byte(",]} \t\n\r\"[{:") {
		t[c] = true
	}
	return t
}()

// skip reads any value and drops it, holding no more than one string.
func (s *jsonStream) skip() error {
	c, err := s.peek()
	if err != nil {
		return eof(err)
	}
	switch c {
	case '{':
		return s.object(func(string) error { return s.skip() })
	case '[':
		return s.array(s.skip)
	case '"':
		_, err := s.strBytes()
		return err
	}
	_, err = s.number() // numbers, true, false, null
	return err
}
