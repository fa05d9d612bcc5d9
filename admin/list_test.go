package admin

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// runStderr runs the admin commands as the binary does and returns what
// they printed on stdout and on stderr.
func runStderr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "inbox", Commands: Commands(testOpen, testBackup), Writer: &out, ErrWriter: &errOut,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.RunContext(context.Background(), append([]string{"inbox"}, args...))
	return out.String(), errOut.String(), err
}

// hostile are event names a signed body (or a header) can carry, each
// with what a table must show instead.
var hostile = []struct{ event, shown string }{
	{"job.\x1b[2J\x1b]0;pwned\x07done", `job.\x1b[2J\x1b]0;pwned\x07done`},
	{"job.\u202edetelpmoc", `job.\u202edetelpmoc`},
	{"a\u2066b\u2069c\u200ed\u200fe\u202af\u202bg\u202ch\u202di\u2067j\u2068k", `a\u2066b\u2069c\u200ed\u200fe\u202af\u202bg\u202ch\u202di\u2067j\u2068k`},
	{"c1\u009b31m\u0085del\x7f", `c1\u009b31m\u0085del\x7f`},
	{"tab\there\r\nline", `tab\x09here\x0d\x0aline`},
	{"bad\xff\xfeutf8\xc3", `bad\xff\xfeutf8\xc3`},
	{"ok é 日本", "ok é 日本"},
}

