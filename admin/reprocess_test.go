package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// reprocessJSON runs reprocess --json and decodes its report.
func reprocessJSON(t *testing.T, path string, args ...string) inbox.ReprocessReport {
	t.Helper()
	out, err := run(t, append([]string{"reprocess", "--db", path, "--json"}, args...)...)
	if err != nil {
		t.Fatalf("reprocess %v: %v", args, err)
	}
	var rep inbox.ReprocessReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reprocess --json: %v: %q", err, out)
	}
	return rep
}

func TestReprocessAfterTheEventSetChanges(t *testing.T) {
	path := newDB(t)
	received := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	fill(t, path, received, exploded("job_x"), exploded("job_x"))
	before := mustGet(t, path, "job_x")
	if before.Status != inbox.StatusParked || before.Reason != inbox.ReasonUnknownEvent {
		t.Fatalf("row = %+v, want parked unknown_event", before)
	}

	// Today's rules still do not know the event: the row stays.
	rep := reprocessJSON(t, path, "--reason", "unknown_event")
	if rep.Moved != 0 || rep.Parked[inbox.ReasonUnknownEvent] != 1 {
		t.Errorf("default events: report %+v, want 0 moved, 1 unknown_event", rep)
	}
	if got := mustGet(t, path, "job_x"); got.Status != inbox.StatusParked || !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("row changed although its reason did not: %+v", got)
	}

	out, err := run(t, "reprocess", "--db", path, "--reason", "unknown_event", "--event", "job.completed", "--event", "job.exploded")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "moved to new: 1 (0 folded") {
		t.Errorf("output:\n%s", out)
	}
	got := mustGet(t, path, "job_x")
	if got.Status != inbox.StatusNew || got.Reason != "" || got.Event != "job.exploded" {
		t.Errorf("row = %+v, want new job.exploded", got)
	}
	// The verification on record stays: the recorded delivery timestamp,
	// the receipt, the count, the bytes.
	if got.DeliveryTS != deliveryTS || !got.ReceivedAt.Equal(received) || got.Deliveries != 2 || got.SHA256 != before.SHA256 {
		t.Errorf("row = %+v, want delivery_ts %d, received %s, 2 deliveries, the same body", got, deliveryTS, received)
	}
}

// mergeDB holds, for job_fold, a new row and a parked too_large delivery of
// the same event and status beside it (delivered twice); for job_conflict,
// a new row and a job.exploded delivery beside it; for job_revive, a parked
// payload_too_large row and a job.exploded delivery beside it.
func mergeDB(t *testing.T) (path, bigFold, explodedConflict, explodedRevive string) {
	t.Helper()
	path = newDB(t)
	bigFold = `{"event":"job.completed","job_id":"job_fold","status":"COMPLETED","payload":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`
	explodedConflict, explodedRevive = exploded("job_conflict"), exploded("job_revive")
	at := time.Now().Add(-time.Hour)
	fill(t, path, at, completed("job_fold"), completed("job_conflict"),
		`{"event":"job.completed","job_id":"job_revive","status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/r"}}`)
	fill(t, path, at.Add(time.Minute), bigFold, bigFold, explodedConflict, explodedRevive)
	return path, bigFold, explodedConflict, explodedRevive
}

func TestReprocessMerges(t *testing.T) {
	path, bigFold, explodedConflict, explodedRevive := mergeDB(t)
	foldKey, conflictKey, reviveKey := inbox.BodyKey(sha(bigFold)), inbox.BodyKey(sha(explodedConflict)), inbox.BodyKey(sha(explodedRevive))
	if r := mustGet(t, path, foldKey); r.Reason != inbox.ReasonTooLarge || r.Deliveries != 2 {
		t.Fatalf("fold row = %+v, want too_large with 2 deliveries", r)
	}

	rep := reprocessJSON(t, path, "--all", "--event", "job.completed", "--event", "job.exploded")
	want := inbox.ReprocessReport{Moved: 2, Merged: 2, Parked: map[inbox.Reason]int{
		inbox.ReasonConflict: 1, inbox.ReasonPayloadTooLarge: 1}}
	if rep.Moved != want.Moved || rep.Merged != want.Merged || len(rep.Parked) != len(want.Parked) ||
		rep.Parked[inbox.ReasonConflict] != 1 || rep.Parked[inbox.ReasonPayloadTooLarge] != 1 {
		t.Errorf("report = %+v, want %+v", rep, want)
	}

	t.Run("same event and status: folded into the job's row", func(t *testing.T) {
		job := mustGet(t, path, "job_fold")
		if job.Status != inbox.StatusNew || job.Deliveries != 3 || string(job.Body) != completed("job_fold") {
			t.Errorf("job row = %+v, want new, 1+2 deliveries, its own body", job)
		}
		if _, err := get(t, path, foldKey); err == nil {
			t.Error("the folded row is still there")
		}
	})
	t.Run("different event: stays parked conflict", func(t *testing.T) {
		if r := mustGet(t, path, conflictKey); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonConflict {
			t.Errorf("row = %+v, want parked conflict", r)
		}
		if r := mustGet(t, path, "job_conflict"); r.Event != "job.completed" || r.Deliveries != 1 {
			t.Errorf("job row changed: %+v", r)
		}
	})
	t.Run("a parked job row takes the storable body over", func(t *testing.T) {
		job := mustGet(t, path, "job_revive")
		if job.Status != inbox.StatusNew || job.Event != "job.exploded" || string(job.Body) != explodedRevive ||
			job.Deliveries != 2 || job.ResultURL != "" {
			t.Errorf("job row = %+v, want new with the job.exploded body and 2 deliveries", job)
		}
		if _, err := get(t, path, reviveKey); err == nil {
			t.Error("the revived delivery's own row is still there")
		}
	})
}

