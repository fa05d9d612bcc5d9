package admin

import (
	"encoding/json"
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
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "ID SOURCE REASON EVENT SIZE RECEIVED DELIVERIES" {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "job_c" || f[1] != "sume" || f[2] != "unknown_event" || f[3] != "job.exploded" {
		t.Errorf("first row = %q", lines[1])
	}

	for _, args := range [][]string{{"--reason", "lost"}, {"--group-by", "event"}, {"--since", "-1h"}} {
		if _, err := run(t, append([]string{"parked", "--db", path}, args...)...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
