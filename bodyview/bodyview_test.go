package bodyview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// plain shows every rune as it is.
func plain(s string) (string, int) {
	_, n := utf8.DecodeRuneInString(s)
	return s[:n], n
}

// TestJSONIndentsAsTheStandardLibrary checks JSON against json.Indent on
// bodies small enough to be shown whole.
func TestJSONIndentsAsTheStandardLibrary(t *testing.T) {
	for _, body := range []string{
		`{}`, `[]`, `1`, `"a"`, `  {"a" : [ ] , "b":{ }}  `, "[1,\r\n2]\n", `{"a":[1,2,{"b":"c,:[]{}\"\\"}],"d":null}`,
		`[[[[]]],[[1]],{"x":{"y":[true,false]}}]`, `"\u202e"`, ` 12.5e3 `, `{"k":"é ü 漢"}`,
	} {
		v, ok := JSON([]byte(body), Limit, plain)
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(body), "", "  "); err != nil {
			t.Fatal(err)
		}
		if !ok || v.Kind != KindJSON || v.Text != want.String() || v.Left != 0 {
			t.Errorf("JSON(%q) = %q, %v (left %d), want %q", body, v.Text, ok, v.Left, want.String())
		}
	}
	if _, ok := JSON([]byte(`{"a":`), Limit, plain); ok {
		t.Error("JSON took a body that is not JSON")
	}
}

// hostile are bodies built to grow when rendered: nested arrays, nested
// objects, both mixed, a wide flat array, a long string, controls.
func hostile() map[string][]byte {
	const depth = 9000
	mixed := strings.Repeat(`{"a":[`, depth/2) + strings.Repeat(`]}`, depth/2)
	return map[string][]byte{
		"nested arrays":  []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth)),
		"nested objects": []byte(strings.Repeat(`{"k":`, depth) + "1" + strings.Repeat("}", depth)),
		"nested filled":  []byte(strings.Repeat("[1,", depth) + "1" + strings.Repeat("]", depth)),
		"mixed":          []byte(mixed),
		"wide flat":      []byte("[" + strings.Repeat("1,", 1<<19) + "1]"),
		"long string":    []byte(`"` + strings.Repeat("\u202e", 1<<18) + `"`),
		"controls":       bytes.Repeat([]byte{0x1b}, 1<<20),
	}
}

// TestRenderIsBounded renders each hostile body and checks that the output
// stays within the limit, says how much it left out, and is quick.
func TestRenderIsBounded(t *testing.T) {
	esc := func(s string) (string, int) {
		r, n := utf8.DecodeRuneInString(s)
		if r < 0x20 || r == 0x202e {
			return `\u202e`, n
		}
		return s[:n], n
	}
	for name, body := range hostile() {
		start := time.Now()
		v, ok := JSON(body, Limit, esc)
		if !ok {
			v = Text(body, Limit, esc)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: took %v", name, took)
		}
		if len(v.Text) > Limit {
			t.Errorf("%s: %d bytes shown, more than %d", name, len(v.Text), Limit)
		}
		if v.Left <= 0 || v.Left >= int64(len(body)) {
			t.Errorf("%s: %d of %d bytes left out", name, v.Left, len(body))
		}
	}
	if v := Hex(bytes.Repeat([]byte{0xff}, 1<<20), Limit); len(v.Text) > Limit || v.Left != 1<<20-int64(Limit/79*16) {
		t.Errorf("hex: %d bytes shown, %d left out", len(v.Text), v.Left)
	}
}

// TestCutNeverSplitsAnEscape fills the output in the middle of escapes.
func TestCutNeverSplitsAnEscape(t *testing.T) {
	esc := func(s string) (string, int) { return `\x1b`, 1 }
	v := Text(bytes.Repeat([]byte{0x1b}, 10), 10, esc)
	if v.Text != `\x1b\x1b` || v.Left != 8 {
		t.Errorf("Text = %q, left %d", v.Text, v.Left)
	}
}

// TestRunes checks Runes counts a byte that is not UTF-8 as a rune.
func TestRunes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 2, "ab"}, {"é\xffü", 2, "é\xff"}, {"ab", 5, "ab"}, {"", 1, ""}} {
		if got := Runes(c.s, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
