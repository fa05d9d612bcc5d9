package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

var settledStatuses = []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}

// TestPurgeBatches purges more rows than one transaction deletes.
func TestPurgeBatches(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-10 * 24 * time.Hour)
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: func() time.Time { return old }})
	const n = 2500
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"event":"webhook.test","request_id":"req_%d"}`, i)
	}
	putAll(t, s, append(bodies, `{"event":"job.completed","job_id":"job_1"}`))
	s = reopen(t, s, time.Now)
	sel := inbox.PurgeSelection{Before: time.Now().Add(-8 * 24 * time.Hour), Statuses: settledStatuses}

	want, err := s.Purgeable(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Purge(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	if got.Deleted[inbox.StatusIgnored] != n || want.Deleted[inbox.StatusIgnored] != n {
		t.Errorf("purged %v, counted %v beforehand; want %d ignored", got, want, n)
	}
	if got.KeptUnfinished != 1 || want.KeptUnfinished != 1 {
		t.Errorf("kept unfinished %d (counted %d beforehand), want the new row", got.KeptUnfinished, want.KeptUnfinished)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[inbox.StatusIgnored] != 0 || st.ByStatus[inbox.StatusNew] != 1 {
		t.Errorf("left %v, want only the new row", st.ByStatus)
	}
}

// reopen closes s and opens its file again with the clock now.
func reopen(t *testing.T, s *sqlite.Store, now func() time.Time) *sqlite.Store {
	t.Helper()
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return sqlitetest.MustOpenPath(t, path, sqlite.Options{Now: now})
}

// TestPurgeKeepsUnfinishedWork: rows whose work is unfinished stay past
// any retention: new rows, waiting or claimed, and rows the dispatcher
// parked, until their reason is named.
func TestPurgeKeepsUnfinishedWork(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-40 * 24 * time.Hour)
	clock := old
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: func() time.Time { return clock }})
	// One by one, so they queue in this order and the claim takes the first three.
	for _, b := range []string{`{"event":"job.completed","job_id":"job_failed"}`, `{"event":"job.completed","job_id":"job_rejected"}`,
		`{"event":"job.completed","job_id":"job_flight"}`, `{"event":"job.completed","job_id":"job_waiting"}`,
		`{"event":"job.exploded","job_id":"job_poison"}`, `{"event":"webhook.test","request_id":"req_1"}`} {
		putAll(t, s, []string{b})
		clock = clock.Add(time.Millisecond)
	}
	jobs, _, err := s.Settle(context.Background(), "d1", nil, inbox.Claim{Now: clock, Until: clock.Add(time.Hour), Max: 3})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	var settle []inbox.Settlement
	for _, j := range jobs {
		switch j.ID {
		case "job_failed":
			settle = append(settle, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: old, Reason: inbox.ReasonHandlerFailed, Error: "500"})
		case "job_rejected":
			settle = append(settle, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: old, Reason: inbox.ReasonHandlerRejected, Error: "410"})
		}
	}
	// job_flight stays claimed: still unfinished.
	if _, _, err := s.Settle(context.Background(), "d1", settle, inbox.Claim{}); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, time.Now)
	before := time.Now().Add(-30 * 24 * time.Hour)
	status := func(id string) string {
		e, err := s.Get(context.Background(), id)
		if err != nil {
			return "gone"
		}
		return string(e.Status) + " " + string(e.Reason)
	}

	sel := inbox.PurgeSelection{Before: before, Statuses: settledStatuses, Reasons: inbox.ReceiptReasons()}
	dry, err := s.Purgeable(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Purge(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []inbox.PurgeReport{dry, rep} {
		if r.Deleted[inbox.StatusParked] != 1 || r.DeletedParked[inbox.ReasonUnknownEvent] != 1 || r.Deleted[inbox.StatusIgnored] != 1 || r.KeptUnfinished != 4 {
			t.Errorf("receipt reasons: report %+v, want the poison and ignored rows deleted, 4 kept", r)
		}
	}
	for id, want := range map[string]string{"job_failed": "parked handler_failed", "job_rejected": "parked handler_rejected",
		"job_waiting": "new ", "job_flight": "new ", "job_poison": "gone"} {
		if got := status(id); got != want {
			t.Errorf("after purging receipt reasons, %s is %q, want %q", id, got, want)
		}
	}

	sel.Reasons = []inbox.Reason{inbox.ReasonHandlerFailed}
	if rep, err = s.Purge(context.Background(), sel); err != nil {
		t.Fatal(err)
	}
	if rep.DeletedParked[inbox.ReasonHandlerFailed] != 1 || rep.KeptUnfinished != 3 {
		t.Errorf("named handler_failed: report %+v, want it deleted and 3 kept", rep)
	}
	if got := status("job_failed"); got != "gone" {
		t.Errorf("job_failed is %q after it was named, want gone", got)
	}
	if got := status("job_rejected"); got != "parked handler_rejected" {
		t.Errorf("job_rejected is %q, want kept: not named", got)
	}
}
