// Package quote renders client-supplied strings for error messages, cut
// short so that a hostile one cannot blow up a response or a log.
package quote

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Most is how many bytes of a client's string an error message shows.
const Most = 64

// Name quotes name for an error message: in full up to Most bytes,
// otherwise its first Most bytes followed by how long it was
// ("aaaa..."...(3000000 bytes)). It costs O(Most), whatever len(name).
func Name(name string) string {
	if len(name) > Most {
		return fmt.Sprintf("%q...(%d bytes)", name[:Most], len(name))
	}
	return fmt.Sprintf("%q", name)
}

// Cut shortens s to at most n bytes, on a rune boundary, marking a cut
// with "...". For text that is not a name: a validator's or a client's
// message, shown unquoted.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// MaxMessage bounds what Message returns, quoted pieces cut or not.
const MaxMessage = 512

// Message bounds an error message that someone else wrote and that may
// quote a client's input in full: each quoted piece (between double
// quotes, as %q writes them, or single quotes) longer than Most bytes is
// cut to Most bytes and followed by its length, and the whole is cut to
// MaxMessage bytes, also followed by its length. A message without a long
// quoted piece and within MaxMessage is returned as it is. Linear in
// len(msg).
func Message(msg string) string {
	if len(msg) <= Most {
		return msg // no piece of it can be longer
	}
	var b strings.Builder
	for rest := msg; rest != ""; {
		i := strings.IndexAny(rest, `"'`)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i+1])
		q := rest[i]
		rest = rest[i+1:]
		end := closing(rest, q)
		if end < 0 {
			end = len(rest) // unclosed: the rest is the quoted piece
		}
		piece := rest[:end]
		if len(piece) > Most {
			b.WriteString(piece[:Most])
			b.WriteString("..." + string(q) + "(" + strconv.Itoa(len(piece)) + " bytes)")
			if end < len(rest) {
				end++ // the closing quote, already written
			}
			rest = rest[end:]
			continue
		}
		b.WriteString(piece)
		rest = rest[end:]
		if rest != "" {
			b.WriteByte(rest[0])
			rest = rest[1:]
		}
		if b.Len() > 2*MaxMessage {
			break
		}
	}
	return cap512(b.String())
}

// closing returns the index of the quote q that closes a piece of s, or
// -1; a double-quoted piece may escape its quote with a backslash.
func closing(s string, q byte) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if q == '"' {
				i++
			}
		case q:
			return i
		}
	}
	return -1
}

func cap512(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	return msg[:MaxMessage] + "...(" + strconv.Itoa(len(msg)) + " bytes)"
}
