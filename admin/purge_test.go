package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// purgeDB holds rows of every status received 40 days ago, and a done and
// an ignored row received now.
func purgeDB(t *testing.T) string {
	t.Helper()
	path := newDB(t)
	old := time.Now().Add(-40 * 24 * time.Hour)
	fill(t, path, old, completed("job_old_new"), completed("job_old_done"), "not json",
		`{"event":"webhook.test","request_id":"req_old"}`)
	fill(t, path, time.Now(), completed("job_done"), `{"event":"webhook.test","request_id":"req_new"}`)
	// No command marks a row done yet; the application will.
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done' WHERE id IN ('job_old_done', 'job_done')`); err != nil {
		t.Fatal(err)
	}
	return path
}

// ids lists the rows left, by status.
func ids(t *testing.T, path string) map[inbox.Status][]string {
	t.Helper()
	s := openReadOnly(t, path)
	rows, err := s.List(t.Context(), inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[inbox.Status][]string{}
	for _, r := range rows {
		out[r.Status] = append(out[r.Status], r.ID)
	}
	return out
}

func TestPurge(t *testing.T) {
	path := purgeDB(t)
	oldIgnored := inbox.BodyKey(sha(`{"event":"webhook.test","request_id":"req_old"}`))
	newIgnored := inbox.BodyKey(sha(`{"event":"webhook.test","request_id":"req_new"}`))
	oldParked := inbox.BodyKey(sha("not json"))

	before := snapshot(t, path)
	out, err := run(t, "purge", "--db", path, "--older-than", "30d", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, path); after != before {
		t.Fatalf("dry run changed the table")
	}
	if want := "STATUS   WOULD DELETE\ndone     1\nignored  1\n"; out != want {
		t.Errorf("dry run output:\n%s\nwant\n%s", out, want)
	}

	out, err = run(t, "purge", "--db", path, "--older-than", "30d", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Deleted map[inbox.Status]int64 `json:"deleted"`
		DryRun  bool                   `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Deleted[inbox.StatusDone] != 1 || got.Deleted[inbox.StatusIgnored] != 1 || len(got.Deleted) != 2 || got.DryRun {
		t.Errorf("purge --json = %s", out)
	}
	left := ids(t, path)
	wantLeft := map[inbox.Status][]string{
		inbox.StatusNew:     {"job_old_new"},
		inbox.StatusDone:    {"job_done"},
		inbox.StatusParked:  {oldParked},
		inbox.StatusIgnored: {newIgnored},
	}
	if mustJSON(t, left) != mustJSON(t, wantLeft) {
		t.Errorf("left %v, want %v (%s purged)", left, wantLeft, oldIgnored)
	}

	before = snapshot(t, path)
	out, err = run(t, "purge", "--db", path, "--older-than", "30d", "--include-parked", "--dry-run")
	if err != nil || !strings.Contains(out, "parked   1") || snapshot(t, path) != before {
		t.Errorf("--include-parked --dry-run: %v\n%s", err, out)
	}
	if _, err := run(t, "purge", "--db", path, "--older-than", "30d", "--include-parked"); err != nil {
		t.Fatal(err)
	}
	left = ids(t, path)
	if len(left[inbox.StatusParked]) != 0 || len(left[inbox.StatusNew]) != 1 {
		t.Errorf("after --include-parked: %v, want the new row and no parked one", left)
	}
}

func TestPurgeNeedsRetention(t *testing.T) {
	path := purgeDB(t)
	before := snapshot(t, path)
	for _, args := range [][]string{nil, {"--older-than", "0s"}, {"--older-than", "-3d"}, {"--dry-run"}} {
		if _, err := run(t, append([]string{"purge", "--db", path}, args...)...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if snapshot(t, path) != before {
		t.Error("a refused purge changed the table")
	}
}
