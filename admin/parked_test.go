package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// parkedDB holds three unknown_event rows (two received two days ago), one
// unparseable row two days old, one missing_job_id row received now, and a
// new and an ignored row that parked must not show.
func parkedDB(t *testing.T) (path string, old, recent time.Time) {
	t.Helper()
	path = newDB(t)
	old, recent = time.Now().Add(-48*time.Hour).Truncate(time.Millisecond), time.Now().Truncate(time.Millisecond)
	fill(t, path, old, exploded("job_a"), exploded("job_b"), "not json")
	fill(t, path, recent, exploded("job_c"), `{"event":"job.completed"}`, completed("job_ok"),
		`{"event":"webhook.test","request_id":"req_1"}`)
	return path, old, recent
}

// jsonLines decodes one JSON object per line.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var vals []T
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		vals = append(vals, v)
	}
	return vals
}

func TestParkedGroupByReason(t *testing.T) {
	t.Parallel()
	path, old, recent := parkedDB(t)
	out, err := run(t, "parked", "--db", path, "--group-by", "reason", "--json")
	if err != nil {
		t.Fatal(err)
	}
	got := jsonLines[inbox.ReasonCount](t, out)
	want := []inbox.ReasonCount{
		{Reason: inbox.ReasonUnknownEvent, Count: 3, Oldest: old, Newest: recent},
		{Reason: inbox.ReasonMissingJobID, Count: 1, Oldest: recent, Newest: recent},
		{Reason: inbox.ReasonUnparseable, Count: 1, Oldest: old, Newest: old},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d groups, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i].Reason != want[i].Reason || got[i].Count != want[i].Count ||
			!got[i].Oldest.Equal(want[i].Oldest) || !got[i].Newest.Equal(want[i].Newest) {
			t.Errorf("group %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The JSON keys scripts rely on.
	var raw map[string]any
	json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &raw)
	for _, k := range []string{"reason", "count", "oldest", "newest"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("group JSON has no %q: %s", k, out)
		}
	}

	out, err = run(t, "parked", "--db", path, "--group-by", "reason")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "REASON") {
		t.Fatalf("table:\n%s", out)
	}
	// Aligned: every row's count starts under COUNT.
	col := strings.Index(lines[0], "COUNT")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned under COUNT:\n%s", out)
		}
	}
	if !strings.Contains(lines[1], "unknown_event") || !strings.Contains(lines[1], " 3 ") {
		t.Errorf("first row = %q, want unknown_event with 3", lines[1])
	}
}