// TestReprocessRekeys: a storable row parked beside a job row that is gone
// becomes the job's row.
func TestReprocessRekeys(t *testing.T) {
	path := newDB(t)
	fill(t, path, time.Now(), completed("job_1"), exploded("job_1"))
	// Gone as after the application handed it on and a purge: no command
	// marks a row done yet.
	if _, err := openTestWriter(t, path).Exec(`DELETE FROM events WHERE id = 'job_1'`); err != nil {
		t.Fatal(err)
	}
	rep := reprocessJSON(t, path, "--all", "--event", "job.exploded")
	if rep.Moved != 1 || rep.Merged != 0 {
		t.Errorf("report = %+v, want 1 moved, none merged", rep)
	}
	if r := mustGet(t, path, "job_1"); r.Status != inbox.StatusNew || r.Event != "job.exploded" || r.JobID != "job_1" {
		t.Errorf("row = %+v, want job_1 new job.exploded", r)
	}
}

func TestReprocessDryRunChangesNothing(t *testing.T) {
	path, _, _, _ := mergeDB(t)
	fill(t, path, time.Now(), "not json", exploded("job_new"))
	args := []string{"--all", "--event", "job.completed", "--event", "job.exploded"}
	before := snapshot(t, path)
	dry := reprocessJSON(t, path, append(args, "--dry-run")...)
	if after := snapshot(t, path); after != before {
		t.Fatalf("dry run changed the table:\n%s\nwant\n%s", after, before)
	}
	if !dry.DryRun || dry.Moved != 3 {
		t.Errorf("dry run report = %+v, want 3 moved", dry)
	}
	out, err := run(t, append([]string{"reprocess", "--db", path, "--dry-run"}, args...)...)
	if err != nil || !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("dry run output: %v\n%s", err, out)
	}
	real := reprocessJSON(t, path, args...)
	dry.DryRun = false
	if b, _ := json.Marshal(dry); string(b) != mustJSON(t, real) {
		t.Errorf("dry run report %s, real run %s", b, mustJSON(t, real))
	}
	if snapshot(t, path) == before {
		t.Error("the real run changed nothing")
	}
}

func TestReprocessRefuses(t *testing.T) {
	path := newDB(t)
	fill(t, path, time.Now(), completed("job_new"), exploded("job_parked"))
	before := snapshot(t, path)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "exactly one of"},
		{[]string{"--reason", "unknown_event", "--all"}, "exactly one of"},
		{[]string{"--reason", "unknown_event", "job_parked"}, "exactly one of"},
		{[]string{"--reason", "lost"}, "unknown reason"},
		{[]string{"job_new"}, "not parked"},
		{[]string{"job_parked", "job_404"}, "not found"},
		{[]string{"--all", "--max-body", "lots"}, "--max-body"},
	} {
		_, err := run(t, append([]string{"reprocess", "--db", path, "--event", "job.exploded"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
	if after := snapshot(t, path); after != before {
		t.Errorf("a refused run changed the table:\n%s\nwant\n%s", after, before)
	}
}

// TestReprocessHandlerFailed is a person's decision to try again rows the
// dispatcher gave up on: they become new, their attempts reset.
func TestReprocessHandlerFailed(t *testing.T) {
	path := newDB(t)
	fill(t, path, time.Now(), completed("job_1"), completed("job_2"))
	dispatched(t, path, time.Now(), map[string]inbox.Settlement{
		"job_1": {Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"},
		"job_2": {Fate: inbox.FatePark, Reason: inbox.ReasonHandlerRejected, Error: "exit status 65"},
	})
	out, err := run(t, "reprocess", "--db", path, "--reason", "handler_failed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "moved to new: 1") {
		t.Errorf("reprocess printed %q", out)
	}
	if e := mustGet(t, path, "job_1"); e.Status != inbox.StatusNew || e.Attempts != 0 || e.LastError != "" || e.LeaseOwner != "" {
		t.Errorf("job_1 = %+v, want new with no attempts, error or lease", e)
	}
	if e := mustGet(t, path, "job_2"); e.Status != inbox.StatusParked || e.Reason != inbox.ReasonHandlerRejected || e.Attempts != 1 {
		t.Errorf("job_2 = %+v, want still parked handler_rejected", e)
	}
	if _, err := run(t, "reprocess", "--db", path, "job_2"); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, path, "job_2"); e.Status != inbox.StatusNew || e.Attempts != 0 {
		t.Errorf("job_2 by id = %+v, want new", e)
	}
}
