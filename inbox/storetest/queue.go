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
		t.Parallel()
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
		if r.Status != inbox.StatusNew || r.LeaseOwner != "a" || !r.LeaseUntil.Equal(t0.Add(lease)) || r.Attempts != 0 ||
			!r.NextAttemptAt.Equal(t0.Add(lease)) {
			t.Errorf("claimed row = %+v, want new, held by a until t0+30s, no attempt counted", r)
		}
		// a starts an attempt at job_1 only.
		first := e.started("a", "job_1", t0, t0.Add(lease))
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
		// a's leases run out: b takes the rows over, job_1 as its next
		// attempt, job_2 as its first (a never started it).
		if got := ids(e.claim("b", t0.Add(lease), lease, 5)); !slices.Equal(got, []string{"job_1#2", "job_2#1"}) {
			t.Fatalf("claim after the leases ran out = %v, want job_1 at attempt 2 and job_2 at 1", got)
		}
		stale := e.settle("a", t0.Add(lease),
			inbox.Settlement{Job: first, Fate: inbox.FateDone, At: t0.Add(lease)},
			inbox.Settlement{Job: inbox.Job{ID: "job_2", Attempt: 1}, Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, At: t0.Add(lease)},
			inbox.Settlement{Job: inbox.Job{ID: "job_3", Attempt: 1}, Fate: inbox.FateRetry, RetryAt: t0.Add(lease), At: t0.Add(lease)},
		)
		if stale != 3 {
			t.Errorf("stale = %d, want all three of a's lost claims", stale)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew || r.LeaseOwner != "b" || r.Attempts != 1 {
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
		t.Parallel()
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
		// job_retry's one attempt; b's claims start none.
		if st.Attempts[inbox.StatusNew] != 1 || st.Attempts[inbox.StatusDone] != 1 || st.Attempts[inbox.StatusParked] != 1 {
			t.Errorf("attempts by status = %v, want new 1, done 1, parked 1", st.Attempts)
		}
	})

	t.Run("start", func(t *testing.T) {
		t.Parallel()
		// A claim counts no attempt and Start does, once, only while the
		// claim holds, and renews the lease; the settle guard tells a
		// started attempt from an unstarted claim.
		e := o.fresh(t)
		e.queued("job_1", "job_2", "job_3")
		lease := time.Minute
		jobs := e.claim("a", t0, lease, 3)
		byID := map[string]inbox.Job{}
		for _, j := range jobs {
			if j.Attempt != 1 || j.Source != inbox.DefaultSource || j.Key != j.ID {
				t.Errorf("claimed %+v, want attempt 1, source sume, key = id", j)
			}
			byID[j.ID] = j
		}
		if _, ok := e.startOne("b", byID["job_1"], t0, t0.Add(lease)); ok {
			t.Error("another owner started a's claim")
		}
		at := t0.Add(10 * time.Second)
		// Two copies of one claim in one call: one starts.
		both := e.start("a", []inbox.Job{byID["job_1"], byID["job_1"]}, at, at.Add(lease))
		if len(both) != 1 || !both[0].Started() {
			t.Fatalf("start two copies: %v, want one started", both)
		}
		j1 := both[0]
		if r := e.get("job_1"); r.Attempts != 1 || !r.LeaseUntil.Equal(at.Add(lease)) || !r.NextAttemptAt.Equal(at.Add(lease)) {
			t.Errorf("started row = %+v, want 1 attempt, the lease renewed from the start", r)
		}
		if _, ok := e.startOne("a", j1, at, at.Add(lease)); ok {
			t.Error("an attempt was started twice")
		}
		if _, ok := e.startOne("a", byID["job_1"], at, at.Add(lease)); ok {
			t.Error("the unstarted copy of a started claim started")
		}
		// job_2's lease runs out before its attempt starts: it must not start.
		if _, ok := e.startOne("a", byID["job_2"], t0.Add(lease), t0.Add(2*lease)); ok {
			t.Error("started on a lease that ran out")
		}
		e.clock.Set(at)
		ctx := context.Background()
		if _, err := e.s.Start(ctx, "a", []inbox.Job{byID["job_3"]}, at, at); err == nil {
			t.Error("start with a lease that ends when it starts: no error")
		}
		// Releasing the started attempt is refused; releasing job_2 and
		// job_3, never started, counts nothing.
		if _, _, err := e.s.Settle(ctx, "a", []inbox.Settlement{{Job: j1, Fate: inbox.FateRelease, At: at}}, inbox.Claim{}); err == nil {
			t.Error("a started attempt was released")
		}
		stale := e.settle("a", at,
			inbox.Settlement{Job: byID["job_1"], Fate: inbox.FateDone, At: at}, // names the claim, not the started attempt
			inbox.Settlement{Job: byID["job_2"], Fate: inbox.FateRelease, At: at},
			inbox.Settlement{Job: byID["job_3"], Fate: inbox.FateRelease, At: at},
		)
		if stale != 1 {
			t.Fatalf("settle: stale %d; want the unstarted copy of job_1 stale", stale)
		}
		for _, id := range []string{"job_2", "job_3"} {
			if r := e.get(id); r.Attempts != 0 || r.LeaseOwner != "" {
				t.Errorf("released %s = %+v, want no attempt, no lease", id, r)
			}
		}
		if stale := e.settle("a", at, inbox.Settlement{Job: j1, Fate: inbox.FateDone, At: at}); stale != 0 {
			t.Fatalf("settle the started attempt: stale %d", stale)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusDone || r.Attempts != 1 {
			t.Errorf("done row = %+v, want done after 1 attempt", r)
		}
		// The outcome of a claim nobody started counts its attempt.
		j2 := e.claim("c", at, lease, 1)[0]
		if stale := e.settle("c", at, inbox.Settlement{Job: j2, Fate: inbox.FateRetry, At: at, RetryAt: at}); stale != 0 {
			t.Fatalf("settle an unstarted claim: stale %d", stale)
		}
		if r := e.get(j2.ID); r.Attempts != 1 {
			t.Errorf("%s attempts = %d after an outcome, want 1", j2.ID, r.Attempts)
		}
		// An attempt whose outcome is lost (its lease runs out) is never
		// a park: the row is claimed again past it, not counted ahead even
		// past a claim's LastAttempt, and is parked only by the outcome of
		// the attempt it then starts.
		j2 = e.claim("c", at, lease, 1)[0]
		if j2.Attempt != 2 {
			t.Fatalf("claimed %+v again, want attempt 2", j2)
		}
		e.startOne("c", j2, at, at.Add(lease))
		at = at.Add(lease)
		e.clock.Set(at)
		again, _, err := e.s.Settle(ctx, "d", nil, inbox.Claim{Now: at, Until: at.Add(lease), Max: 5, Start: 5, LastAttempt: 2})
		if err != nil {
			t.Fatal(err)
		}
		var lost inbox.Job
		for _, j := range again {
			if j.ID == j2.ID {
				lost = j
			}
		}
		if lost.Attempt != 3 || lost.Started() {
			t.Fatalf("claimed %+v after the lease ran out, want %s at attempt 3, not counted ahead", again, j2.ID)
		}
		if r := e.get(j2.ID); r.Status != inbox.StatusNew || r.Attempts != 2 {
			t.Errorf("row whose outcome was lost = %+v, want new, 2 attempts", r)
		}
		s3, ok := e.startOne("d", lost, at, at.Add(lease))
		if !ok {
			t.Fatal("start attempt 3")
		}
		if stale := e.settle("d", at, inbox.Settlement{Job: s3, Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"}); stale != 0 {
			t.Fatalf("settle the park: stale %d", stale)
		}
		if r := e.get(j2.ID); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerFailed || r.Attempts != 3 || r.LastError != "HTTP 500" {
			t.Errorf("parked row = %+v, want parked handler_failed by attempt 3", r)
		}
		if st := e.stats(); st.Attempts[inbox.StatusParked] != 3 || st.Attempts[inbox.StatusDone] != 1 {
			t.Errorf("attempts by status %v", st.Attempts)
		}
	})

	t.Run("claim and start in one call", func(t *testing.T) {
		t.Parallel()
		// A claim may count the attempts of some of the rows it takes, as
		// Start would: those come back started, the rest as any claim's.
		e := o.fresh(t)
		e.queued("job_1", "job_2", "job_3", "job_4")
		lease := time.Minute
		e.clock.Set(t0)
		ctx := context.Background()
		if _, _, err := e.s.Settle(ctx, "a", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 1, Start: -1}); err == nil {
			t.Error("a claim to start -1 attempts: no error")
		}
		jobs, _, err := e.s.Settle(ctx, "a", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 3, Start: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(jobs); !slices.Equal(got, []string{"job_1#1", "job_2#1", "job_3#1"}) {
			t.Fatalf("claimed %v, want the three oldest at attempt 1", got)
		}
		var started, unstarted []inbox.Job
		for _, j := range jobs {
			if j.Started() {
				started = append(started, j)
			} else {
				unstarted = append(unstarted, j)
			}
			want := int64(0)
			if j.Started() {
				want = 1
			}
			if r := e.get(j.ID); r.Attempts != want || r.LeaseOwner != "a" || !r.LeaseUntil.Equal(t0.Add(lease)) {
				t.Errorf("%s (started %v) = %+v, want %d attempts, held by a for the lease", j.ID, j.Started(), r, want)
			}
		}
		if len(started) != 2 || len(unstarted) != 1 {
			t.Fatalf("started %v, not %v; want two started", ids(started), ids(unstarted))
		}
		// The started ones settle as attempts Start counted, the other
		// starts as any claim.
		if s, ok := e.startOne("a", started[0], t0, t0.Add(lease)); ok {
			t.Errorf("%s started twice", s.ID)
		}
		if _, ok := e.startOne("a", unstarted[0], t0, t0.Add(lease)); !ok {
			t.Errorf("the claim left unstarted did not start")
		}
		if stale := e.settle("a", t0, inbox.Settlement{Job: started[0], Fate: inbox.FateDone, At: t0},
			inbox.Settlement{Job: started[1], Fate: inbox.FateUnsent, At: t0}); stale != 0 {
			t.Fatalf("settle the started claims: stale %d", stale)
		}
		if r := e.get(started[0].ID); r.Status != inbox.StatusDone || r.Attempts != 1 {
			t.Errorf("done row = %+v, want done after 1 attempt", r)
		}
		if r := e.get(started[1].ID); r.Status != inbox.StatusNew || r.Attempts != 0 || r.LeaseOwner != "" {
			t.Errorf("uncounted row = %+v, want new, no attempt, no lease", r)
		}
	})

	t.Run("claim and start no attempt past the last", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.queued("job_1")
		lease := time.Minute
		ctx := context.Background()
		e.clock.Set(t0)
		jobs, _, err := e.s.Settle(ctx, "b", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 1, Start: 1})
		if err != nil || len(jobs) != 1 || !jobs[0].Started() {
			t.Fatalf("claim and start = %v, %v; want one started", ids(jobs), err)
		}
		if stale := e.settle("b", t0, inbox.Settlement{Job: jobs[0], Fate: inbox.FateRetry, At: t0, RetryAt: t0}); stale != 0 {
			t.Fatalf("retry: stale %d", stale)
		}
		jobs, _, err = e.s.Settle(ctx, "b", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 1, Start: 1, LastAttempt: 1})
		if err != nil || len(jobs) != 1 || jobs[0].Attempt != 2 || jobs[0].Started() {
			t.Fatalf("claim past the last attempt = %v, %v; want job_1 at attempt 2, not started", ids(jobs), err)
		}
		if r := e.get("job_1"); r.Attempts != 1 {
			t.Errorf("a row claimed past its last attempt = %+v, want still 1 attempt", r)
		}
	})

	t.Run("claim and start past a row at its last attempt", func(t *testing.T) {
		t.Parallel()
		// A row claimed at an attempt past the last is not counted, and
		// does not use up what the claim may count: the next row is.
		e := o.fresh(t)
		e.queued("job_1", "job_2")
		lease := time.Minute
		ctx := context.Background()
		e.clock.Set(t0)
		jobs, _, err := e.s.Settle(ctx, "b", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 1, Start: 1})
		if err != nil || len(jobs) != 1 || jobs[0].ID != "job_1" || !jobs[0].Started() {
			t.Fatalf("claim and start = %v, %v; want job_1 started", ids(jobs), err)
		}
		if stale := e.settle("b", t0, inbox.Settlement{Job: jobs[0], Fate: inbox.FateRetry, At: t0, RetryAt: t0}); stale != 0 {
			t.Fatalf("retry: stale %d", stale)
		}
		jobs, _, err = e.s.Settle(ctx, "b", nil, inbox.Claim{Now: t0, Until: t0.Add(lease), Max: 2, Start: 1, LastAttempt: 1})
		if err != nil || len(jobs) != 2 {
			t.Fatalf("claim = %v, %v; want both rows", ids(jobs), err)
		}
		for _, j := range jobs {
			if want := j.ID == "job_2"; j.Started() != want {
				t.Errorf("%s at attempt %d started %v, want %v", j.ID, j.Attempt, j.Started(), want)
			}
		}
		if r := e.get("job_1"); r.Attempts != 1 {
			t.Errorf("the row claimed past its last attempt = %+v, want still 1 attempt", r)
		}
		if r := e.get("job_2"); r.Attempts != 1 {
			t.Errorf("the row counted = %+v, want 1 attempt", r)
		}
	})

	t.Run("uncount an attempt not sent", func(t *testing.T) {
		t.Parallel()
		// A counted attempt the dispatcher never sent is undone: the row
		// is claimable at once, at the attempt it would have been.
		e := o.fresh(t)
		e.queued("job_1", "job_2")
		lease := time.Minute
		jobs := e.claim("a", t0, lease, 2)
		if len(jobs) != 2 {
			t.Fatalf("claimed %v, want both", ids(jobs))
		}
		at := t0.Add(time.Second)
		started := e.start("a", jobs, at, at.Add(lease))
		if len(started) != 2 {
			t.Fatalf("started %v, want both", ids(started))
		}
		ctx := context.Background()
		e.clock.Set(at)
		if _, _, err := e.s.Settle(ctx, "a", []inbox.Settlement{{Job: jobs[0], Fate: inbox.FateUnsent, At: at}}, inbox.Claim{}); err == nil {
			t.Error("an attempt never started was uncounted")
		}
		if stale := e.settle("b", at, inbox.Settlement{Job: started[0], Fate: inbox.FateUnsent, At: at}); stale != 1 {
			t.Errorf("another owner's uncount: stale %d, want 1", stale)
		}
		if stale := e.settle("a", at, inbox.Settlement{Job: started[0], Fate: inbox.FateUnsent, At: at}); stale != 0 {
			t.Fatalf("uncount: stale %d", stale)
		}
		if r := e.get(started[0].ID); r.Status != inbox.StatusNew || r.Attempts != 0 || r.LeaseOwner != "" {
			t.Errorf("uncounted row = %+v, want new, no attempt, no lease", r)
		}
		if r := e.get(started[1].ID); r.Attempts != 1 || r.LeaseOwner != "a" {
			t.Errorf("the other started row = %+v, want 1 attempt, held by a", r)
		}
		if stale := e.settle("a", at, inbox.Settlement{Job: started[0], Fate: inbox.FateUnsent, At: at}); stale != 1 {
			t.Errorf("a second uncount: stale %d, want 1", stale)
		}
		if got := ids(e.claim("b", at, lease, 5)); !slices.Equal(got, []string{started[0].ID + "#1"}) {
			t.Errorf("claim after the uncount = %v, want %s at attempt 1", got, started[0].ID)
		}
	})

	t.Run("settle and claim in one call", func(t *testing.T) {
		t.Parallel()
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
		t.Parallel()
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
		t.Parallel()
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
		t.Parallel()
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
		t.Parallel()
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