// hostileDB holds one Sume row whose event is 10 KB long, and one row of
// source gh per hostile event (an event from a header may be any bytes),
// half of them parked.
func hostileDB(t *testing.T) string {
	t.Helper()
	path := newDB(t)
	fill(t, path, time.Now().Add(-time.Minute), fmt.Sprintf(`{"event":%q,"job_id":"job_long"}`, strings.Repeat("e", 10<<10)))
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	for i, h := range hostile {
		rules := inbox.Rules{}
		if i%2 == 1 {
			rules.Events = []string{"push"}
		}
		d := keyed("gh", fmt.Sprintf("d%d", i), h.event, []byte(`{}`), deliveryTS, rules)
		if _, err := s.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkTerminalSafe fails when out holds a byte or rune a terminal acts
// on, or a line wider than max.
func checkTerminalSafe(t *testing.T, what, out string, limit int) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 reached the terminal: %q", what, out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) ||
			(r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f {
			t.Errorf("%s: %U reached the terminal:\n%q", what, r, out)
			return
		}
	}
	widest := 0
	for line := range strings.SplitSeq(out, "\n") {
		widest = max(widest, utf8.RuneCountInString(line))
	}
	t.Logf("%s: widest line %d characters", what, widest)
	if widest > limit {
		t.Errorf("%s: a line is %d characters wide, want at most %d", what, widest, limit)
	}
}

// TestTablesEscapeAndCut: list and parked escape every control, bidi and
// invalid byte of a stored field as show does, fit the table to 120
// columns (--wide: cut a 10 KB event name to 72), and --json keeps every
// field exact.
func TestTablesEscapeAndCut(t *testing.T) {
	t.Parallel()
	path := hostileDB(t)
	const widest = 300 // every column of list at its cut width
	for _, args := range [][]string{{"list"}, {"parked"}, {"list", "--status", "parked"}, {"parked", "--source", "gh"}} {
		out, err := run(t, append(args, "--db", path)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		checkTerminalSafe(t, strings.Join(args, " "), out, tableWidth)
		if out, err = run(t, append(args, "--db", path, "--wide")...); err != nil {
			t.Fatalf("%v --wide: %v", args, err)
		}
		checkTerminalSafe(t, strings.Join(args, " ")+" --wide", out, widest)
	}
	out, err := run(t, "list", "--db", path, "--source", "gh", "--wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hostile {
		if !strings.Contains(out, "  "+h.shown+"  ") {
			t.Errorf("list shows no %q:\n%s", h.shown, out)
		}
	}
	out, err = run(t, "list", "--db", path, "--source", "sume", "--wide")
	if err != nil {
		t.Fatal(err)
	}
	if cut := strings.Repeat("e", maxCell-1) + cutMark + "  "; !strings.Contains(out, cut) {
		t.Errorf("the 10 KB event is not cut to %d characters:\n%s", maxCell, out)
	}

	out, err = run(t, "list", "--db", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]bool{}
	for _, e := range jsonLines[inbox.Event](t, out) {
		events[e.Event] = true
	}
	if !events[strings.Repeat("e", 10<<10)] {
		t.Error("list --json cut the long event")
	}
	for _, h := range hostile {
		// Invalid UTF-8 has no JSON form: encoding/json writes U+FFFD.
		if utf8.ValidString(h.event) && !events[h.event] {
			t.Errorf("list --json lacks event %q", h.event)
		}
	}
}

// TestEscapeControls checks the escaper show and every table share.
func TestEscapeControls(t *testing.T) {
	t.Parallel()
	for _, h := range hostile {
		if got := escapeControls(h.event, ""); got != h.shown {
			t.Errorf("escapeControls(%q) = %q, want %q", h.event, got, h.shown)
		}
	}
	if got := escapeControls("a\tb\nc\rd", "\n\t"); got != "a\tb\nc\\x0dd" {
		t.Errorf("keep: %q", got)
	}
	for _, tt := range []struct{ in, want string }{
		{strings.Repeat("x", maxCell), strings.Repeat("x", maxCell)},
		{strings.Repeat("x", maxCell+1), strings.Repeat("x", maxCell-1) + cutMark},
		{strings.Repeat("日", 100), strings.Repeat("日", maxCell-1) + cutMark},
		// An escape is never cut in two: \x1b would not fit whole.
		{strings.Repeat("x", maxCell-3) + "\x1b" + "tail", strings.Repeat("x", maxCell-3) + cutMark},
		{"sha256:" + strings.Repeat("f", 64), "sha256:" + strings.Repeat("f", 64)},
	} {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOtherTablesEscape: redeliver's lines, with a job id from a parked
// body, are escaped too.
func TestOtherTablesEscape(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now(), exploded("job_\u202eevil\u2066"))
	out, err := run(t, "redeliver", "--db", path, "--dry-run", "--reason", "unknown_event")
	if err != nil {
		t.Fatal(err)
	}
	if want := "would redeliver job_\\u202eevil\\u2066\n"; out != want {
		t.Errorf("redeliver printed %q, want %q", out, want)
	}
	for _, args := range [][]string{{"parked", "--group-by", "reason"}, {"stats"}, {"alert", "--max-age", "0s"}} {
		out, _ := run(t, append(args, "--db", path)...)
		checkTerminalSafe(t, strings.Join(args, " "), out, 200)
	}
}

// TestListLimit: list says on stderr when it stopped at --limit, never on
// stdout (a script reads that), and --limit 0 lists every row.
func TestListLimit(t *testing.T) {
	path := newDB(t)
	bodies := make([]string, 105)
	for i := range bodies {
		bodies[i] = completed(fmt.Sprintf("job_%03d", i))
	}
	fill(t, path, time.Now(), bodies...)
	fill(t, path, time.Now(), exploded("job_parked"))

	for _, tt := range []struct {
		args   []string
		rows   int
		notice string
	}{
		{nil, 100, "100 of 106 rows; --limit 0 for all\n"},
		{[]string{"--json"}, 100, "100 of 106 rows; --limit 0 for all\n"},
		{[]string{"--status", "new", "--json"}, 100, "100 of 105 rows; --limit 0 for all\n"},
		{[]string{"--limit", "0", "--json"}, 106, ""},
		{[]string{"--status", "new", "--limit", "0"}, 105, ""},
		{[]string{"--limit", "106"}, 106, ""},
		{[]string{"--limit", "105"}, 105, "105 of 106 rows; --limit 0 for all\n"},
		{[]string{"--status", "parked"}, 1, ""},
	} {
		out, errOut, err := runStderr(t, append([]string{"list", "--db", path}, tt.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		lines := strings.Count(out, "\n")
		if !strings.Contains(strings.Join(tt.args, " "), "--json") {
			lines-- // the header
		}
		if lines != tt.rows || errOut != tt.notice {
			t.Errorf("%v: %d rows, stderr %q; want %d and %q", tt.args, lines, errOut, tt.rows, tt.notice)
		}
	}
	t.Setenv("INBOX_LIMIT", "0")
	if out, errOut, err := runStderr(t, "list", "--db", path, "--json"); err != nil || strings.Count(out, "\n") != 106 || errOut != "" {
		t.Errorf("INBOX_LIMIT=0: %v, %d rows, stderr %q", err, strings.Count(out, "\n"), errOut)
	}
	if _, err := run(t, "list", "--db", path, "--limit", "-1"); err == nil {
		t.Error("--limit -1: accepted")
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 2345: "2,345", 100000: "100,000",
		1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestListColumnsAreFields checks list's columns are fields of
// inbox.EventFields with a heading, and the table's heading is as it was.
func TestListColumnsAreFields(t *testing.T) {
	t.Parallel()
	fields := inbox.EventFields()
	for _, name := range listColumns {
		i := slices.IndexFunc(fields, func(f inbox.Field) bool { return f.Name == name })
		if i < 0 || fields[i].Column == "" {
			t.Errorf("list column %s: no field of inbox.EventFields with a Column", name)
		}
	}
	if want := "ID\tSOURCE\tSTATUS\tREASON\tEVENT\tJOB STATUS\tSIZE\tDELIVERIES\tRECEIVED"; listHead != want {
		t.Errorf("list's heading is %q, want %q", listHead, want)
	}
}