func TestParkedRows(t *testing.T) {
	t.Parallel()
	path, _, _ := parkedDB(t)
	tests := []struct {
		args []string
		want []string // ids, newest first
	}{
		{nil, []string{"job_c", inbox.BodyKey(sha(`{"event":"job.completed"}`)), "job_a", "job_b", inbox.BodyKey(sha("not json"))}},
		{[]string{"--since", "24h"}, []string{"job_c", inbox.BodyKey(sha(`{"event":"job.completed"}`))}},
		{[]string{"--reason", "unknown_event"}, []string{"job_c", "job_a", "job_b"}},
		{[]string{"--reason", "unknown_event", "--since", "1d"}, []string{"job_c"}},
	}
	for _, tt := range tests {
		out, err := run(t, append([]string{"parked", "--db", path, "--json"}, tt.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		rows := jsonLines[inbox.Event](t, out)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
			if r.Status != inbox.StatusParked || r.Reason == "" || r.Size == 0 || r.Deliveries != 1 || r.ReceivedAt.IsZero() {
				t.Errorf("%v: row %+v", tt.args, r)
			}
		}
		if strings.Join(ids, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%v: ids = %v, want %v", tt.args, ids, tt.want)
		}
	}

	out, err := run(t, "parked", "--db", path, "--reason", "unknown_event")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "ID SOURCE REASON EVENT JOB STATUS SIZE RECEIVED DELIVERIES" {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 8 || f[0] != "job_c" || f[1] != "sume" || f[2] != "unknown_event" || f[3] != "job.exploded" {
		t.Errorf("first row = %q", lines[1])
	}

	for _, args := range [][]string{{"--reason", "lost"}, {"--group-by", "event"}, {"--since", "-1h"}} {
		if _, err := run(t, append([]string{"parked", "--db", path}, args...)...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// parkAt sets when the row id was parked, as the dispatcher or the
// receiver records it.
func parkAt(t *testing.T, path, id string, at time.Time) {
	t.Helper()
	res, err := openTestWriter(t, path).Exec(`UPDATE events SET updated_at = ? WHERE id = ? AND status = 'parked'`, at.UnixMilli(), id)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("park %s: no parked row", id)
	}
}

// inOneHour runs check with the current clock hour until the hour did not
// change while it ran (once more at most), then reports its problems: the
// chart's buckets are clock hours.
func inOneHour(t *testing.T, check func(hour time.Time) []string) {
	t.Helper()
	for try := 0; ; try++ {
		hour := time.Now().UTC().Truncate(time.Hour)
		problems := check(hour)
		if time.Now().UTC().Truncate(time.Hour).Equal(hour) || try == 1 {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
	}
}

// TestParkedPerHour charts the rows parked per clock hour, by when they
// were parked (a row the dispatcher parked today was received days ago).
func TestParkedPerHour(t *testing.T) {
	t.Parallel()
	inOneHour(t, func(hour time.Time) (problems []string) {
		bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
		path := newDB(t)
		longAgo := time.Now().Add(-72 * time.Hour)
		fill(t, path, longAgo, exploded("job_h2"), exploded("job_h1a"), exploded("job_h1b"), exploded("job_h1c"),
			exploded("job_now"), exploded("job_49h"), completed("job_failed"), completed("job_new"))
		if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'parked', reason = 'handler_failed' WHERE id = 'job_failed'`); err != nil {
			t.Fatal(err)
		}
		for id, at := range map[string]time.Time{"job_h2": hour.Add(-90 * time.Minute), "job_h1a": hour.Add(-30 * time.Minute),
			"job_h1b": hour.Add(-time.Millisecond), "job_h1c": hour.Add(-time.Hour), "job_failed": hour.Add(-59 * time.Minute),
			"job_now": hour, "job_49h": hour.Add(-48 * time.Hour)} {
			parkAt(t, path, id, at)
		}

		perHour := func(args ...string) []inbox.HourCount {
			out, err := run(t, append([]string{"parked", "--db", path, "--per-hour", "--json"}, args...)...)
			if err != nil {
				t.Fatalf("parked --per-hour %v: %v", args, err)
			}
			return jsonLines[inbox.HourCount](t, out)
		}
		check := func(what string, got []inbox.HourCount, hours int, want map[int]int64) {
			if len(got) != hours {
				bad("%s: %d hours, want %d", what, len(got), hours)
				return
			}
			for i, h := range got {
				ago := hours - 1 - i
				if !h.Start.Equal(hour.Add(-time.Duration(ago)*time.Hour)) || h.Count != want[ago] {
					bad("%s: hour %d ago = %+v, want %s with %d", what, ago, h, hour.Add(-time.Duration(ago)*time.Hour), want[ago])
				}
			}
		}
		check("default", perHour(), 48, map[int]int64{0: 1, 1: 4, 2: 1})
		check("--since 24h", perHour("--since", "24h"), 24, map[int]int64{0: 1, 1: 4, 2: 1})
		check("--since 3d", perHour("--since", "3d"), 72, map[int]int64{0: 1, 1: 4, 2: 1, 48: 1})
		check("--reason handler_failed", perHour("--reason", "handler_failed"), 48, map[int]int64{1: 1})
		check("--source gh", perHour("--source", "gh"), 48, nil)

		out, err := run(t, "parked", "--db", path, "--per-hour")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 50 || !strings.HasPrefix(lines[0], "HOUR (UTC)") {
			bad("chart:\n%s", out)
			return
		}
		for ago, want := range map[int]string{0: hour.Format("2006-01-02T15:04Z") + " (so far)  1       " + strings.Repeat("#", 12),
			1: hour.Add(-time.Hour).Format("2006-01-02T15:04Z") + "           4       " + strings.Repeat("#", 50),
			3: hour.Add(-3*time.Hour).Format("2006-01-02T15:04Z") + "           0"} {
			if got := strings.TrimRight(lines[48-ago], " "); got != want {
				bad("chart line %d hours ago = %q, want %q", ago, got, want)
			}
		}
		if want := "6 parked in the last 48 hours; rows in 3 of them"; lines[49] != want {
			bad("chart summary %q, want %q", lines[49], want)
		}
		return problems
	})
}

func TestParkedPerHourErrors(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	for _, args := range [][]string{{"--group-by", "reason"}, {"--since", "32d"}, {"--reason", "lost"}, {"--source", "a/b"}} {
		if _, err := run(t, append([]string{"parked", "--db", path, "--per-hour"}, args...)...); err == nil {
			t.Errorf("--per-hour %v: accepted", args)
		}
	}
}
