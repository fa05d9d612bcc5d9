// Package bodyview renders a stored body for a person to read: JSON
// indented, UTF-8 text with the characters that could drive a terminal or
// reorder a page escaped, other bytes as a hex dump. What it renders is
// bounded twice: its output stops at a limit, and so does its work, so a
// body built to grow when rendered (9,000 nested arrays indent to 162 MB)
// costs no more than the limit. inbox show and the console's row page
// render bodies through it.
package bodyview

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limit is how much of a rendered body is shown: 256 KiB of text.
const Limit = 256 << 10

// The kinds of a View.
const (
	KindJSON = "JSON"
	KindText = "text"
	KindHex  = "bytes (hex)"
)

// Escape returns the first rune of s as it is shown (itself, or an
// escape such as \x1b), and the rune's length in s.
type Escape func(s string) (string, int)

// View is a body as it is shown.
type View struct {
	Kind string // KindJSON, KindText or KindHex
	Text string // at most the limit's bytes
	// Left is how many bytes of the body Text leaves out; 0 when Text
	// shows it whole.
	Left int64
}

// JSON returns body indented two spaces a level, as json.Indent indents
// it, with esc applied to the strings and literals, cut at limit bytes.
// ok is false when body is not JSON. The work stops where the output
// does: the indentation a deep nesting asks for is written only as far as
// the limit.
func JSON(body []byte, limit int, esc Escape) (v View, ok bool) {
	if !json.Valid(body) {
		return View{}, false
	}
	o := &out{limit: limit, esc: esc}
	pos := indent(o, body)
	return View{Kind: KindJSON, Text: string(o.b), Left: int64(len(body) - pos)}, true
}

// Text returns body, which should be UTF-8, with esc applied to each
// rune, cut at limit bytes.
func Text(body []byte, limit int, esc Escape) View {
	o := &out{limit: limit, esc: esc}
	pos := o.escaped(body)
	return View{Kind: KindText, Text: string(o.b), Left: int64(len(body) - pos)}
}

// Hex returns a hex dump of body (hex.Dump's), of as many whole lines as
// fit in limit bytes.
func Hex(body []byte, limit int) View {
	// A line of hex.Dump is 79 bytes: 16 of the body each.
	n := min(len(body), limit/79*16)
	return View{Kind: KindHex, Text: hex.Dump(body[:n]), Left: int64(len(body) - n)}
}

// Show returns body as inbox show and the console's row page show it:
// indented when it is JSON, as text when it is UTF-8 (tabs and line feeds
// kept, every other rune Printable escapes escaped), as a hex dump
// otherwise; the first Limit bytes of that. An empty body is KindText
// with no text.
func Show(body []byte) View {
	esc := func(s string) (string, int) { return EscapeRune(s, "\n\t") }
	if v, ok := JSON(body, Limit, esc); ok {
		return v
	}
	if utf8.Valid(body) {
		return Text(body, Limit, esc)
	}
	return Hex(body, Limit)
}

// Printable returns s with every rune a terminal could act on, or that
// could reorder or hide a page's text, written as a Go-style escape,
// except those in keep: C0 and C1 controls and DEL (escape sequences,
// carriage returns, backspaces), format characters such as the bidi
// overrides and isolates (U+202A..U+202E, U+2066..U+2069) and marks
// (U+200E, U+200F), line and paragraph separators, spaces other than
// U+0020, unassigned and private-use code points, and each byte of
// invalid UTF-8 (as \xNN, so bytes that decode to nothing are shown
// rather than replaced). So what is shown is what is stored, in every
// output that shows a stored text.
func Printable(s, keep string) string {
	odd := func(r rune) bool { return !unicode.IsPrint(r) && !strings.ContainsRune(keep, r) }
	if utf8.ValidString(s) && strings.IndexFunc(s, odd) < 0 {
		return s
	}
	var b strings.Builder
	for s != "" {
		piece, n := EscapeRune(s, keep)
		b.WriteString(piece)
		s = s[n:]
	}
	return b.String()
}

