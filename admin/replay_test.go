package admin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// deliverAll hands every new row of path to destination default, done.
func deliverAll(t *testing.T, path string, at time.Time) {
	t.Helper()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{Now: func() time.Time { return at }})
	defer s.Close()
	ctx := context.Background()
	jobs, _, err := s.Settle(ctx, "o", nil, inbox.Claim{Now: at, Until: at.Add(time.Minute), Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	var done []inbox.Settlement
	for _, j := range jobs {
		done = append(done, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: at})
	}
	if _, _, err := s.Settle(ctx, "o", done, inbox.Claim{}); err != nil {
		t.Fatal(err)
	}
}

func TestReplayOutput(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	at := time.Now().Add(-time.Hour)
	fill(t, path, at, completed("job_1"), completed("job_2"))
	deliverAll(t, path, at)
	fill(t, path, at, completed("job_3"), "not json", exploded("job_4"), `{"event":"webhook.test","request_id":"r"}`)

	if _, err := run(t, "replay", "--db", path); err == nil || !strings.Contains(err.Error(), "no selection") {
		t.Errorf("replay with no selection: %v", err)
	}
	if _, err := run(t, "replay", "--db", path, "job_9"); err == nil || !strings.Contains(err.Error(), `no row with id "job_9"`) {
		t.Errorf("replay of an unknown id: %v", err)
	}
	before := snapshot(t, path)
	out, err := run(t, "replay", "--db", path, "--since", "2h", "--dry-run", "--show", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"dry run: nothing changed",
		"rows handed on again: 2 (2 pairs made new)",
		"already waiting, left alone: 1",
		"skipped, ignored (test pings): 1",
		"skipped, parked on receipt and never handed on: 2 (unknown_event 1, unparseable 1): see inbox reprocess --help",
		"due: at once",
		"SOURCE  STATUS  REASON",
		"job_1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "job_2  ") {
		t.Errorf("--show 1 listed job_2 too:\n%s", out)
	}
	if snapshot(t, path) != before {
		t.Error("the dry run changed the rows")
	}

	out, err = run(t, "replay", "--db", path, "--json", "--rate", "2/s", "job_1", "job_2")
	if err != nil {
		t.Fatal(err)
	}
	var rep inbox.ReplayReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Rows != 2 || rep.Pairs != 2 || rep.DryRun || rep.LastDue.Sub(rep.FirstDue) != 500*time.Millisecond {
		t.Errorf("replay --json = %s, want 2 rows half a second apart", out)
	}
	if e := mustGet(t, path, "job_2"); e.Status != inbox.StatusNew {
		t.Errorf("job_2 after the replay = %s, want new", e.Status)
	}
	out, err = run(t, "show", "--db", path, "job_1")
	if err != nil || !strings.Contains(out, "EARLIER SERIES") || !strings.Contains(out, "series 1: 1 attempt, done ") {
		t.Errorf("show after the replay: %v\n%s", err, out)
	}
}

// TestReplayBeforeUpgrade: on a file serve or dispatch of this version
// has not opened yet (no delivery_history table; the commands do not
// upgrade it), replay says so and changes nothing, and show still shows
// the row's destinations.
func TestReplayBeforeUpgrade(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	at := time.Now().Add(-time.Hour)
	fill(t, path, at, completed("job_1"))
	deliverAll(t, path, at)
	db := openTestWriter(t, path)
	if _, err := db.Exec(`DROP TRIGGER events_delivery_history_delete; DROP TABLE delivery_history`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := snapshot(t, path)
	if _, err := run(t, "replay", "--db", path, "job_1"); err == nil || !strings.Contains(err.Error(), "run inbox migrate once") {
		t.Errorf("replay before the upgrade: %v", err)
	}
	if snapshot(t, path) != before {
		t.Error("the refused replay changed the rows")
	}
	if out, err := run(t, "show", "--db", path, "job_1"); err != nil || !strings.Contains(out, "DESTINATION") || strings.Contains(out, "EARLIER") {
		t.Errorf("show before the upgrade: %v\n%s", err, out)
	}
}
