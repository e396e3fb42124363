// Package strictjson is the one set of rules every reader of a client's
// JSON-RPC message is held to, checked in one pass over the raw bytes
// before anything decodes them:
//
//   - exactly one JSON value (RFC 8259), white space around it, nothing
//     after it;
//   - strings of valid UTF-8 with no lone surrogate escape (RFC 7493,
//     I-JSON), and numbers a float64 holds (no 1e999);
//   - no object with two names equal once case is folded, at any depth:
//     neither a duplicate ({"a":1,"a":2}) nor a case variant
//     ({"role":"viewer","ROLE":"admin"}). Decoders differ on both: one
//     keeps the first duplicate and another the last, and encoding/json
//     folds case where a schema validator and the SDK's decoder do not.
//     A message that two readers could read two ways is refused, so that
//     what a check judged is what the body receives;
//   - at most MaxDepth levels of nesting (the SDK's own bound).
//
// Why a pass of its own rather than a library: encoding/json accepts
// duplicates and folds case; the json v2 candidate
// (github.com/go-json-experiment/json) refuses exact duplicates and bad
// UTF-8 but not case variants, so the names would have to be folded and
// compared again. One scan that does all of it costs about what a
// validation alone does, and allocates nothing for objects of up to
// smallObject members (a map, only for larger ones, keeps a large object
// linear).
//
// Check is safe for concurrent use. Its cost is linear in len(data).
package strictjson

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/livereg/livereg/internal/quote"
)

// MaxDepth is the deepest nesting of objects and arrays Check accepts:
// the MCP Go SDK's decoder refuses deeper.
const MaxDepth = 1000

// The reasons Check refuses; its error wraps one of them.
var (
	ErrSyntax       = errors.New("invalid JSON")
	ErrTrailing     = errors.New("data after the JSON value")
	ErrDuplicateKey = errors.New("duplicate object key")
	ErrString       = errors.New("invalid string")
	ErrNumber       = errors.New("number out of range")
	ErrDepth        = errors.New("nested too deeply")
)

// Error is Check's refusal: what (one of the sentinel errors), where (a
// byte offset) and, for a key, which (quoted, at most quote.Most bytes).
type Error struct {
	Err    error
	Offset int
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%v at offset %d: %s", e.Err, e.Offset, e.Detail)
	}
	return fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
}

func (e *Error) Unwrap() error { return e.Err }

// smallObject is how many members an object may have before its folded
// names go into a map rather than a list scanned for each new name.
const smallObject = 16

// checker is one Check's state, pooled: the folded names of the objects
// being read, innermost last.
type checker struct {
	data  []byte
	names []byte // folded names, back to back
	ends  []int  // the end of each in names
}

var checkers = sync.Pool{New: func() any { return new(checker) }}

// Check reports whether data is one JSON value within the rules of the
// package doc; the error wraps the sentinel of the first rule broken.
func Check(data []byte) error {
	c := checkers.Get().(*checker)
	c.data = data
	c.names, c.ends = c.names[:0], c.ends[:0]
	err := c.check()
	c.data = nil
	if cap(c.names) <= 64<<10 && cap(c.ends) <= 4<<10 {
		checkers.Put(c)
	}
	return err
}

func (c *checker) check() error {
	i := c.space(0)
	if i == len(c.data) {
		return &Error{Err: ErrSyntax, Offset: i, Detail: "no value"}
	}
	i, err := c.value(i, 0)
	if err != nil {
		return err
	}
	if i = c.space(i); i != len(c.data) {
		return &Error{Err: ErrTrailing, Offset: i, Detail: fmt.Sprintf("%d bytes, beginning %s",
			len(c.data)-i, quote.Name(string(c.data[i:min(len(c.data), i+quote.Most)])))}
	}
	return nil
}

