package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

func runQueue(t *testing.T, o opener) {
	t.Run("claim and lease", func(t *testing.T) {
		// Claims come in batches, oldest first; a claim holds until its
		// lease runs out, then passes to whoever claims next, and the first
		// holder's outcome no longer counts.
		e := o.fresh(t)
		e.queued("job_1", "job_2", "job_3")
		lease := 30 * time.Second
		if got := ids(e.claim("a", t0, lease, 2)); !slices.Equal(got, []string{"job_1#1", "job_2#1"}) {
			t.Fatalf("first claim = %v, want the two oldest at attempt 1", got)
		}
		r := e.get("job_1")
		if r.Status != inbox.StatusNew || r.LeaseOwner != "a" || !r.LeaseUntil.Equal(t0.Add(lease)) || r.Attempts != 1 ||
			!r.NextAttemptAt.Equal(t0.Add(lease)) {
			t.Errorf("claimed row = %+v, want new, held by a until t0+30s", r)
		}
		if got := ids(e.claim("b", t0, 2*lease, 5)); !slices.Equal(got, []string{"job_3#1"}) {
			t.Fatalf("second claim = %v, want only the unclaimed row", got)
		}
		if got := e.claim("b", t0.Add(lease-time.Millisecond), lease, 5); len(got) != 0 {
			t.Fatalf("claimed %v while every lease holds", ids(got))
		}
		q, err := e.s.Queue(context.Background(), t0.Add(lease-time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if q.Depth != 3 || q.InFlight != 3 || q.Retrying != 0 || !q.Oldest.Equal(t0) {
			t.Errorf("queue while leased = %+v, want 3 deep, 3 in flight", q)
		}
		// a's leases run out: b takes the rows over, as the next attempt.
		if got := ids(e.claim("b", t0.Add(lease), lease, 5)); !slices.Equal(got, []string{"job_1#2", "job_2#2"}) {
			t.Fatalf("claim after the leases ran out = %v, want job_1 and job_2 at attempt 2", got)
		}
		stale := e.settle("a", t0.Add(lease),
			inbox.Settlement{Job: inbox.Job{ID: "job_1", Attempt: 1}, Fate: inbox.FateDone, At: t0.Add(lease)},
			inbox.Settlement{Job: inbox.Job{ID: "job_2", Attempt: 1}, Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, At: t0.Add(lease)},
			inbox.Settlement{Job: inbox.Job{ID: "job_3", Attempt: 1}, Fate: inbox.FateRetry, RetryAt: t0.Add(lease), At: t0.Add(lease)},
		)
		if stale != 3 {
			t.Errorf("stale = %d, want all three of a's lost claims", stale)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew || r.LeaseOwner != "b" || r.Attempts != 2 {
			t.Errorf("after a's late outcome: %+v, want new and held by b", r)
		}
		if r := e.get("job_2"); r.Status != inbox.StatusNew || r.LeaseOwner != "b" {
			t.Errorf("after a's late park: %+v, want new and held by b", r)
		}
		// The holder itself, naming an attempt that is not the row's, is stale too.
		stale = e.settle("b", t0.Add(lease),
			inbox.Settlement{Job: inbox.Job{ID: "job_1", Attempt: 1}, Fate: inbox.FateDone, At: t0.Add(lease)},
			inbox.Settlement{Job: inbox.Job{ID: "job_404", Attempt: 1}, Fate: inbox.FateDone, At: t0.Add(lease)},
		)
		if stale != 2 {
			t.Errorf("stale = %d, want the wrong attempt and the missing row", stale)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew {
			t.Errorf("a wrong attempt settled the row: %+v", r)
		}
	})

	t.Run("settle each fate", func(t *testing.T) {
		e := o.fresh(t)
		e.queued("job_done", "job_retry", "job_park", "job_release")
		jobs := e.claim("a", t0, time.Minute, 10)
		if len(jobs) != 4 {
			t.Fatalf("claimed %d rows, want 4", len(jobs))
		}
		byID := map[string]inbox.Job{}
		for _, j := range jobs {
			byID[j.ID] = j
			if j.Event != "job.completed" || string(j.Body) != jobBody(j.ID) || j.Attempt != 1 {
				t.Errorf("claimed job = %+v", j)
			}
		}
		at := t0.Add(time.Second)
		stale := e.settle("a", at,
			inbox.Settlement{Job: byID["job_done"], Fate: inbox.FateDone, At: at},
			inbox.Settlement{Job: byID["job_retry"], Fate: inbox.FateRetry, At: at, RetryAt: at.Add(5 * time.Second), Error: "HTTP 503"},
			inbox.Settlement{Job: byID["job_park"], Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"},
			inbox.Settlement{Job: byID["job_release"], Fate: inbox.FateRelease, At: at},
		)
		if stale != 0 {
			t.Fatalf("settle: stale %d", stale)
		}
		if r := e.get("job_done"); r.Status != inbox.StatusDone || !r.DoneAt.Equal(at) || !r.UpdatedAt.Equal(at) ||
			r.LeaseOwner != "" || !r.LeaseUntil.IsZero() || r.Attempts != 1 {
			t.Errorf("done row = %+v", r)
		}
		if r := e.get("job_retry"); r.Status != inbox.StatusNew || !r.NextAttemptAt.Equal(at.Add(5*time.Second)) ||
			r.LastError != "HTTP 503" || r.LeaseOwner != "" || r.Attempts != 1 {
			t.Errorf("retried row = %+v", r)
		}
		if r := e.get("job_park"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected ||
			r.LastError != "HTTP 422" || !r.UpdatedAt.Equal(at) || r.LeaseOwner != "" {
			t.Errorf("parked row = %+v", r)
		}
		if r := e.get("job_release"); r.Status != inbox.StatusNew || r.Attempts != 0 || r.LeaseOwner != "" {
			t.Errorf("released row = %+v", r)
		}

		q, err := e.s.Queue(context.Background(), at)
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
		if got := ids(e.claim("b", at, time.Minute, 10)); !slices.Equal(got, []string{"job_release#1"}) {
			t.Errorf("claim before the retry time = %v", got)
		}
		if got := ids(e.claim("b", at.Add(5*time.Second), time.Minute, 10)); !slices.Equal(got, []string{"job_retry#2"}) {
			t.Errorf("claim at the retry time = %v", got)
		}
		due, ok, err := e.s.NextDue(context.Background())
		if err != nil || !ok || !due.Equal(at.Add(time.Minute)) {
			t.Errorf("next due = %v %v %v, want the first lease's end %v", due, ok, err, at.Add(time.Minute))
		}
		st := e.stats()
		if st.Attempts[inbox.StatusNew] != 3 || st.Attempts[inbox.StatusDone] != 1 || st.Attempts[inbox.StatusParked] != 1 {
			t.Errorf("attempts by status = %v, want new 3, done 1, parked 1", st.Attempts)
		}
	})

	t.Run("settle and claim in one call", func(t *testing.T) {
		e := o.fresh(t)
		e.queued("job_1", "job_2")
		first := e.claim("a", t0, time.Minute, 1)
		at := t0.Add(time.Second)
		e.clock.Set(at)
		jobs, stale, err := e.s.Settle(context.Background(), "a",
			[]inbox.Settlement{{Job: first[0], Fate: inbox.FateDone, At: at}},
			inbox.Claim{Now: at, Until: at.Add(time.Minute), Max: 5})
		if err != nil || stale != 0 {
			t.Fatalf("settle: %d stale, %v", stale, err)
		}
		if got := ids(jobs); !slices.Equal(got, []string{"job_2#1"}) {
			t.Errorf("claimed %v, want job_2", got)
		}
		if r := e.get(first[0].ID); r.Status != inbox.StatusDone {
			t.Errorf("settled row = %+v, want done", r)
		}
	})

	t.Run("many done at once", func(t *testing.T) {
		e := o.fresh(t)
		const n = 1100
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = jobBody(fmt.Sprintf("job_%04d", i))
		}
		e.putAll(bodies...)
		jobs := e.claim("a", t0, time.Minute, n)
		if len(jobs) != n {
			t.Fatalf("claimed %d, want %d", len(jobs), n)
		}
		settled := make([]inbox.Settlement, n)
		for i, j := range jobs {
			settled[i] = inbox.Settlement{Job: j, Fate: inbox.FateDone, At: t0.Add(time.Second)}
		}
		if stale := e.settle("a", t0.Add(time.Second), settled...); stale != 0 {
			t.Errorf("stale = %d", stale)
		}
		if c, err := e.s.CountByStatus(context.Background()); err != nil || c[inbox.StatusDone] != n || c[inbox.StatusNew] != 0 {
			t.Errorf("counts %v %v, want %d done", c, err, n)
		}
	})

	t.Run("refused", func(t *testing.T) {
		e := o.fresh(t)
		e.queued("job_1")
		ctx := context.Background()
		if _, _, err := e.s.Settle(ctx, "", nil, inbox.Claim{Now: t0, Until: t0.Add(time.Minute), Max: 1}); err == nil {
			t.Error("settle with no owner: no error")
		}
		if _, _, err := e.s.Settle(ctx, "a", nil, inbox.Claim{Now: t0, Until: t0, Max: 1}); err == nil {
			t.Error("a lease that ends when it starts: no error")
		}
		j := e.claim("a", t0, time.Minute, 1)[0]
		for _, st := range []inbox.Settlement{
			{Job: j, Fate: inbox.FatePark, At: t0, Reason: "lost"},
			{Job: j, Fate: inbox.Fate(99), At: t0},
		} {
			if _, _, err := e.s.Settle(ctx, "a", []inbox.Settlement{st}, inbox.Claim{}); err == nil {
				t.Errorf("settlement %+v: no error", st)
			}
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew || r.LeaseOwner != "a" {
			t.Errorf("a refused settlement changed the row: %+v", r)
		}
	})

	t.Run("empty queue", func(t *testing.T) {
		e := o.fresh(t)
		if _, ok, err := e.s.NextDue(context.Background()); ok || err != nil {
			t.Errorf("next due on an empty store: %v %v", ok, err)
		}
		e.put(classify(`not json`))
		if _, ok, err := e.s.NextDue(context.Background()); ok || err != nil {
			t.Errorf("next due with only a parked row: %v %v", ok, err)
		}
		q, err := e.s.Queue(context.Background(), t0)
		if err != nil || q != (inbox.Queue{}) || q.Age(t0) != 0 {
			t.Errorf("queue = %+v %v, want zero", q, err)
		}
		e.put(job("job_1"))
		if due, ok, err := e.s.NextDue(context.Background()); !ok || err != nil || due.After(t0) {
			t.Errorf("next due with a fresh row = %v %v %v, want due now", due, ok, err)
		}
	})

	t.Run("handler parked", func(t *testing.T) {
		// A row the dispatcher parked comes back only through reprocess:
		// a later delivery of its job is counted on it.
		e := o.fresh(t)
		e.queued("job_1")
		j := e.claim("a", t0, time.Minute, 1)[0]
		e.settle("a", t0, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: t0, Reason: inbox.ReasonHandlerFailed, Error: "exit status 1"})
		if res := e.put(job("job_1")); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("a repeat onto a handler_failed row: %s, want duplicate", res.Outcome)
		}
		other := classify(`{"event":"job.failed","job_id":"job_1","status":"ERROR"}`)
		if res := e.put(other); res.Reason != inbox.ReasonConflict {
			t.Errorf("another event onto a handler_failed row: %+v, want parked conflict beside it", res)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusParked || r.Deliveries != 2 {
			t.Fatalf("row after the deliveries = %+v, want still parked, 2 deliveries", r)
		}
		if got := e.claim("a", t0.Add(time.Hour), time.Minute, 10); len(got) != 0 {
			t.Fatalf("claimed a parked row: %v", ids(got))
		}

		rep, err := e.s.Reprocess(context.Background(), inbox.Selection{Reason: inbox.ReasonHandlerFailed}, inbox.SourceRules{inbox.DefaultSource: rules}, false)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("reprocess: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if rep.Moved != 1 {
			t.Errorf("reprocess moved %d, want 1", rep.Moved)
		}
		r := e.get("job_1")
		if r.Status != inbox.StatusNew || r.Attempts != 0 || r.LeaseOwner != "" || !r.LeaseUntil.IsZero() ||
			r.LastError != "" || !r.NextAttemptAt.IsZero() || r.Deliveries != 2 {
			t.Errorf("reprocessed row = %+v, want new, no attempts, lease or error", r)
		}
		if got := ids(e.claim("a", t0.Add(time.Hour), time.Minute, 10)); !slices.Equal(got, []string{"job_1#1"}) {
			t.Errorf("claim after reprocess = %v, want job_1 at attempt 1", got)
		}
	})
}
