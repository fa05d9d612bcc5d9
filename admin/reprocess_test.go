package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
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
	t.Parallel()
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
	if !strings.Contains(out, "moved to new: 1\nfolded into the job's new or done row: 0\n") {
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

func payloadTooLarge(jobID string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/r"}}`, jobID)
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
	fill(t, path, at, completed("job_fold"), completed("job_conflict"), payloadTooLarge("job_revive"))
	fill(t, path, at.Add(time.Minute), bigFold, bigFold, explodedConflict, explodedRevive)
	return path, bigFold, explodedConflict, explodedRevive
}

func TestReprocessMerges(t *testing.T) {
	t.Parallel()
	path, bigFold, explodedConflict, explodedRevive := mergeDB(t)
	foldKey, conflictKey, reviveKey := inbox.BodyKey(sha(bigFold)), inbox.BodyKey(sha(explodedConflict)), inbox.BodyKey(sha(explodedRevive))
	if r := mustGet(t, path, foldKey); r.Reason != inbox.ReasonTooLarge || r.Deliveries != 2 {
		t.Fatalf("fold row = %+v, want too_large with 2 deliveries", r)
	}

	rep := reprocessJSON(t, path, "--all", "--event", "job.completed", "--event", "job.exploded")
	want := inbox.ReprocessReport{Moved: 1, Folded: 1, Parked: map[inbox.Reason]int{
		inbox.ReasonConflict: 1, inbox.ReasonPayloadTooLarge: 1}}
	sameJSON(t, "report", rep, want)

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
	t.Run("a parked job row is taken over, its body kept beside", func(t *testing.T) {
		job := mustGet(t, path, "job_revive")
		if job.Status != inbox.StatusNew || job.Event != "job.exploded" || string(job.Body) != explodedRevive ||
			job.Deliveries != 1 || job.ResultURL != "" {
			t.Errorf("job row = %+v, want new with the job.exploded body and its 1 delivery", job)
		}
		if _, err := get(t, path, reviveKey); err == nil {
			t.Error("the storable row is still there under its own key")
		}
		aside := mustGet(t, path, inbox.BodyKey(sha(payloadTooLarge("job_revive"))))
		if aside.Status != inbox.StatusParked || aside.Reason != inbox.ReasonPayloadTooLarge ||
			string(aside.Body) != payloadTooLarge("job_revive") || aside.ResultURL == "" || aside.JobID != "job_revive" {
			t.Errorf("the job row's own body = %+v, want it parked payload_too_large under its sha256", aside)
		}
	})
}

// TestReprocessRekeys: a storable row parked beside a job row that is gone
// becomes the job's row.
func TestReprocessRekeys(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	fill(t, path, time.Now(), completed("job_1"), exploded("job_1"))
	// Gone as after the application handed it on and a purge: no command
	// marks a row done yet.
	if _, err := openTestWriter(t, path).Exec(`DELETE FROM events WHERE id = 'job_1'`); err != nil {
		t.Fatal(err)
	}
	rep := reprocessJSON(t, path, "--all", "--event", "job.exploded")
	if rep.Moved != 1 || rep.Folded != 0 {
		t.Errorf("report = %+v, want 1 moved, none folded", rep)
	}
	if r := mustGet(t, path, "job_1"); r.Status != inbox.StatusNew || r.Event != "job.exploded" || r.JobID != "job_1" {
		t.Errorf("row = %+v, want job_1 new job.exploded", r)
	}
}

func TestReprocessDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	path, _, _, _ := mergeDB(t)
	fill(t, path, time.Now(), "not json", exploded("job_new"))
	args := []string{"--all", "--event", "job.completed", "--event", "job.exploded"}
	before := snapshot(t, path)
	dry := reprocessJSON(t, path, append(args, "--dry-run")...)
	if after := snapshot(t, path); after != before {
		t.Fatalf("dry run changed the table:\n%s\nwant\n%s", after, before)
	}
	if !dry.DryRun || dry.Moved != 2 || dry.Folded != 1 {
		t.Errorf("dry run report = %+v, want 2 moved, 1 folded", dry)
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
	t.Parallel()
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
	t.Parallel()
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

// bigCompleted is a job.completed body of about size bytes: too_large under
// testRules.
func bigCompleted(jobID string, size int) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"pad":%q}}`, jobID, strings.Repeat("x", size))
}

// rowsOf lists each row's key, status, reason, event and body hash: what
// reprocess decides, without the times it stamps.
func rowsOf(t *testing.T, path string) string {
	t.Helper()
	rows, err := openReadOnly(t, path).List(t.Context(), inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %s %s %s %s %d\n", r.ID, r.Status, r.Reason, r.Event, r.SHA256, r.Deliveries)
	}
	return b.String()
}

// besideDB holds job_1 parked too_large (a job.completed body of 2 KiB)
// and, delivered later, a job.exploded row parked unknown_event beside it.
func besideDB(t *testing.T) (path, big, boom string) {
	t.Helper()
	path = newDB(t)
	big, boom = bigCompleted("job_1", 2<<10), exploded("job_1")
	fill(t, path, time.Now().Add(-time.Hour), big)
	fill(t, path, time.Now().Add(-time.Minute), boom)
	if r := mustGet(t, path, inbox.BodyKey(sha(boom))); r.Reason != inbox.ReasonUnknownEvent {
		t.Fatalf("beside row = %+v, want parked unknown_event", r)
	}
	return path, big, boom
}

// TestReprocessKeepsTheJobRowsBody: a storable row beside a parked job row
// never overwrites the job row's body.
func TestReprocessKeepsTheJobRowsBody(t *testing.T) {
	t.Parallel()
	events := []string{"--event", "job.completed", "--event", "job.exploded"}

	// Either way both bodies are kept: one in job_1, new, and the other
	// parked under its sha256 key.
	for _, tt := range []struct {
		name, maxBody  string
		jobKeepsItsOwn bool
		parked         inbox.Reason
	}{
		{"the job row is storable now: it comes first", "4MiB", true, inbox.ReasonConflict},
		{"the job row is still not storable: its body is kept aside", "1KiB", false, inbox.ReasonTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, big, boom := besideDB(t)
			rep := reprocessJSON(t, path, append([]string{"--reason", "unknown_event", "--max-body", tt.maxBody}, events...)...)
			sameJSON(t, "report", rep, inbox.ReprocessReport{Moved: 1, JobRows: 1, Parked: map[inbox.Reason]int{tt.parked: 1}})
			inJob, aside := boom, big
			if tt.jobKeepsItsOwn {
				inJob, aside = big, boom
			}
			if job := mustGet(t, path, "job_1"); job.Status != inbox.StatusNew || string(job.Body) != inJob {
				t.Errorf("job_1 = %+v %.40q, want new with %.40q", job, job.Body, inJob)
			}
			if r := mustGet(t, path, inbox.BodyKey(sha(aside))); r.Status != inbox.StatusParked || r.Reason != tt.parked || string(r.Body) != aside {
				t.Errorf("%s = %+v, want parked %s", r.ID, r, tt.parked)
			}
		})
	}

	t.Run("the order of the ids decides nothing", func(t *testing.T) {
		implode := `{"event":"job.imploded","job_id":"job_1"}`
		var got []string
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}} {
			path, _, boom := besideDB(t)
			fill(t, path, time.Now(), implode)
			ids := []string{"job_1", inbox.BodyKey(sha(boom)), inbox.BodyKey(sha(implode))}
			reprocessJSON(t, path, append(append([]string{"--max-body", "1KiB", "--event", "job.imploded"}, events...),
				ids[order[0]], ids[order[1]], ids[order[2]])...)
			got = append(got, rowsOf(t, path))
			if job := mustGet(t, path, "job_1"); string(job.Body) != boom {
				t.Errorf("ids in order %v: job_1 holds %s, want the oldest storable body, %s", order, job.Body, boom)
			}
		}
		if got[0] != got[1] {
			t.Errorf("job_1 first:\n%s\njob_1 last:\n%s", got[0], got[1])
		}
	})
}

// TestReprocessCountsEachRowOnce selects, by id and in an awkward order, a
// parked job row and a storable row beside it, and a storable row beside a
// done job row holding the same event: each is counted once, by where it
// ended, under a label that says so.
func TestReprocessCountsEachRowOnce(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	big, boom, foldable := bigCompleted("job_a", 8<<10), exploded("job_a"), bigCompleted("job_b", 2<<10)
	fill(t, path, time.Now().Add(-time.Hour), big, completed("job_b"))
	fill(t, path, time.Now().Add(-time.Minute), boom, foldable)
	if _, err := openTestWriter(t, path).Exec(`UPDATE events SET status = 'done' WHERE id = 'job_b'`); err != nil {
		t.Fatal(err)
	}
	args := []string{"--event", "job.completed", "--event", "job.exploded", "--max-body", "4KiB",
		inbox.BodyKey(sha(boom)), "job_a", inbox.BodyKey(sha(foldable))}

	dry, err := run(t, append([]string{"reprocess", "--db", path, "--dry-run"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	rep := reprocessJSON(t, path, args...)
	want := inbox.ReprocessReport{Moved: 1, Folded: 1, Parked: map[inbox.Reason]int{inbox.ReasonTooLarge: 1}}
	sameJSON(t, "report", rep, want)
	wantOut := "dry run: nothing changed\nmoved to new: 1\nfolded into the job's new or done row: 1\n" +
		"STILL PARKED  ROWS\ntoo_large     1\n"
	if dry != wantOut {
		t.Errorf("output:\n%s\nwant\n%s", dry, wantOut)
	}
	if job := mustGet(t, path, "job_b"); job.Status != inbox.StatusDone || job.Deliveries != 2 {
		t.Errorf("job_b = %+v, want done with 2 deliveries", job)
	}
}

// TestReprocessDryRunMatchesAcrossBatches puts a job's rows on both sides of
// where a batch of 100 rows would end: a dry run counts what the real run
// does.
func TestReprocessDryRunMatchesAcrossBatches(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	start := time.Now().Add(-time.Hour)
	fill(t, path, start, bigCompleted("job_s", 8<<10))
	fillers := make([]string, 99)
	for i := range fillers {
		fillers[i] = exploded(fmt.Sprintf("job_f%02d", i))
	}
	fill(t, path, start.Add(time.Minute), fillers...)
	// The 100th and the 101st selected rows: two other events of job_s.
	fill(t, path, start.Add(2*time.Minute), exploded("job_s"))
	fill(t, path, start.Add(3*time.Minute), `{"event":"job.imploded","job_id":"job_s"}`)

	args := []string{"--reason", "unknown_event", "--max-body", "1KiB",
		"--event", "job.completed", "--event", "job.exploded", "--event", "job.imploded"}
	before := snapshot(t, path)
	dry := reprocessJSON(t, path, append(args, "--dry-run")...)
	if snapshot(t, path) != before {
		t.Fatal("the dry run changed the table")
	}
	real := reprocessJSON(t, path, args...)
	dry.DryRun = false
	sameJSON(t, "dry run report", dry, real)
	want := inbox.ReprocessReport{Moved: 100, JobRows: 1, Parked: map[inbox.Reason]int{
		inbox.ReasonTooLarge: 1, inbox.ReasonConflict: 1}}
	sameJSON(t, "report", real, want)
}

// TestReprocessReportsCommittedBatches fails the second batch: the counts of
// the first, which committed, are printed before the error.
func TestReprocessReportsCommittedBatches(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	bodies := make([]string, 150)
	for i := range bodies {
		bodies[i] = exploded(fmt.Sprintf("job_%03d", i))
	}
	fill(t, path, time.Now(), bodies...)
	if _, err := openTestWriter(t, path).Exec(`CREATE TRIGGER boom BEFORE UPDATE ON events WHEN OLD.id = 'job_120'
		BEGIN SELECT RAISE(ABORT, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "reprocess", "--db", path, "--reason", "unknown_event", "--event", "job.exploded")
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the second batch's failure", err)
	}
	if want := "moved to new: 100\n"; !strings.HasPrefix(out, want) {
		t.Errorf("output:\n%s\nwant it to start %q", out, want)
	}
	if r := mustGet(t, path, "job_099"); r.Status != inbox.StatusNew {
		t.Errorf("job_099 = %+v, want new: its batch committed", r)
	}
	if r := mustGet(t, path, "job_100"); r.Status != inbox.StatusParked {
		t.Errorf("job_100 = %+v, want parked: its batch was rolled back", r)
	}
}

