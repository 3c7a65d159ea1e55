package query

import (
	"strings"
)

// The size of a query is measured on its text before it is parsed: the
// MetricsQL parser expands WITH templates, and a query a few hundred
// bytes long can expand beyond any memory (see maxTokens).

// token is one lexical unit of a query, as scanQuery sees it: coarser
// than the MetricsQL lexer's, but never smaller in count.
type token struct {
	kind  tokenKind
	text  string // identifiers only
	depth int    // brackets open around it
	brace int    // of which curly braces
}

type tokenKind uint8

const (
	tokOther tokenKind = iota // number, duration, string
	tokIdent
	tokOp     // one operator character, or an operator keyword
	tokAssign // a lone '=' outside braces: a WITH template definition
	tokOpen
	tokClose
	tokComma
)

// opKeywords are the binary operators written as words.
var opKeywords = map[string]bool{"and": true, "or": true, "unless": true, "atan2": true, "if": true, "ifnot": true, "default": true}

// tokenize splits a query into tokens. Strings and comments are skipped
// whole; an unterminated string ends the query (the parser refuses it).
func tokenize(qs string) []token {
	var (
		toks         []token
		depth, brace int
	)
	for i := 0; i < len(qs); {
		c := qs[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(qs) && qs[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(qs) && qs[i] != c {
				if qs[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i++
			toks = append(toks, token{kind: tokOther, depth: depth, brace: brace})
		case c == '(' || c == '[' || c == '{':
			toks = append(toks, token{kind: tokOpen, depth: depth, brace: brace})
			depth++
			if c == '{' {
				brace++
			}
			i++
		case c == ')' || c == ']' || c == '}':
			depth = max(depth-1, 0)
			if c == '}' {
				brace = max(brace-1, 0)
			}
			toks = append(toks, token{kind: tokClose, depth: depth, brace: brace})
			i++
		case c == ',':
			toks = append(toks, token{kind: tokComma, depth: depth, brace: brace})
			i++
		case strings.IndexByte("+-*/%^<>=!~", c) >= 0:
			kind := tokOp
			if brace > 0 {
				kind = tokOther // a label matcher's, cheap to parse
			} else if c == '=' && brace == 0 && (i == 0 || strings.IndexByte("=!<>", qs[i-1]) < 0) && (i+1 == len(qs) || strings.IndexByte("=~", qs[i+1]) < 0) {
				kind = tokAssign
			}
			toks = append(toks, token{kind: kind, depth: depth, brace: brace})
			i++
		case isIdentStart(c):
			// MetricsQL identifiers take backslash escapes and any
			// non-ASCII letter; the key is the unescaped name.
			var name strings.Builder
			j := i
			for j < len(qs) && (isIdentStart(qs[j]) || j > i && (qs[j] >= '0' && qs[j] <= '9' || qs[j] == '.')) {
				if qs[j] == '\\' && j+1 < len(qs) {
					j++
				}
				name.WriteByte(qs[j])
				j++
			}
			word := name.String()
			kind := tokIdent
			if opKeywords[strings.ToLower(word)] {
				kind = tokOp
			}
			toks = append(toks, token{kind: kind, text: word, depth: depth, brace: brace})
			i = j
		default:
			// A number or duration (digits, dots, letters of units), or
			// one other character such as '@'.
			j := i + 1
			// Letters other than units and exponents start a new token,
			// as `1and` is `1 and` to MetricsQL.
			digits := "0123456789._smhdwyiIeE"
			if c == '0' && j < len(qs) && (qs[j] == 'x' || qs[j] == 'X') {
				digits, j = "0123456789abcdefABCDEF", j+1
			}
			if c >= '0' && c <= '9' || c == '.' {
				for j < len(qs) && strings.IndexByte(digits, qs[j]) >= 0 {
					j++
				}
			}
			toks = append(toks, token{kind: tokOther, depth: depth, brace: brace})
			i = j
		}
	}
	return toks
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || c == '\\' || c >= 0x80
}

// size is a measure of (part of) a query with its templates expanded.
type size struct {
	tokens, ops, depth int
}

func (s *size) add(o size, atDepth int) {
	s.tokens = min(s.tokens+o.tokens, 1<<40)
	s.ops = min(s.ops+o.ops, 1<<40)
	s.depth = max(s.depth, atDepth+o.depth)
}

// template is the body of a WITH template: toks[from:to].
type template struct{ from, to int }

// measure returns the size of a query with its WITH templates expanded.
// It over-counts rather than under-counts: every identifier named like a
// template is taken for a use of the largest template of that name,
// whatever scope it is in.
func measure(toks []token) size {
	templates := map[string]template{}
	inBody := make([]bool, len(toks))
	for i, t := range toks {
		if t.kind != tokAssign {
			continue
		}
		// The name is the identifier before '=', or before a parameter
		// list `f(a, b) =`.
		k := i - 1
		if k >= 0 && toks[k].kind == tokClose {
			for k >= 0 && !(toks[k].kind == tokOpen && toks[k].depth == t.depth) {
				k--
			}
			k--
		}
		if k < 0 || toks[k].kind != tokIdent {
			continue // the parser refuses it
		}
		end := i + 1
		for end < len(toks) && toks[end].depth >= t.depth && !(toks[end].kind == tokComma && toks[end].depth == t.depth) {
			if toks[end].kind == tokClose && toks[end].depth < t.depth {
				break
			}
			end++
		}
		// The head (name, parameters, '=') is no use of the template.
		for m := k; m < end; m++ {
			inBody[m] = true
		}
		name := toks[k].text
		if old, ok := templates[name]; !ok || end-(i+1) > old.to-old.from {
			templates[name] = template{from: i + 1, to: end}
		}
	}
	memo := map[string]size{}
	busy := map[string]bool{}
	var span func(from, to int, self string) size
	expand := func(name string) (size, bool) {
		tp, ok := templates[name]
		if !ok || busy[name] {
			return size{}, false
		}
		if s, ok := memo[name]; ok {
			return s, true
		}
		busy[name] = true
		s := span(tp.from, tp.to, name)
		busy[name] = false
		memo[name] = s
		return s, true
	}
	span = func(from, to int, self string) size {
		var s size
		base := 0
		if from < to {
			base = toks[from].depth
		}
		for k := from; k < to; k++ {
			t := toks[k]
			d := t.depth - base
			if t.kind == tokIdent && t.text != self {
				if e, ok := expand(t.text); ok {
					s.add(e, d)
					continue
				}
			}
			one := size{tokens: 1}
			if t.kind == tokOp {
				one.ops = 1
			}
			if t.kind == tokOpen {
				one.depth = 1
			}
			s.add(one, d)
		}
		return s
	}
	var total size
	for k := 0; k < len(toks); {
		if inBody[k] {
			k++
			continue
		}
		j := k
		for j < len(toks) && !inBody[j] {
			j++
		}
		s := span(k, j, "")
		s.depth += toks[k].depth
		total.add(s, 0)
		k = j
	}
	return total
}

// checkSize refuses a query too large or too deep once its WITH templates
// are expanded, before the parser sees it.
func checkSize(qs string) error {
	s := measure(tokenize(qs))
	switch {
	case s.ops > maxOperators:
		return badData("query has %d operators (WITH templates expanded), over the limit of %d", s.ops, maxOperators)
	case s.depth > maxNesting:
		return badData("query nests brackets %d deep (WITH templates expanded), over the limit of %d", s.depth, maxNesting)
	case s.tokens > maxTokens:
		return badData("query has %d tokens (WITH templates expanded), over the limit of %d", s.tokens, maxTokens)
	}
	return nil
}
