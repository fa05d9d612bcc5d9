package admin

import (
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

func TestAlertMaxParked(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now(), exploded("job_a"), exploded("job_b"), "not json", completed("job_ok"))
	for _, tt := range []struct {
		args []string
		code int
		line string // the line printed, its start; "" for silence
	}{
		{[]string{"--max-parked", "3"}, 0, ""},
		{[]string{"--max-parked", "2"}, 1, "3 rows parked now, more than 2  unknown_event 2, unparseable 1  (inbox parked --group-by reason)"},
		{[]string{"--max-parked", "0", "--reason", "unparseable"}, 1, "1 unparseable rows parked now, more than 0"},
		{[]string{"--max-parked", "0", "--reason", "missing_job_id"}, 0, ""},
		{[]string{"--max-parked", "-1"}, 2, ""},
		{[]string{"--max-parked", "1", "--max-age", "1h"}, 2, ""},
		{[]string{"--max-parked", "1", "--parked-every-hour", "24h"}, 2, ""},
		{[]string{"--max-parked", "1", "--repeat", "0s"}, 2, ""},
		{[]string{"--max-parked", "1", "--repeat", "soon"}, 2, ""},
	} {
		out, err := run(t, append([]string{"alert", "--db", path}, tt.args...)...)
		if code := exitCode(err); code != tt.code || !strings.HasPrefix(out, tt.line) || (tt.line == "") != (out == "") {
			t.Errorf("%v: exit %d (%v), printed %q; want %d and %q", tt.args, code, err, out, tt.code, tt.line)
		}
	}
}

// TestAlertRule checks what a run says of each finding against what was
// last reported: opened, grew (doubled), repeated (--repeat after the last
// report), resolved (gone), or nothing.
func TestAlertRule(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	was := func(key string, count int64, reported time.Duration) inbox.Alert {
		return inbox.Alert{Scope: "s", Finding: key, OpenedAt: now.Add(-48 * time.Hour), Count: count, ReportedAt: now.Add(-reported), Rev: 3}
	}
	prev := []inbox.Alert{
		was("same", 4, time.Hour),
		was("doubled", 4, time.Hour),
		was("grown by half", 4, time.Hour),
		was("due", 4, 25*time.Hour),
		was("gone", 7, time.Hour),
	}
	found := []finding{{key: "new", count: 1}, {key: "same", count: 4}, {key: "doubled", count: 8},
		{key: "grown by half", count: 6}, {key: "due", count: 3}, {key: "new", count: 9}}
	changes, swaps, swapOf := compare("s", found, prev, now, 24*time.Hour)
	want := []string{"opened new", "unchanged same", "grew doubled", "unchanged grown by half", "repeated due", "resolved gone"}
	var got []string
	for _, ch := range changes {
		got = append(got, ch.kind+" "+ch.key)
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if len(swaps) != 4 || len(swapOf) != 4 {
		t.Fatalf("%d swaps, want one for each change reported", len(swaps))
	}
	for i, s := range swaps {
		ch := changes[swapOf[i]]
		switch ch.kind {
		case opened:
			if s.Old != nil || s.New.Count != 1 || !s.New.OpenedAt.Equal(now) || s.New.Rev != 1 {
				t.Errorf("opened: swap %+v %+v", s.Old, s.New)
			}
		case grew, repeated:
			if s.Old.Rev != 3 || s.New.Rev != 4 || s.New.Count != ch.count || !s.New.OpenedAt.Equal(ch.was.OpenedAt) || !s.New.ReportedAt.Equal(now) {
				t.Errorf("%s: swap %+v -> %+v, want the count now, reported now, opened as before, rev 4", ch.kind, s.Old, s.New)
			}
		case resolved:
			if s.New != nil || s.Old.Finding != "gone" {
				t.Errorf("resolved: swap %+v %+v, want the row deleted", s.Old, s.New)
			}
		}
		if back := inverse(s); back.Old == s.Old && back.New == s.New {
			t.Errorf("inverse of %v is itself", s)
		}
	}
}
