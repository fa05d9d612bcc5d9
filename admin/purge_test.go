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
	for _, args := range [][]string{nil, {"--older-than", "0s"}, {"--older-than", "-3d"}, {"--dry-run"},
		{"--older-than", "30m"}, {"--older-than", "59m"}} {
		if _, err := run(t, append([]string{"purge", "--db", path}, args...)...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if snapshot(t, path) != before {
		t.Error("a refused purge changed the table")
	}
}

// purgeJSON runs purge --json and decodes what it printed.
func purgeJSON(t *testing.T, path string, args ...string) (inbox.PurgeReport, bool) {
	t.Helper()
	out, err := run(t, append([]string{"purge", "--db", path, "--json"}, args...)...)
	if err != nil {
		t.Fatalf("purge %v: %v", args, err)
	}
	var got struct {
		inbox.PurgeReport
		DryRun bool `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("purge --json: %v: %q", err, out)
	}
	return got.PurgeReport, got.DryRun
}

// TestPurgeCountsFromTheLastDelivery: a row received long ago that a
// redelivery landed on recently is kept, so the next redelivery is still a
// counted repeat.
func TestPurgeCountsFromTheLastDelivery(t *testing.T) {
	path := newDB(t)
	fill(t, path, time.Now().Add(-40*24*time.Hour), completed("job_r"), completed("job_old"))
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done'`); err != nil {
		t.Fatal(err)
	}
	fill(t, path, time.Now().Add(-24*time.Hour), completed("job_r"))
	if rep, _ := purgeJSON(t, path, "--older-than", "30d"); rep.Deleted[inbox.StatusDone] != 1 {
		t.Errorf("purged %+v, want job_old alone", rep)
	}
	if r, err := get(t, path, "job_r"); err != nil || r.Deliveries != 2 {
		t.Errorf("job_r = %+v, %v; want it kept, with 2 deliveries", r, err)
	}
}

// TestPurgeKeepsDoneRowsWithParkedBeside: a done row goes only together
// with the parked rows of its job, so reprocessing them can never hand the
// job on again as new.
func TestPurgeKeepsDoneRowsWithParkedBeside(t *testing.T) {
	path := newDB(t)
	old := time.Now().Add(-40 * 24 * time.Hour)
	fill(t, path, old, completed("job_d"), exploded("job_d"), completed("job_y"))
	fill(t, path, time.Now(), exploded("job_y"))
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done' WHERE status = 'new'`); err != nil {
		t.Fatal(err)
	}

	dry, _ := purgeJSON(t, path, "--older-than", "30d", "--dry-run")
	rep, _ := purgeJSON(t, path, "--older-than", "30d")
	want := inbox.PurgeReport{Deleted: map[inbox.Status]int64{inbox.StatusDone: 0, inbox.StatusIgnored: 0}, KeptDone: 2}
	sameJSON(t, "purge", rep, want)
	sameJSON(t, "purge --dry-run", dry, want)
	out, err := run(t, "purge", "--db", path, "--older-than", "30d", "--dry-run")
	if err != nil || !strings.HasSuffix(out, "done rows kept while parked rows of their job stay: 2\n") {
		t.Errorf("purge output: %v\n%s", err, out)
	}

	reprocessJSON(t, path, "--all", "--event", "job.completed", "--event", "job.exploded")
	if r := mustGet(t, path, "job_d"); r.Status != inbox.StatusDone || r.Event != "job.completed" {
		t.Errorf("job_d = %+v, want still done with its job.completed body", r)
	}

	dry, _ = purgeJSON(t, path, "--older-than", "30d", "--include-parked", "--dry-run")
	rep, _ = purgeJSON(t, path, "--older-than", "30d", "--include-parked")
	want = inbox.PurgeReport{Deleted: map[inbox.Status]int64{inbox.StatusDone: 1, inbox.StatusIgnored: 0, inbox.StatusParked: 1}, KeptDone: 1}
	sameJSON(t, "purge --include-parked", rep, want)
	sameJSON(t, "purge --include-parked --dry-run", dry, want)
	left := ids(t, path)
	wantLeft := map[inbox.Status][]string{inbox.StatusDone: {"job_y"}, inbox.StatusParked: {inbox.BodyKey(sha(exploded("job_y")))}}
	if mustJSON(t, left) != mustJSON(t, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}