// TestReprocessEverySource brings back parked rows of sources other than
// Sume with --config, from the key and event recorded on receipt (GitHub's
// key came from a header), under the file's rules now; without --config
// they stay Sume-only as before.
func TestReprocessEverySource(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	now := time.Now()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{Now: func() time.Time { return now }})
	push := inbox.Rules{Events: []string{"push"}}
	vibe := keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"runId":"run_1"}`), deliveryTS, inbox.Rules{})
	vibe.Response = []byte(`{"accepted":true}`)
	for _, d := range []inbox.Delivery{
		keyed("gh", "d1", "ping", []byte(`{"zen":"x"}`), deliveryTS, push),                                                        // parked unknown_event
		keyed("gh", "", "push", []byte(`{"ref":"main"}`), deliveryTS, push),                                                       // parked missing_key
		keyed("gh", "d2", "push", []byte(`{"ref":"dev","pad":1}`), deliveryTS, inbox.Rules{Events: []string{"push"}, MaxBody: 4}), // too_large
		vibe,
	} {
		if _, err := s.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dispatched(t, path, now, map[string]inbox.Settlement{
		"vibe/run_1": {Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"},
	})
	before := snapshot(t, path)

	// Without --config only Sume exists: the ids are refused, the
	// selections pass the rows over.
	if _, err := run(t, "reprocess", "--db", path, "vibe/run_1"); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("vibe id without --config: %v", err)
	}
	if rep := reprocessJSON(t, path, "--all"); rep.Moved != 0 || len(rep.Parked) != 0 {
		t.Errorf("--all without --config: %+v, want nothing", rep)
	}
	if after := snapshot(t, path); after != before {
		t.Errorf("reprocess without --config changed other sources' rows")
	}

	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	err := os.WriteFile(cfg, []byte(`
