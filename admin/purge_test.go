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
	t.Parallel()
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
	if want := "STATUS     WOULD DELETE\ndone       1\nignored    1\ndismissed  0\n" +
		"rows kept as unfinished work (new, or parked by the dispatcher and not named with --reason): 1\n"; out != want {
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
	if got.Deleted[inbox.StatusDone] != 1 || got.Deleted[inbox.StatusIgnored] != 1 || len(got.Deleted) != 3 || got.DryRun {
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
	if err != nil || !strings.Contains(out, "\nparked         1\n  unparseable  1\n") || strings.Contains(out, "unknown_event") || snapshot(t, path) != before {
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

// TestPurgeNeedsRetention: a retention under 7 days is refused, in one
// line that says the floor, and changes nothing.
func TestPurgeNeedsRetention(t *testing.T) {
	path := purgeDB(t)
	before := snapshot(t, path)
	for _, args := range [][]string{{"--older-than", "0s"}, {"--older-than", "-3d"}, {"--older-than", "30m"},
		{"--older-than", "1h"}, {"--older-than", "1d"}, {"--older-than", "6d"}, {"--older-than", "167h59m"},
		{"--older-than", "6d", "--dry-run"}, {"--older-than", ""}, {"--older-than", "soon"}} {
		_, err := run(t, append([]string{"purge", "--db", path}, args...)...)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || (args[1] != "-3d" && args[1] != "soon" && !strings.Contains(msg, "at least 7d")) {
			t.Errorf("%v: error %q, want one line naming the 7d floor", args, msg)
		}
	}
	t.Setenv("INBOX_PURGE_OLDER_THAN", "2d")
	if _, err := run(t, "purge", "--db", path); err == nil || !strings.Contains(err.Error(), "at least 7d") {
		t.Errorf("INBOX_PURGE_OLDER_THAN=2d: err = %v, want refused", err)
	}
	if snapshot(t, path) != before {
		t.Error("a refused purge changed the table")
	}
	if _, err := run(t, "purge", "--db", path, "--older-than", "7d", "--dry-run"); err != nil {
		t.Errorf("--older-than 7d: %v, want accepted", err)
	}
}

// TestPurgeDefaultRetention: without --older-than, purge keeps 90 days.
func TestPurgeDefaultRetention(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now().Add(-91*24*time.Hour), completed("job_91d"), `{"event":"webhook.test","request_id":"req_91d"}`)
	fill(t, path, time.Now().Add(-89*24*time.Hour), completed("job_89d"), `{"event":"webhook.test","request_id":"req_89d"}`)
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done' WHERE status = 'new'`); err != nil {
		t.Fatal(err)
	}
	dry, _ := purgeJSON(t, path, "--dry-run")
	rep, _ := purgeJSON(t, path)
	want := inbox.PurgeReport{Deleted: map[inbox.Status]int64{inbox.StatusDone: 1, inbox.StatusIgnored: 1, inbox.StatusDismissed: 0}, DeletedParked: map[inbox.Reason]int64{}}
	sameJSON(t, "purge --dry-run", dry, want)
	sameJSON(t, "purge", rep, want)
	left := ids(t, path)
	wantLeft := map[inbox.Status][]string{inbox.StatusDone: {"job_89d"}, inbox.StatusIgnored: {inbox.BodyKey(sha(`{"event":"webhook.test","request_id":"req_89d"}`))}}
	if mustJSON(t, left) != mustJSON(t, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}

// TestPurgeSparesUnfinishedWork: --include-parked deletes what was parked
// on receipt, never the rows the dispatcher parked (work the application
// never finished) until --reason names them, and never new rows, waiting
// or in flight, however old.
func TestPurgeSparesUnfinishedWork(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	old := time.Now().Add(-100 * 24 * time.Hour)
	fill(t, path, old, completed("job_failed"), completed("job_rejected"), completed("job_waiting"), completed("job_flight"),
		exploded("job_poison"), "not json")
	db := openTestWriter(t, path)
	for _, q := range []string{
		`UPDATE events SET status = 'parked', reason = 'handler_failed', attempts = 8 WHERE id = 'job_failed'`,
		`UPDATE events SET status = 'parked', reason = 'handler_rejected', attempts = 1 WHERE id = 'job_rejected'`,
		`UPDATE events SET attempts = 1, lease_owner = 'host:1:x', lease_until = 1, next_attempt_at = 1 WHERE id = 'job_flight'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	status := func() map[string]string {
		out := map[string]string{}
		s := openReadOnly(t, path)
		rows, err := s.List(t.Context(), inbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out[r.ID] = string(r.Status) + " " + string(r.Reason)
		}
		s.Close()
		return out
	}

	rep, _ := purgeJSON(t, path, "--include-parked", "--older-than", "7d")
	if rep.Deleted[inbox.StatusParked] != 2 || rep.DeletedParked[inbox.ReasonUnknownEvent] != 1 || rep.DeletedParked[inbox.ReasonUnparseable] != 1 ||
		rep.DeletedParked[inbox.ReasonHandlerFailed] != 0 || rep.KeptUnfinished != 4 {
		t.Errorf("--include-parked: %+v, want the two poison rows deleted and 4 kept", rep)
	}
	want := map[string]string{"job_failed": "parked handler_failed", "job_rejected": "parked handler_rejected",
		"job_waiting": "new ", "job_flight": "new "}
	sameJSON(t, "left after --include-parked", status(), want)
	out, err := run(t, "purge", "--db", path, "--include-parked", "--dry-run")
	if err != nil || !strings.Contains(out, "rows kept as unfinished work (new, or parked by the dispatcher and not named with --reason): 4\n") {
		t.Errorf("purge --include-parked --dry-run: %v\n%s", err, out)
	}

	out, err = run(t, "purge", "--db", path, "--reason", "handler_failed", "--dry-run")
	if err != nil || !strings.Contains(out, "\nparked            1\n  handler_failed  1\n") {
		t.Errorf("purge --reason handler_failed --dry-run: %v\n%s", err, out)
	}
	rep, _ = purgeJSON(t, path, "--reason", "handler_failed")
	if rep.DeletedParked[inbox.ReasonHandlerFailed] != 1 || rep.KeptUnfinished != 3 {
		t.Errorf("--reason handler_failed: %+v, want it deleted and 3 kept", rep)
	}
	delete(want, "job_failed")
	sameJSON(t, "left after --reason handler_failed", status(), want)
	if _, err := run(t, "purge", "--db", path, "--reason", "lost"); err == nil {
		t.Error("--reason lost: accepted")
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
	t.Parallel()
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
	t.Parallel()
	path := newDB(t)
	old := time.Now().Add(-40 * 24 * time.Hour)
	fill(t, path, old, completed("job_d"), exploded("job_d"), completed("job_y"))
	fill(t, path, time.Now(), exploded("job_y"))
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done' WHERE status = 'new'`); err != nil {
		t.Fatal(err)
	}

	dry, _ := purgeJSON(t, path, "--older-than", "30d", "--dry-run")
	rep, _ := purgeJSON(t, path, "--older-than", "30d")
	want := inbox.PurgeReport{Deleted: map[inbox.Status]int64{inbox.StatusDone: 0, inbox.StatusIgnored: 0, inbox.StatusDismissed: 0}, KeptDone: 2}
	sameJSON(t, "purge", rep, want)
	sameJSON(t, "purge --dry-run", dry, want)
	out, err := run(t, "purge", "--db", path, "--older-than", "30d", "--dry-run")
	if err != nil || !strings.HasSuffix(out, "done rows kept while parked or dismissed rows of their job stay: 2\n") {
		t.Errorf("purge output: %v\n%s", err, out)
	}

	reprocessJSON(t, path, "--all", "--event", "job.completed", "--event", "job.exploded")
	if r := mustGet(t, path, "job_d"); r.Status != inbox.StatusDone || r.Event != "job.completed" {
		t.Errorf("job_d = %+v, want still done with its job.completed body", r)
	}

	dry, _ = purgeJSON(t, path, "--older-than", "30d", "--include-parked", "--dry-run")
	rep, _ = purgeJSON(t, path, "--older-than", "30d", "--include-parked")
	want = inbox.PurgeReport{Deleted: map[inbox.Status]int64{inbox.StatusDone: 1, inbox.StatusIgnored: 0, inbox.StatusDismissed: 0, inbox.StatusParked: 1},
		DeletedParked: map[inbox.Reason]int64{}, KeptDone: 1}
	for _, r := range inbox.ReceiptReasons() {
		want.DeletedParked[r] = 0
	}
	want.DeletedParked[inbox.ReasonConflict] = 1
	sameJSON(t, "purge --include-parked", rep, want)
	sameJSON(t, "purge --include-parked --dry-run", dry, want)
	left := ids(t, path)
	wantLeft := map[inbox.Status][]string{inbox.StatusDone: {"job_y"}, inbox.StatusParked: {inbox.BodyKey(sha(exploded("job_y")))}}
	if mustJSON(t, left) != mustJSON(t, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}
