package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAlert(t *testing.T) {
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