[[source]]
name = "gh"
scheme = "github"
events = ["push", "ping"]
max_body = "1KiB"
[[source.secret]]
env = "GH_SECRET_NOT_SET_HERE"

[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
env = "VIBE_SECRET_NOT_SET_HERE"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "reprocess", "--db", path, "--config", cfg, "--event", "push", "--all"); err == nil || !strings.Contains(err.Error(), "--event") {
		t.Errorf("--event with --config: %v, want refused", err)
	}
	rep := reprocessJSON(t, path, "--config", cfg, "--reason", "unknown_event")
	if rep.Moved != 1 {
		t.Errorf("unknown_event: %+v, want 1 moved", rep)
	}
	if e := mustGet(t, path, "gh/d1"); e.Status != inbox.StatusNew || e.Event != "ping" || e.JobID != "gh/d1" {
		t.Errorf("gh/d1 = %+v, want new ping", e)
	}
	rep = reprocessJSON(t, path, "--config", cfg, "vibe/run_1")
	if rep.Moved != 1 {
		t.Errorf("vibe/run_1: %+v, want 1 moved", rep)
	}
	if e := mustGet(t, path, "vibe/run_1"); e.Status != inbox.StatusNew || e.Attempts != 0 || e.LastError != "" || string(e.Response) != `{"accepted":true}` {
		t.Errorf("vibe/run_1 = %+v, want new, no attempts, the saved answer kept", e)
	}
	rep = reprocessJSON(t, path, "--config", cfg, "--all")
	if rep.Moved != 1 || rep.Parked[inbox.ReasonMissingKey] != 1 {
		t.Errorf("--all: %+v, want the too_large row moved and missing_key kept", rep)
	}
	if e := mustGet(t, path, "gh/d2"); e.Status != inbox.StatusNew {
		t.Errorf("gh/d2 = %+v, want new under max_body 1KiB", e)
	}
}