func (c *checker) space(i int) int {
	for i < len(c.data) {
		switch c.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (c *checker) syntax(i int) error {
	if i >= len(c.data) {
		return &Error{Err: ErrSyntax, Offset: i, Detail: "unexpected end"}
	}
	return &Error{Err: ErrSyntax, Offset: i, Detail: fmt.Sprintf("unexpected %q", c.data[i])}
}

// value reads the value at i, at depth levels of nesting, and returns
// the offset after it.
func (c *checker) value(i, depth int) (int, error) {
	if i >= len(c.data) {
		return i, c.syntax(i)
	}
	switch b := c.data[i]; {
	case b == '{':
		return c.object(i, depth+1)
	case b == '[':
		return c.array(i, depth+1)
	case b == '"':
		return c.str(i, false)
	case b == '-' || b >= '0' && b <= '9':
		return c.number(i)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(c.data)-i >= len(lit) && string(c.data[i:i+len(lit)]) == lit {
				return i + len(lit), nil
			}
		}
		return i, c.syntax(i)
	}
}

// after reads what follows a member that ended at i: a comma, and the
// next member's start, or close, the end of its array or object (done).
func (c *checker) after(i int, close byte) (next int, done bool, err error) {
	i = c.space(i)
	switch {
	case i >= len(c.data):
		return i, false, c.syntax(i)
	case c.data[i] == ',':
		return c.space(i + 1), false, nil
	case c.data[i] == close:
		return i + 1, true, nil
	}
	return i, false, c.syntax(i)
}

// tooDeep is the refusal of an array or object at i nested past MaxDepth.
func (c *checker) tooDeep(i int) error {
	return &Error{Err: ErrDepth, Offset: i, Detail: fmt.Sprintf("more than %d levels", MaxDepth)}
}

func (c *checker) array(i, depth int) (int, error) {
	if depth > MaxDepth {
		return i, c.tooDeep(i)
	}
	i = c.space(i + 1)
	if i < len(c.data) && c.data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth); err != nil {
			return i, err
		}
		var done bool
		if i, done, err = c.after(i, ']'); done || err != nil {
			return i, err
		}
	}
}

func (c *checker) object(i, depth int) (int, error) {
	if depth > MaxDepth {
		return i, c.tooDeep(i)
	}
	// This object's names are c.names[base:], ending at c.ends[first:].
	first, base := len(c.ends), len(c.names)
	defer func() { c.ends, c.names = c.ends[:first], c.names[:base] }()
	var large map[string]struct{} // past smallObject members
	i = c.space(i + 1)
	if i < len(c.data) && c.data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(c.data) || c.data[i] != '"' {
			return i, c.syntax(i)
		}
		start, at := len(c.names), i
		var err error
		if i, err = c.str(i, true); err != nil {
			return i, err
		}
		name := c.names[start:]
		dup := false
		if large != nil {
			_, dup = large[string(name)]
		} else {
			prev := base
			for _, end := range c.ends[first:] {
				if string(c.names[prev:end]) == string(name) {
					dup = true
					break
				}
				prev = end
			}
		}
		if dup {
			raw, uerr := strconv.Unquote(string(c.data[at:i]))
			if uerr != nil {
				raw = string(c.data[at+1 : i-1])
			}
			return at, &Error{Err: ErrDuplicateKey, Offset: at,
				Detail: quote.Name(raw) + " (names are compared with case folded)"}
		}
		c.ends = append(c.ends, len(c.names))
		if large == nil && len(c.ends)-first > smallObject {
			large = make(map[string]struct{}, 2*smallObject)
			prev := base
			for _, end := range c.ends[first:] {
				large[string(c.names[prev:end])] = struct{}{}
				prev = end
			}
		} else if large != nil {
			large[string(name)] = struct{}{}
		}
		i = c.space(i)
		if i >= len(c.data) || c.data[i] != ':' {
			return i, c.syntax(i)
		}
		if i, err = c.value(c.space(i+1), depth); err != nil {
			return i, err
		}
		var done bool
		if i, done, err = c.after(i, '}'); done || err != nil {
			return i, err
		}
	}
}

