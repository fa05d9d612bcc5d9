package sqlite_test

import (
	"context"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestPutParsesNothing puts a delivery down every path of Put (a new row,
// a repeat, a revive, a conflict beside a row and its repeat), with and
// without a refusal and an expectation waiting to be settled, and checks
// that none of them made the writer parse a statement: each runs prepared,
// so a repeat costs no parse that a new row does not.
func TestPutParsesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	unknown := inbox.Rules{Events: []string{"job.failed"}, MaxBody: 1 << 20}
	body := func(id, status string) []byte {
		return []byte(`{"event":"job.completed","job_id":"` + id + `","status":"` + status + `"}`)
	}
	put := func(what string, d inbox.Delivery, want inbox.Outcome) {
		t.Helper()
		before := sqlite.ParsedForTest(s)
		res, err := s.Put(ctx, d)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Outcome != want {
			t.Fatalf("%s: outcome %s, want %s", what, res.Outcome, want)
		}
		if n := sqlite.ParsedForTest(s) - before; n != 0 {
			t.Errorf("%s: the writer parsed %d statements, want 0", what, n)
		}
	}
	paths := func(prefix string) {
		t.Helper()
		put(prefix+"new row", inbox.Classify("", inbox.Named{}, body(prefix+"a", "COMPLETED"), 1, rules), inbox.OutcomeStored)
		put(prefix+"repeat", inbox.Classify("", inbox.Named{}, body(prefix+"a", "COMPLETED"), 2, rules), inbox.OutcomeDuplicate)
		put(prefix+"parked", inbox.Classify("", inbox.Named{}, body(prefix+"b", "COMPLETED"), 1, unknown), inbox.OutcomeParked)
		put(prefix+"revive", inbox.Classify("", inbox.Named{}, body(prefix+"b", "COMPLETED"), 2, rules), inbox.OutcomeRevived)
		put(prefix+"conflict", inbox.Classify("", inbox.Named{}, body(prefix+"a", "OTHER"), 3, rules), inbox.OutcomeParked)
		put(prefix+"conflict repeat", inbox.Classify("", inbox.Named{}, body(prefix+"a", "OTHER"), 4, rules), inbox.OutcomeDuplicate)
	}
	paths("idle-")

	// Something to settle: every commit then also clears refusals and
	// settles expectations.
	if err := s.RecordRefusals(ctx, []inbox.Refusal{{Key: "refused", First: time.Now(), Count: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expect(ctx, []string{"settle-a"}, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	paths("settle-")
	exp, err := s.Expected(ctx, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 1 || exp[0].State != inbox.ExpectDone {
		t.Errorf("expectations after the job arrived: %+v, want settle-a done", exp)
	}
}

// TestSettleTablesMadeLater opens a database of the first version as the
// admin commands do, without the schema, so it lacks the refusals and
// expectations tables the writer settles: deliveries still commit, and once
// another process has made the tables and recorded a refusal, the next
// delivery of that key clears it.
func TestSettleTablesMadeLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := oldDB(t)
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{MustExist: true, Schema: "-- no schema: as the admin commands open"})
	if _, err := s.Put(ctx, job("before")); err != nil {
		t.Fatalf("put without the settle tables: %v", err)
	}
	other := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	if err := other.RecordRefusals(ctx, []inbox.Refusal{{Key: "later", First: time.Now(), Count: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, job("later")); err != nil {
		t.Fatalf("put once the tables are there: %v", err)
	}
	missed, err := other.Missed(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(missed) != 0 {
		t.Errorf("missed after the key was delivered: %+v, want none", missed)
	}
}

// TestQueueParsesNothing runs the dispatcher's writes (a claim that routes
// new rows and counts some of their attempts, a count of the others, and
// their outcomes: done, retried, parked, given back, uncounted) and checks
// that none of them made the writer parse a statement: the queue's writes
// cost no parse per row or per claim.
func TestQueueParsesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	for _, id := range []string{"q1", "q2", "q3", "q4", "q5", "q6"} {
		if _, err := s.Put(ctx, job(id)); err != nil {
			t.Fatal(err)
		}
	}
	before := sqlite.ParsedForTest(s)
	now := time.Now()
	routes := []inbox.Route{{Name: "a"}, {Name: "b"}}
	claim := inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 6, Start: 3, Destination: "a", Routes: routes}
	jobs, _, err := s.Settle(ctx, "o", nil, claim)
	if err != nil || len(jobs) != 6 {
		t.Fatalf("claim: %d jobs, %v; want 6", len(jobs), err)
	}
	var unstarted []inbox.Job
	for _, j := range jobs {
		if !j.Started() {
			unstarted = append(unstarted, j)
		}
	}
	started, err := s.Start(ctx, "o", unstarted, now, now.Add(time.Minute))
	if err != nil || len(started) != 3 {
		t.Fatalf("start: %d started, %v; want 3", len(started), err)
	}
	var settled []inbox.Settlement
	for i, j := range append(jobs[:0:0], jobs...) {
		if !j.Started() {
			j = started[0]
			started = started[1:]
		}
		st := inbox.Settlement{Job: j, At: now}
		switch i % 4 {
		case 0:
			st.Fate = inbox.FateDone
		case 1:
			st.Fate, st.RetryAt, st.Error = inbox.FateRetry, now.Add(time.Minute), "boom"
		case 2:
			st.Fate, st.Reason, st.Error = inbox.FatePark, inbox.ReasonHandlerRejected, "no"
		default:
			st.Fate = inbox.FateUnsent
		}
		settled = append(settled, st)
	}
	if _, stale, err := s.Settle(ctx, "o", settled, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 6, Destination: "b", Routes: routes}); err != nil || stale != 0 {
		t.Fatalf("settle: stale %d, %v", stale, err)
	}
	if n := sqlite.ParsedForTest(s) - before; n != 0 {
		t.Errorf("the writer parsed %d statements for the queue's writes, want 0", n)
	}
}
