package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

var t0 = time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)

// queued opens a store whose clock is t0 and puts the given jobs, one
// millisecond apart, so they queue in that order.
func queued(t *testing.T, ids ...string) *sqlite.Store {
	t.Helper()
	now := t0
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: func() time.Time { return now }})
	for _, id := range ids {
		if _, err := s.Put(context.Background(), job(id)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Millisecond)
	}
	return s
}

func claim(t *testing.T, s *sqlite.Store, owner string, now time.Time, lease time.Duration, n int) []inbox.Job {
	t.Helper()
	jobs, _, err := s.Settle(context.Background(), owner, nil, inbox.Claim{Now: now, Until: now.Add(lease), Max: n})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func ids(jobs []inbox.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = fmt.Sprintf("%s#%d", j.ID, j.Attempt)
	}
	slices.Sort(out)
	return out
}

func get(t *testing.T, s *sqlite.Store, id string) inbox.Event {
	t.Helper()
	e, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestClaimLease claims in batches, oldest first, and checks that a claim
// holds until its lease runs out, then passes to whoever claims next, and
// that the first holder's outcome no longer counts.
func TestClaimLease(t *testing.T) {
	s := queued(t, "job_1", "job_2", "job_3")
	lease := 30 * time.Second
	if got := ids(claim(t, s, "a", t0, lease, 2)); !slices.Equal(got, []string{"job_1#1", "job_2#1"}) {
		t.Fatalf("first claim = %v, want the two oldest at attempt 1", got)
	}
	e := get(t, s, "job_1")
	if e.Status != inbox.StatusNew || e.LeaseOwner != "a" || !e.LeaseUntil.Equal(t0.Add(lease)) || e.Attempts != 0 {
		t.Errorf("claimed row = %+v, want new, held by a until t0+30s, no attempt counted", e)
	}
	// a starts an attempt at job_1 only.
	first := claimed(t, s, "a", "job_1", t0, t0.Add(lease))
	if got := ids(claim(t, s, "b", t0, 2*lease, 5)); !slices.Equal(got, []string{"job_3#1"}) {
		t.Fatalf("second claim = %v, want only the unclaimed row", got)
	}
	if got := claim(t, s, "b", t0.Add(lease-time.Millisecond), lease, 5); len(got) != 0 {
		t.Fatalf("claimed %v while every lease holds", ids(got))
	}
	// a's leases run out: b takes the rows over, job_1 as its next
	// attempt, job_2 as its first (a never started it).
	if got := ids(claim(t, s, "b", t0.Add(lease), lease, 5)); !slices.Equal(got, []string{"job_1#2", "job_2#1"}) {
		t.Fatalf("claim after the leases ran out = %v, want job_1 at attempt 2 and job_2 at 1", got)
	}
	_, stale, err := s.Settle(context.Background(), "a", []inbox.Settlement{
		{Job: first, Fate: inbox.FateDone, At: t0.Add(lease)},
		{Job: inbox.Job{ID: "job_2", Attempt: 1}, Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, At: t0.Add(lease)},
	}, inbox.Claim{})
	if err != nil {
		t.Fatal(err)
	}
	if stale != 2 {
		t.Errorf("stale = %d, want both of a's lost claims", stale)
	}
	if e := get(t, s, "job_1"); e.Status != inbox.StatusNew || e.LeaseOwner != "b" {
		t.Errorf("after a's late outcome: %+v, want new and held by b", e)
	}
}

// startOne starts the attempt j names, and reports whether it started.
func startOne(s *sqlite.Store, owner string, j inbox.Job, now, until time.Time) (inbox.Job, bool, error) {
	started, err := s.Start(context.Background(), owner, []inbox.Job{j}, now, until)
	if err != nil || len(started) == 0 {
		return j, false, err
	}
	return started[0], true, nil
}

// claimed returns the attempt at id that owner claimed, started at now with
// the lease renewed until until.
func claimed(t *testing.T, s *sqlite.Store, owner, id string, now, until time.Time) inbox.Job {
	t.Helper()
	j, ok, err := startOne(s, owner, inbox.Job{ID: id, Attempt: int(get(t, s, id).Attempts) + 1}, now, until)
	if err != nil || !ok {
		t.Fatalf("start %s for %s: %v %v", id, owner, ok, err)
	}
	return j
}

// TestStart checks that a claim counts no attempt and Start does, once,
// only while the claim holds, and renews the lease; that a crash between
// claim and start leaves the row as it was; and that the settle guard
// tells a started attempt from an unstarted claim.
func TestStart(t *testing.T) {
	s := queued(t, "job_1", "job_2", "job_3")
	ctx := context.Background()
	lease := time.Minute
	jobs := claim(t, s, "a", t0, lease, 3)
	byID := map[string]inbox.Job{}
	for _, j := range jobs {
		if j.Attempt != 1 || j.Source != inbox.DefaultSource || j.Key != j.ID {
			t.Errorf("claimed %+v, want attempt 1, source sume, key = id", j)
		}
		byID[j.ID] = j
	}
	if _, ok, err := startOne(s, "b", byID["job_1"], t0, t0.Add(lease)); err != nil || ok {
		t.Errorf("another owner started a's claim: %v %v", ok, err)
	}
	at := t0.Add(10 * time.Second)
	// Two copies of one claim in one call: one starts.
	both, err := s.Start(ctx, "a", []inbox.Job{byID["job_1"], byID["job_1"]}, at, at.Add(lease))
	if err != nil || len(both) != 1 {
		t.Fatalf("start two copies: %v %v, want one started", both, err)
	}
	j1, ok := both[0], true
	if err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	if e := get(t, s, "job_1"); e.Attempts != 1 || !e.LeaseUntil.Equal(at.Add(lease)) || !e.NextAttemptAt.Equal(at.Add(lease)) {
		t.Errorf("started row = %+v, want 1 attempt, the lease renewed from the start", e)
	}
	if _, ok, err := startOne(s, "a", j1, at, at.Add(lease)); err != nil || ok {
		t.Errorf("an attempt was started twice: %v %v", ok, err)
	}
	if _, ok, err := startOne(s, "a", byID["job_1"], at, at.Add(lease)); err != nil || ok {
		t.Errorf("the unstarted copy of a started claim started: %v %v", ok, err)
	}
	// job_2's lease runs out before its attempt starts: it must not start.
	if _, ok, err := startOne(s, "a", byID["job_2"], t0.Add(lease), t0.Add(2*lease)); err != nil || ok {
		t.Errorf("started on a lease that ran out: %v %v", ok, err)
	}
	// Releasing the started attempt is refused; releasing job_2 and job_3,
	// never started, counts nothing.
	if _, _, err := s.Settle(ctx, "a", []inbox.Settlement{{Job: j1, Fate: inbox.FateRelease, At: at}}, inbox.Claim{}); err == nil {
		t.Error("a started attempt was released")
	}
	_, stale, err := s.Settle(ctx, "a", []inbox.Settlement{
		{Job: byID["job_1"], Fate: inbox.FateDone, At: at}, // names the claim, not the started attempt
		{Job: byID["job_2"], Fate: inbox.FateRelease, At: at},
		{Job: byID["job_3"], Fate: inbox.FateRelease, At: at},
	}, inbox.Claim{})
	if err != nil || stale != 1 {
		t.Fatalf("settle: stale %d, %v; want the unstarted copy of job_1 stale", stale, err)
	}
	for _, id := range []string{"job_2", "job_3"} {
		if e := get(t, s, id); e.Attempts != 0 || e.LeaseOwner != "" {
			t.Errorf("released %s = %+v, want no attempt, no lease", id, e)
		}
	}
	if _, stale, err := s.Settle(ctx, "a", []inbox.Settlement{{Job: j1, Fate: inbox.FateDone, At: at}}, inbox.Claim{}); err != nil || stale != 0 {
		t.Fatalf("settle the started attempt: stale %d, %v", stale, err)
	}
	if e := get(t, s, "job_1"); e.Status != inbox.StatusDone || e.Attempts != 1 {
		t.Errorf("done row = %+v, want done after 1 attempt", e)
	}
	// The outcome of a claim nobody started counts its attempt.
	j2 := claim(t, s, "c", at, lease, 1)[0]
	if _, stale, err := s.Settle(ctx, "c", []inbox.Settlement{{Job: j2, Fate: inbox.FateRetry, At: at, RetryAt: at}}, inbox.Claim{}); err != nil || stale != 0 {
		t.Fatalf("settle an unstarted claim: stale %d, %v", stale, err)
	}
	if e := get(t, s, j2.ID); e.Attempts != 1 {
		t.Errorf("%s attempts = %d after an outcome, want 1", j2.ID, e.Attempts)
	}
	// An attempt lost with no attempt left is parked without counting one.
	j2 = claim(t, s, "c", at, lease, 1)[0]
	if _, stale, err := s.Settle(ctx, "c", []inbox.Settlement{{Job: j2, Fate: inbox.FateExhausted, At: at, Reason: inbox.ReasonHandlerFailed, Error: "lost"}}, inbox.Claim{}); err != nil || stale != 0 {
		t.Fatalf("settle exhausted: stale %d, %v", stale, err)
	}
	if e := get(t, s, j2.ID); e.Status != inbox.StatusParked || e.Reason != inbox.ReasonHandlerFailed || e.Attempts != 1 {
		t.Errorf("exhausted row = %+v, want parked handler_failed, still 1 attempt", e)
	}
}

// TestSettle records each fate and checks the row, and when it can be
// claimed again.
func TestSettle(t *testing.T) {
	s := queued(t, "job_done", "job_retry", "job_park", "job_release")
	jobs := claim(t, s, "a", t0, time.Minute, 10)
	if len(jobs) != 4 {
		t.Fatalf("claimed %d rows, want 4", len(jobs))
	}
	byID := map[string]inbox.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	at := t0.Add(time.Second)
	_, stale, err := s.Settle(context.Background(), "a", []inbox.Settlement{
		{Job: byID["job_done"], Fate: inbox.FateDone, At: at},
		{Job: byID["job_retry"], Fate: inbox.FateRetry, At: at, RetryAt: at.Add(5 * time.Second), Error: "HTTP 503"},
		{Job: byID["job_park"], Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"},
		{Job: byID["job_release"], Fate: inbox.FateRelease, At: at},
	}, inbox.Claim{})
	if err != nil || stale != 0 {
		t.Fatalf("settle: stale %d, %v", stale, err)
	}
	if e := get(t, s, "job_done"); e.Status != inbox.StatusDone || !e.DoneAt.Equal(at) || e.LeaseOwner != "" || e.Attempts != 1 {
		t.Errorf("done row = %+v", e)
	}
	if e := get(t, s, "job_retry"); e.Status != inbox.StatusNew || !e.NextAttemptAt.Equal(at.Add(5*time.Second)) ||
		e.LastError != "HTTP 503" || e.LeaseOwner != "" || e.Attempts != 1 {
		t.Errorf("retried row = %+v", e)
	}
	if e := get(t, s, "job_park"); e.Status != inbox.StatusParked || e.Reason != inbox.ReasonHandlerRejected ||
		e.LastError != "HTTP 422" || !e.UpdatedAt.Equal(at) || e.LeaseOwner != "" {
		t.Errorf("parked row = %+v", e)
	}
	if e := get(t, s, "job_release"); e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != "" {
		t.Errorf("released row = %+v", e)
	}

	q, err := s.Queue(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	want := inbox.Queue{Depth: 2, Retrying: 1, Oldest: t0.Add(time.Millisecond)}
	if q != want {
		t.Errorf("queue = %+v, want %+v", q, want)
	}
	if age := q.Age(at); age != time.Second-time.Millisecond {
		t.Errorf("age = %v", age)
	}
	// The released row is due at once, the retry only at its time.
	if got := ids(claim(t, s, "b", at, time.Minute, 10)); !slices.Equal(got, []string{"job_release#1"}) {
		t.Errorf("claim before the retry time = %v", got)
	}
	if got := ids(claim(t, s, "b", at.Add(5*time.Second), time.Minute, 10)); !slices.Equal(got, []string{"job_retry#2"}) {
		t.Errorf("claim at the retry time = %v", got)
	}
	due, ok, err := s.NextDue(context.Background())
	if err != nil || !ok || !due.Equal(at.Add(time.Minute)) {
		t.Errorf("next due = %v %v %v, want the first lease's end", due, ok, err)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// job_retry's one attempt; b's claims start none.
	if st.Attempts[inbox.StatusNew] != 1 || st.Attempts[inbox.StatusDone] != 1 || st.Attempts[inbox.StatusParked] != 1 {
		t.Errorf("attempts by status = %v, want new 1, done 1, parked 1", st.Attempts)
	}
}

// TestHandlerParked checks that a row the dispatcher parked comes back only
// through reprocess: a later delivery of its job is counted on it, and
// reprocess makes it new with no attempts, lease or error.
func TestHandlerParked(t *testing.T) {
	s := queued(t, "job_1")
	j := claim(t, s, "a", t0, time.Minute, 1)[0]
	if _, _, err := s.Settle(context.Background(), "a", []inbox.Settlement{
		{Job: j, Fate: inbox.FatePark, At: t0, Reason: inbox.ReasonHandlerFailed, Error: "exit status 1"},
	}, inbox.Claim{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Put(context.Background(), job("job_1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != inbox.OutcomeDuplicate {
		t.Errorf("a repeat onto a handler_failed row: %s, want duplicate", res.Outcome)
	}
	other := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.failed","job_id":"job_1","status":"ERROR"}`), 1_800_000_000, rules)
	if res, err = s.Put(context.Background(), other); err != nil || res.Reason != inbox.ReasonConflict {
		t.Errorf("another event onto a handler_failed row: %+v %v, want parked conflict beside it", res, err)
	}
	if e := get(t, s, "job_1"); e.Status != inbox.StatusParked || e.Deliveries != 2 {
		t.Fatalf("row after the deliveries = %+v, want still parked, 2 deliveries", e)
	}
	if got := claim(t, s, "a", t0.Add(time.Hour), time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed a parked row: %v", ids(got))
	}

	rep, err := s.Reprocess(context.Background(), inbox.Selection{Reason: inbox.ReasonHandlerFailed}, inbox.SourceRules{inbox.DefaultSource: rules}, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 {
		t.Errorf("reprocess moved %d, want 1", rep.Moved)
	}
	e := get(t, s, "job_1")
	if e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != "" || !e.LeaseUntil.IsZero() ||
		e.LastError != "" || !e.NextAttemptAt.IsZero() || e.Deliveries != 2 {
		t.Errorf("reprocessed row = %+v, want new, no attempts, lease or error", e)
	}
	if got := ids(claim(t, s, "a", t0, time.Minute, 10)); !slices.Equal(got, []string{"job_1#1"}) {
		t.Errorf("claim after reprocess = %v, want job_1 at attempt 1", got)
	}
}
