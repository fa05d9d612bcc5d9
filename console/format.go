package console

import (
	"html/template"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"inbox/bodyview"
	"inbox/inbox"
)

// maxCell is how many characters a list cell shows of a field that is not
// an id (a 10 KB event name); the row page has it whole.
const maxCell = 72

var funcs = template.FuncMap{
	"time": formatTime,
	"ago":  ago,
	"n":    thousands,
	"text": printable,
	"cell": cell,
	"parkedLink": func(r inbox.Reason) string {
		return rowsLink(inbox.Filter{Status: inbox.StatusParked, Reason: r})
	},
	"destinationLink": func(name string) string { return rowsLink(inbox.Filter{Destination: name}) },
	"cellLink":        cellLink,
	"sentence":        sentence,
}

// sentence is s, a phrase inbox show prints in parentheses, as the start
// of a sentence: its first letter in capitals.
func sentence(s string) string {
	if s == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// formatTime is t as the CLI prints it, in UTC; "-" when it is zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago is how long before now t was, to the second: "3h12m5s ago"; "-"
// when t is zero.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(now.Sub(t)) + " ago"
}

// age is d to the second, "0s" when not above 0.
func age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	for i := len(s) - 3; i > start; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cell is s as a list cell shows it: printable, and cut to maxCell
// characters with "…". Only the runes it can show are escaped, so a long
// field costs no more than a short one.
func cell(s string) string {
	p := printable(bodyview.Runes(s, maxCell+1))
	if utf8.RuneCountInString(p) <= maxCell {
		return p
	}
	return string([]rune(p)[:maxCell-1]) + "…"
}
