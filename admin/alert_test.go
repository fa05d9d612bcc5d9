package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

func TestAlert(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	old := time.Now().Add(-30 * time.Hour)
	fill(t, path, old, exploded("job_a"), exploded("job_b"), "not json", completed("job_ok"))
	fill(t, path, time.Now(), exploded("job_c"))

	tests := []struct {
		args  []string
		code  int
		lines []string // each printed line, reason first
	}{
		{[]string{"--max-age", "48h"}, 0, nil},
		{[]string{"--min-count", "4"}, 0, nil},
		{[]string{"--reason", "missing_job_id"}, 0, nil},
		{nil, 1, []string{"unknown_event  2 parked longer than 24h  oldest received " + formatTime(old),
			"unparseable    1 parked longer than 24h  oldest received " + formatTime(old)}},
		{[]string{"--min-count", "3", "--max-age", "90m"}, 1, []string{"unknown_event  2 parked longer than 1h30m",
			"unparseable    1 parked longer than 1h30m"}},
		{[]string{"--reason", "unparseable", "--max-age", "1d"}, 1, []string{"unparseable  1 parked longer than 24h"}},
	}
	for _, tt := range tests {
		out, err := run(t, append([]string{"alert", "--db", path}, tt.args...)...)
		if code := exitCode(err); code != tt.code {
			t.Errorf("%v: exit %d (%v), want %d", tt.args, code, err, tt.code)
		}
		if err != nil && err.Error() != "" {
			t.Errorf("%v: error text %q, want none: the lines are the message", tt.args, err)
		}
		if tt.lines == nil {
			if out != "" {
				t.Errorf("%v: printed %q, want silence", tt.args, out)
			}
			continue
		}
		got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(got) != len(tt.lines) {
			t.Fatalf("%v: printed\n%s\nwant %d lines", tt.args, out, len(tt.lines))
		}
		for i, want := range tt.lines {
			if !strings.HasPrefix(got[i], want) {
				t.Errorf("%v: line %d = %q, want %q...", tt.args, i, got[i], want)
			}
		}
	}
}

func TestAlertCannotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing.db"), garbage} {
		out, err := run(t, "alert", "--db", path)
		if code := exitCode(err); code != 2 || err.Error() == "" || out != "" {
			t.Errorf("%s: exit %d, error %v, output %q; want 2 with an error and no output", filepath.Base(path), code, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("alert created the missing database")
	}
}

// everyHourDB holds rows received a month ago and parked in the middle of
// each of the hours back from now that hours lists (several in one hour
// when it is listed several times), and a new row parked nowhere.
func everyHourDB(t *testing.T, hours ...int) string {
	t.Helper()
	path := newDB(t)
	now := time.Now()
	var bodies []string
	for i := range hours {
		bodies = append(bodies, exploded(fmt.Sprintf("job_%d", i)))
	}
	fill(t, path, now.Add(-30*24*time.Hour), append(bodies, completed("job_new"))...)
	for i, h := range hours {
		parkAt(t, path, fmt.Sprintf("job_%d", i), now.Add(-time.Duration(h)*time.Hour-30*time.Minute))
	}
	return path
}

func hoursUpTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestAlertParkedEveryHour alerts when rows were parked in every hour of
// the window, by when they were parked, and stays silent when one hour
// had none, or fewer than --min-count.
func TestAlertParkedEveryHour(t *testing.T) {
	t.Parallel()
	day := everyHourDB(t, hoursUpTo(24)...)
	gap := everyHourDB(t, slices.Delete(hoursUpTo(26), 10, 11)...)
	twice := everyHourDB(t, append(hoursUpTo(25), hoursUpTo(25)...)...)
	for _, tt := range []struct {
		db   string
		args []string
		code int
		line string
	}{
		{day, []string{"--parked-every-hour", "24h"}, 1, "rows were parked in every hour of the last 24h: 24 rows, 1 to 1 an hour (inbox parked --per-hour)\n"},
		{day, []string{"--parked-every-hour", "1d"}, 1, "rows were parked in every hour of the last 24h: 24 rows, 1 to 1 an hour (inbox parked --per-hour)\n"},
		{day, []string{"--parked-every-hour", "12h", "--reason", "unknown_event"}, 1, "unknown_event rows were parked in every hour of the last 12h: 12 rows, 1 to 1 an hour (inbox parked --per-hour)\n"},
		{day, []string{"--parked-every-hour", "25h"}, 0, ""},
		{day, []string{"--parked-every-hour", "24h", "--min-count", "2"}, 0, ""},
		{day, []string{"--parked-every-hour", "24h", "--reason", "handler_failed"}, 0, ""},
		{gap, []string{"--parked-every-hour", "24h"}, 0, ""},
		{gap, []string{"--parked-every-hour", "10h"}, 1, "rows were parked in every hour of the last 10h: 10 rows, 1 to 1 an hour (inbox parked --per-hour)\n"},
		{twice, []string{"--parked-every-hour", "24h", "--min-count", "2"}, 1, "rows were parked in every hour of the last 24h: 48 rows, 2 to 2 an hour (inbox parked --per-hour)\n"},
	} {
		out, err := run(t, append([]string{"alert", "--db", tt.db}, tt.args...)...)
		if code := exitCode(err); code != tt.code || out != tt.line || (err != nil && err.Error() != "") {
			t.Errorf("%v: exit %d (%v), printed %q; want %d and %q", tt.args, code, err, out, tt.code, tt.line)
		}
	}

	out, err := run(t, "alert", "--db", day, "--parked-every-hour", "24h", "--json")
	if exitCode(err) != 1 {
		t.Fatalf("--json: exit %d", exitCode(err))
	}
	var got everyHour
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Hours != 24 || got.Rows != 24 || got.Fewest != 1 || got.Most != 1 || len(got.PerHour) != 24 {
		t.Errorf("--json = %s", out)
	}

	for _, args := range [][]string{{"--parked-every-hour", "90m"}, {"--parked-every-hour", "0h"}, {"--parked-every-hour", "30m"},
		{"--parked-every-hour", "32d"}, {"--parked-every-hour", "soon"}, {"--parked-every-hour", ""},
		{"--parked-every-hour", "24h", "--max-age", "1h"}} {
		out, err := run(t, append([]string{"alert", "--db", day}, args...)...)
		if exitCode(err) != 2 || out != "" || err.Error() == "" {
			t.Errorf("%v: exit %d (%v), printed %q; want 2 with an error", args, exitCode(err), err, out)
		}
	}
}

// TestAlertDownFor: alert --down-for exits 1 naming each destination
// recorded down for longer than it that a running dispatcher has, and 0
// once it is up again, or once no running dispatcher has it (its
// dispatcher stopped, leaving the record for the next); stats shows its
// state.
func TestAlertDownFor(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	ctx := context.Background()
	if err := s.RecordRouting(ctx, "host:1", []inbox.Route{{Name: "billing"}, {Name: "audit"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDown(ctx, "billing", time.Now().Add(-time.Minute), "Post \"http://app.internal\": connection refused"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDown(ctx, "audit", time.Now().Add(-time.Second), "HTTP 503"); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "alert", "--db", path, "--down-for", "30s")
	if code := exitCode(err); code != 1 || !strings.HasPrefix(out, "down billing") || strings.Contains(out, "audit") || strings.Contains(out, "app.internal") {
		t.Errorf("exit %d, printed %q: want 1, billing alone, no host", code, out)
	}
	out, err = run(t, "alert", "--db", path, "--down-for", "30s", "--json")
	var f downFinding
	if exitCode(err) != 1 || json.Unmarshal([]byte(out), &f) != nil || f.Destination != "billing" || f.Seconds < 60 {
		t.Errorf("--json: %q (%v), want billing down a minute", out, err)
	}
	if _, err := run(t, "alert", "--db", path, "--down-for", "30s", "--max-age", "1h"); exitCode(err) != 2 {
		t.Errorf("--down-for with --max-age: %v, want exit 2", err)
	}
	out, _ = run(t, "stats", "--db", path)
	if !strings.Contains(out, "down for 1m") {
		t.Errorf("stats:\n%s\nwant billing down for 1m", out)
	}
	if err := s.RecordRouting(ctx, "host:1", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "alert", "--db", path, "--down-for", "30s"); err != nil || out != "" {
		t.Errorf("its dispatcher stopped while down: exit %d, printed %q, want 0: no one probes it", exitCode(err), out)
	}
	if err := s.RecordRouting(ctx, "host:2", []inbox.Route{{Name: "billing"}, {Name: "audit"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "alert", "--db", path, "--down-for", "30s"); err != nil || out != "" {
		t.Errorf("paused while down: exit %d, printed %q, want 0: no one probes it", exitCode(err), out)
	}
	for _, name := range []string{"billing", "audit"} {
		if err := s.SetDown(ctx, name, time.Time{}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(t, "alert", "--db", path, "--down-for", "1s"); err != nil || out != "" {
		t.Errorf("up again: exit %d, printed %q, want 0 and silence", exitCode(err), out)
	}
}
