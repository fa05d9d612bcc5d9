package inbox

import "encoding/json"

// sumeFields are what classification reads of a Sume body: the top-level
// fields by their exact names, a repeated key keeping its last value, as
// decoding into a map does. A field that is absent, or not a string, is "".
type sumeFields struct {
	event, status, jobID, resultURL string
	// errCode and errResultURL are the error object's code and result_url;
	// "" when error is absent, null or not an object.
	errCode, errResultURL string
	// payloadNull: payload is absent or null.
	payloadNull bool
}

// maxDepth is how deeply arrays and objects may nest, encoding/json's
// limit: a body nested deeper is not JSON that encoding/json reads, so it is
// unparseable here too.
const maxDepth = 10000

// readSume reads body in one pass, checking that it is one JSON object
// (and nothing but whitespace around it) as encoding/json would, and
// decoding only the strings classification needs. ok is false when the
// body is not a JSON object.
func readSume(body []byte) (f sumeFields, ok bool) {
	r := jsonReader{b: body}
	r.space()
	if !r.next('{') {
		return f, false // null, another value, or not JSON: not an object
	}
	f.payloadNull = true
	ok = r.members(1, func(key int) bool {
		var valid bool
		switch key {
		case keyEvent:
			f.event, valid = r.stringOrSkip(1)
		case keyStatus:
			f.status, valid = r.stringOrSkip(1)
		case keyJobID:
			f.jobID, valid = r.stringOrSkip(1)
		case keyResultURL:
			f.resultURL, valid = r.stringOrSkip(1)
		case keyPayload:
			start := r.i
			valid = r.value(1)
			f.payloadNull = string(r.b[start:r.i]) == "null"
		case keyError:
			// The last error value decides, as a map keeps it.
			f.errCode, f.errResultURL = "", ""
			if !r.next('{') {
				return r.value(1)
			}
			return r.members(2, func(key int) bool {
				var valid bool
				switch key {
				case keyCode:
					f.errCode, valid = r.stringOrSkip(2)
				case keyResultURL:
					f.errResultURL, valid = r.stringOrSkip(2)
				default:
					valid = r.value(2)
				}
				return valid
			})
		default:
			valid = r.value(1)
		}
		return valid
	})
	if !ok {
		return sumeFields{}, false
	}
	r.space()
	if r.i != len(r.b) {
		return sumeFields{}, false
	}
	return f, true
}

// The keys readSume looks for, as members reports them.
const (
	keyOther = iota
	keyEvent
	keyStatus
	keyJobID
	keyResultURL
	keyPayload
	keyError
	keyCode
)

// keyOf returns which of the keys readSume looks for name is.
func keyOf(name []byte) int {
	switch string(name) { // compared, not converted: no allocation
	case "event":
		return keyEvent
	case "status":
		return keyStatus
	case "job_id":
		return keyJobID
	case "result_url":
		return keyResultURL
	case "payload":
		return keyPayload
	case "error":
		return keyError
	case "code":
		return keyCode
	}
	return keyOther
}

// jsonReader checks JSON syntax as encoding/json's scanner does, reading
// b from i on.
type jsonReader struct {
	b []byte
	i int
}

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next consumes c when it is the next byte.
func (r *jsonReader) next(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// members reads an object's members up to and including its '}', the '{'
// already read, the object at depth. For each member it reads the key and
// the colon, then calls member with which key it is; member reads the
// value and reports whether it was valid.
func (r *jsonReader) members(depth int, member func(key int) bool) bool {
	if depth > maxDepth {
		return false
	}
	r.space()
	if r.next('}') {
		return true
	}
	for {
		r.space()
		raw, plain, ok := r.str()
		if !ok {
			return false
		}
		r.space()
		if !r.next(':') {
			return false
		}
		r.space()
		key := keyOther
		switch {
		case plain:
			key = keyOf(raw[1 : len(raw)-1])
		case hasEscape(raw):
			// "job\u005fid" is job_id too; a key with other bytes
			// beyond ASCII and no escape is none of ours.
			key = keyOf([]byte(unquote(raw)))
		}
		if !member(key) {
			return false
		}
		r.space()
		if r.next(',') {
			continue
		}
		return r.next('}')
	}
}

func hasEscape(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' {
			return true
		}
	}
	return false
}

// stringOrSkip reads a value inside a container at depth: its text when
// it is a string, "" when it is any other valid value.
func (r *jsonReader) stringOrSkip(depth int) (string, bool) {
	if r.i < len(r.b) && r.b[r.i] == '"' {
		raw, plain, ok := r.str()
		if !ok {
			return "", false
		}
		if plain {
			return string(raw[1 : len(raw)-1]), true
		}
		return unquote(raw), true
	}
	return "", r.value(depth)
}

// unquote decodes a string literal str has checked, as encoding/json does
// (bytes that are not UTF-8 and lone surrogates become U+FFFD). Only the
// rare literal with escapes or bytes beyond ASCII comes here.
func unquote(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// plainByte marks the bytes a string holds as they are: not a quote, a
// backslash, a control character or beyond ASCII.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string literal at i: raw is it, quotes included; plain
// reports that it has no escape and no byte beyond ASCII, so its bytes are
// its text.
func (r *jsonReader) str() (raw []byte, plain, ok bool) {
	start := r.i
	if !r.next('"') {
		return nil, false, false
	}
	plain = true
	b := r.b
	i := r.i
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return nil, false, false
		}
		switch c := b[i]; {
		case c == '"':
			r.i = i + 1
			return b[start:r.i], plain, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return nil, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				i += 6
			default:
				return nil, false, false
			}
		default: // beyond ASCII: kept, as encoding/json keeps any byte
			plain = false
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// value reads any JSON value at i, inside a container at depth.
func (r *jsonReader) value(depth int) bool {
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '"':
		_, _, ok := r.str()
		return ok
	case c == '{':
		r.i++
		return r.members(depth+1, func(int) bool { return r.value(depth + 1) })
	case c == '[':
		r.i++
		return r.elements(depth + 1)
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	}
	return false
}

// elements reads an array's elements up to and including its ']', the '['
// already read, the array at depth.
func (r *jsonReader) elements(depth int) bool {
	if depth > maxDepth {
		return false
	}
	r.space()
	if r.next(']') {
		return true
	}
	for {
		r.space()
		if !r.value(depth) {
			return false
		}
		r.space()
		if r.next(',') {
			continue
		}
		return r.next(']')
	}
}

func (r *jsonReader) literal(word string) bool {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return false
	}
	r.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *jsonReader) number() bool {
	r.next('-')
	switch {
	case r.next('0'):
	case r.i < len(r.b) && '1' <= r.b[r.i] && r.b[r.i] <= '9':
		r.digits()
	default:
		return false
	}
	if r.next('.') && r.digits() == 0 {
		return false
	}
	if r.next('e') || r.next('E') {
		if !r.next('+') {
			r.next('-')
		}
		if r.digits() == 0 {
			return false
		}
	}
	return true
}

// digits reads decimal digits and returns how many.
func (r *jsonReader) digits() int {
	start := r.i
	for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}