// EscapeRune returns the first rune of s as Printable shows it, and its
// length in s.
func EscapeRune(s, keep string) (string, int) {
	r, n := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && n <= 1:
		return fmt.Sprintf(`\x%02x`, s[0]), 1
	case unicode.IsPrint(r) || strings.ContainsRune(keep, r):
		return s[:n], n
	case r < utf8.RuneSelf:
		return fmt.Sprintf(`\x%02x`, r), n
	case r <= 0xFFFF:
		return fmt.Sprintf(`\u%04x`, r), n
	default:
		return fmt.Sprintf(`\U%08x`, r), n
	}
}

// Runes is s up to its n-th rune, a byte that is not UTF-8 counted as a
// rune (as utf8.DecodeRuneInString decodes it): what a cell of n
// characters at most can show of s, found without reading the rest.
func Runes(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// out is a rendering's output, which takes at most limit bytes.
type out struct {
	b     []byte
	limit int
	esc   Escape
	full  bool
}

// raw appends s as it is, or as much of it as fits.
func (o *out) raw(s string) {
	if o.full {
		return
	}
	if room := o.limit - len(o.b); len(s) > room {
		o.b, o.full = append(o.b, s[:room]...), true
		return
	}
	o.b = append(o.b, s...)
}

// escaped appends p with esc applied to each rune and returns how many of
// p's bytes it took: all of them unless the output filled. An escape is
// never cut in two.
func (o *out) escaped(p []byte) int {
	s := string(p)
	taken := 0
	for !o.full && taken < len(s) {
		piece, n := o.esc(s[taken:])
		if len(piece) > o.limit-len(o.b) {
			o.full = true
			break
		}
		o.b = append(o.b, piece...)
		taken += n
	}
	return taken
}

// newline appends a line end and depth levels of indentation, as far as
// they fit.
func (o *out) newline(depth int) {
	o.raw("\n")
	for ; depth > 0 && !o.full; depth-- {
		o.raw("  ")
	}
}

// indent writes src, valid JSON, to o indented as json.Indent(dst, src,
// "", "  ") does, and returns how many bytes of src it wrote before o
// filled (len(src) when it did not). Strings, numbers and literals go
// through o's escape; the punctuation and indentation it adds do not.
func indent(o *out, src []byte) int {
	var (
		needIndent  bool
		depth, nest int
		inString    bool
		escapeNext  bool
		started     bool
		start       = -1 // where the pending run of src begins
		pos         int
		flush       = func(i int) {
			if start >= 0 {
				pos = start + o.escaped(src[start:i])
				start = -1
			}
		}
	)
	for i := 0; i < len(src) && !o.full; i++ {
		c := src[i]
		if inString {
			switch {
			case escapeNext:
				escapeNext = false
			case c == '\\':
				escapeNext = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			if nest == 0 && started {
				// Trailing space after the value is kept, as
				// json.Indent keeps it.
				if start < 0 {
					start = i
				}
				continue
			}
			flush(i)
			pos = i + 1
			continue
		}
		started = true
		if needIndent && c != '}' && c != ']' {
			flush(i)
			needIndent = false
			depth++
			o.newline(depth)
		}
		switch c {
		case '{', '[', ',', ':', '}', ']':
			flush(i)
			if o.full {
				break
			}
			switch c {
			case '{', '[':
				needIndent = true
				nest++
				o.raw(string(c))
			case ',':
				o.raw(",")
				o.newline(depth)
			case ':':
				o.raw(": ")
			default:
				nest--
				if needIndent {
					needIndent = false
				} else {
					depth--
					o.newline(depth)
				}
				o.raw(string(c))
			}
			if !o.full {
				pos = i + 1
			}
		default:
			if start < 0 {
				start = i
			}
			if c == '"' {
				inString = true
			}
		}
	}
	if !o.full {
		flush(len(src))
	}
	return pos
}
