package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"inbox/bodyview"
	"inbox/inbox"
)

type rowPage struct {
	Title  string
	Event  inbox.Event
	Fields []field
	Body   shownBody
	// Response is the answer body saved with the row; Shown is false when
	// there is none.
	Response shownBody
	// Pairings is where the row stands with each destination it is for.
	Pairings []pairing
}

// pairing is a line of the row page's destinations, its text printable.
type pairing struct {
	Destination, Status, Lease, LastError string
	Attempts                              int64
	NextAttemptAt, UpdatedAt, DoneAt      time.Time
}

type field struct{ Name, Value string }

// shownBody is a body as the row page shows it.
type shownBody struct {
	Shown bool
	Kind  string // "JSON", "text" or "bytes (hex)"
	Text  string
	Cut   int64 // bytes left out; 0 when it is whole
}

func (c *Console) row(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		c.problem(w, http.StatusBadRequest, "Which row? The row page takes ?id=.", nil)
		return
	}
	ctx, cancel := c.read(r)
	defer cancel()
	e, err := c.store.Get(ctx, id)
	if errors.Is(err, inbox.ErrNotFound) {
		c.problem(w, http.StatusNotFound, "No row with id "+printable(id)+".", nil)
		return
	}
	if err != nil {
		c.storeFailed(w, err)
		return
	}
	pairs, err := c.store.Deliveries(ctx, e.ID)
	if err != nil {
		c.storeFailed(w, err)
		return
	}
	p := rowPage{Title: "Row " + printable(e.ID), Event: e, Body: showBody(e.Body)}
	for _, d := range pairs {
		pr := pairing{Destination: d.Destination, Status: string(d.Status), Attempts: d.Attempts, LastError: printable(d.LastError),
			NextAttemptAt: d.NextAttemptAt, UpdatedAt: d.UpdatedAt, DoneAt: d.DoneAt}
		if d.Reason != "" {
			pr.Status += " (" + string(d.Reason) + ")"
		}
		if d.LeaseOwner != "" {
			pr.Lease = printable(d.LeaseOwner) + " until " + formatTime(d.LeaseUntil)
		}
		p.Pairings = append(p.Pairings, pr)
	}
	if e.Response != nil {
		p.Response = showBody(e.Response)
	}
	for _, f := range inbox.EventFields() {
		p.Fields = append(p.Fields, field{Name: f.Name, Value: printable(f.Text(e))})
	}
	c.render(w, http.StatusOK, "row", p)
}

// showBody returns b as the row page shows it: indented when it is JSON,
// as text when it is UTF-8 (characters that could reorder or hide the
// text escaped), as a hex dump otherwise; the first bodyview.Limit bytes
// of that.
func showBody(b []byte) shownBody {
	esc := func(s string) (string, int) { return escapeRune(s, "\t\n\r") }
	v, ok := bodyview.JSON(b, bodyview.Limit, esc)
	switch {
	case ok:
	case utf8.Valid(b):
		v = bodyview.Text(b, bodyview.Limit, esc)
	default:
		v = bodyview.Hex(b, bodyview.Limit)
	}
	return shownBody{Shown: true, Kind: v.Kind, Text: v.Text, Cut: v.Left}
}

// printable returns s with every rune that is not graphic (controls,
// bidi overrides, invalid UTF-8) written as a Go escape, so what the page
// shows is what the row holds; html/template then escapes the markup.
func printable(s string) string { return escapeOdd(s, "") }

// printableText is printable for text of several lines: tabs and line
// ends are kept.
func printableText(s string) string { return escapeOdd(s, "\t\n\r") }

func escapeOdd(s, keep string) string {
	isOdd := func(r rune) bool { return !unicode.IsGraphic(r) && !strings.ContainsRune(keep, r) }
	if utf8.ValidString(s) && strings.IndexFunc(s, isOdd) < 0 {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		piece, n := escapeRune(s, keep)
		b.WriteString(piece)
		s = s[n:]
	}
	return b.String()
}

// escapeRune returns the first rune of s as escapeOdd shows it, and its
// length in s.
func escapeRune(s, keep string) (string, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n <= 1 || !unicode.IsGraphic(r) && !strings.ContainsRune(keep, r) {
		q := strconv.QuoteToASCII(s[:n])
		return q[1 : len(q)-1], n
	}
	return s[:n], n
}