// str reads the string at i; with fold, it appends its value, case
// folded, to c.names.
func (c *checker) str(i int, fold bool) (int, error) {
	at := i
	i++
	for i < len(c.data) {
		// The common run: ASCII that needs no look but this one, folded
		// in bulk.
		j := i
		for j < len(c.data) && plain[c.data[j]] {
			j++
		}
		if fold {
			n := len(c.names)
			c.names = append(c.names, c.data[i:j]...)
			for k, b := range c.names[n:] {
				if 'a' <= b && b <= 'z' {
					c.names[n+k] = b - ('a' - 'A')
				}
			}
		}
		if i = j; i == len(c.data) {
			break
		}
		b := c.data[i]
		switch {
		case b == '"':
			return i + 1, nil
		case b < ' ':
			return i, &Error{Err: ErrString, Offset: i, Detail: "a control character unescaped"}
		case b == '\\':
			r, n, err := c.escape(i)
			if err != nil {
				return i, err
			}
			if fold {
				c.foldRune(r)
			}
			i += n
		case b < utf8.RuneSelf:
			if fold {
				if 'a' <= b && b <= 'z' {
					b -= 'a' - 'A'
				}
				c.names = append(c.names, b)
			}
			i++
		default:
			r, n := utf8.DecodeRune(c.data[i:])
			if r == utf8.RuneError && n == 1 {
				return i, &Error{Err: ErrString, Offset: i, Detail: "invalid UTF-8"}
			}
			if fold {
				c.foldRune(r)
			}
			i += n
		}
	}
	return i, &Error{Err: ErrSyntax, Offset: at, Detail: "unterminated string"}
}

// plain marks the bytes a string holds as they are: ASCII but the
// control characters, the quote and the backslash.
var plain = func() (t [256]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// foldRune appends r folded as encoding/json folds a name: ASCII to
// upper case, any other rune to the upper case of its lower case.
func (c *checker) foldRune(r rune) {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		c.names = append(c.names, byte(r))
		return
	}
	c.names = utf8.AppendRune(c.names, unicode.ToUpper(unicode.ToLower(r)))
}

// escape reads the escape at i (a backslash) and returns the rune it
// stands for and its length; a surrogate must be half of a pair.
func (c *checker) escape(i int) (rune, int, error) {
	if i+1 >= len(c.data) {
		return 0, 0, c.syntax(i + 1)
	}
	switch c.data[i+1] {
	case '"', '\\', '/':
		return rune(c.data[i+1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := c.hex4(i + 2)
		if !ok {
			return 0, 0, &Error{Err: ErrString, Offset: i, Detail: "a bad \\u escape"}
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, 0, &Error{Err: ErrString, Offset: i, Detail: "a lone surrogate escape"}
		case r >= 0xD800 && r <= 0xDBFF:
			if i+11 < len(c.data) && c.data[i+6] == '\\' && c.data[i+7] == 'u' {
				if lo, ok := c.hex4(i + 8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					return (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000, 12, nil
				}
			}
			return 0, 0, &Error{Err: ErrString, Offset: i, Detail: "a lone surrogate escape"}
		}
		return r, 6, nil
	}
	return 0, 0, &Error{Err: ErrString, Offset: i, Detail: "a bad escape"}
}

func (c *checker) hex4(i int) (rune, bool) {
	if i+4 > len(c.data) {
		return 0, false
	}
	var r rune
	for _, b := range c.data[i : i+4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}

// number reads the number at i: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// which a float64 must hold.
func (c *checker) number(i int) (int, error) {
	at := i
	if c.data[i] == '-' {
		i++
	}
	digits := func() bool {
		from := i
		for i < len(c.data) && c.data[i] >= '0' && c.data[i] <= '9' {
			i++
		}
		return i > from
	}
	switch {
	case i < len(c.data) && c.data[i] == '0':
		if i++; i < len(c.data) && c.data[i] >= '0' && c.data[i] <= '9' {
			return i, c.syntax(i) // a leading zero
		}
	case !digits():
		return i, c.syntax(i)
	}
	if i < len(c.data) && c.data[i] == '.' {
		i++
		if !digits() {
			return i, c.syntax(i)
		}
	}
	exp := false
	if i < len(c.data) && (c.data[i] == 'e' || c.data[i] == 'E') {
		exp = true
		i++
		if i < len(c.data) && (c.data[i] == '+' || c.data[i] == '-') {
			i++
		}
		if !digits() {
			return i, c.syntax(i)
		}
	}
	// Only an exponent or more digits than a float64's range has can
	// overflow: the common number costs no parse.
	if exp || i-at > 300 {
		text := c.data[at:i]
		if _, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64); err != nil {
			return at, &Error{Err: ErrNumber, Offset: at, Detail: quote.Name(string(text))}
		}
	}
	return i, nil
}
