package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
)

func runReconcile(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("refusals cleared by delivery", func(t *testing.T) {
		t.Parallel()
		// Refusals add up; a delivery of a key clears its refusal in the
		// commit that stores it; a key already stored is never recorded.
		e := o.fresh(t)
		e.put(job("job_stored"))
		refs := []inbox.Refusal{
			{Key: "job_a", JobID: "job_a", Event: "job.completed", First: t0, Last: t0.Add(time.Second), Count: 2},
			{Key: "job_b", JobID: "job_b", Event: "job.failed", First: t0.Add(time.Minute), Last: t0.Add(time.Minute), Count: 1},
			{Key: "job_stored", JobID: "job_stored", First: t0, Last: t0, Count: 1},
			{Source: "gh", Key: "gh/d1", First: t0.Add(2 * time.Minute), Last: t0, Count: 0},
		}
		if err := e.s.RecordRefusals(ctx, refs); err != nil {
			t.Fatal(err)
		}
		// The same key again, refused earlier and later: the times widen, the counts add.
		if err := e.s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_a", JobID: "job_a", First: t0.Add(-time.Second), Last: t0.Add(time.Hour), Count: 3}}); err != nil {
			t.Fatal(err)
		}
		if err := e.s.RecordRefusals(ctx, nil); err != nil {
			t.Fatal(err)
		}
		missed, err := e.s.Missed(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(missed) != 3 || missed[0].Key != "job_a" || missed[1].Key != "job_b" || missed[2].Key != "gh/d1" {
			t.Fatalf("missed = %+v, want job_a, job_b and gh/d1", missed)
		}
		a := missed[0]
		if a.Source != "sume" || a.Count != 5 || !a.First.Equal(t0.Add(-time.Second)) || !a.Last.Equal(t0.Add(time.Hour)) || a.Event != "job.completed" || a.JobID != "job_a" {
			t.Errorf("job_a = %+v, want 5 refusals from t0-1s to t0+1h", a)
		}
		if gh := missed[2]; gh.Source != "gh" || gh.Count != 1 || !gh.Last.Equal(gh.First) {
			t.Errorf("gh/d1 = %+v, want one refusal, last at its first", gh)
		}
		if older, err := e.s.Missed(ctx, t0.Add(time.Second)); err != nil || len(older) != 1 || older[0].Key != "job_a" {
			t.Errorf("missed before t0+1s = %+v, %v; want job_a alone", older, err)
		}
		r, err := e.s.Reconciliation(ctx, t0)
		if err != nil || r.Missed != 3 || !r.OldestMissed.Equal(t0.Add(-time.Second)) {
			t.Errorf("reconciliation = %+v, %v; want 3 missed, the oldest at t0-1s", r, err)
		}
		e.put(job("job_a"))
		e.put(keyed("gh", "d1", "push", []byte(`{}`), 1, inbox.Rules{}))
		missed, err = e.s.Missed(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(missed) != 1 || missed[0].Key != "job_b" {
			t.Fatalf("after job_a's and gh/d1's deliveries, missed = %+v, want job_b alone", missed)
		}
		// A delivery parked beside a stored row clears its key's refusal too.
		e.put(job("job_b"))
		if err := e.s.RecordRefusals(ctx, []inbox.Refusal{{Key: "job_c", JobID: "job_c", First: t0, Last: t0, Count: 1}}); err != nil {
			t.Fatal(err)
		}
		e.put(classify(exploded("job_c")))
		if missed, err := e.s.Missed(ctx, time.Time{}); err != nil || len(missed) != 0 {
			t.Errorf("after every key was delivered, missed = %+v, %v", missed, err)
		}
	})

	t.Run("expected only", func(t *testing.T) {
		t.Parallel()
		// A source with expected_only: a job with an expectation (waiting
		// or done) lands new and settles it; one without is parked
		// unknown_job, concurrently too, and a repeat of it counts on that
		// row; a job of a source without it lands as ever.
		e := o.fresh(t)
		only := rules
		only.ExpectedOnly = true
		expectOnly := func(id string) inbox.Delivery {
			return inbox.Classify("", inbox.Named{}, []byte(jobBody(id)), deliveryTS, only)
		}
		if _, err := e.s.Expect(ctx, []string{"job_exp", "job_twice"}, "", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if res := e.put(expectOnly("job_exp")); res.Outcome != inbox.OutcomeStored {
			t.Fatalf("an expected job: %+v, want stored", res)
		}
		if r := e.get("job_exp"); r.Status != inbox.StatusNew {
			t.Errorf("an expected job's row = %s, want new", r.Status)
		}
		e.put(expectOnly("job_twice"))
		if res := e.put(expectOnly("job_twice")); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("an expected job again, its expectation done: %+v, want duplicate", res)
		}
		res := e.put(expectOnly("job_nobody"))
		if res.Outcome != inbox.OutcomeParked || res.Reason != inbox.ReasonUnknownJob {
			t.Fatalf("a job nobody expected: %+v, want parked unknown_job", res)
		}
		if r := e.get("job_nobody"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonUnknownJob {
			t.Errorf("its row = %s %s, want parked unknown_job", r.Status, r.Reason)
		}
		if res := e.put(expectOnly("job_nobody")); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("it again: %+v, want duplicate", res)
		}
		if res := e.put(job("job_plain")); res.Outcome != inbox.OutcomeStored {
			t.Errorf("a job of a source without expected_only: %+v, want stored", res)
		}
		// A batch that mixes them (group commit).
		var wg sync.WaitGroup
		results := make([]inbox.Result, 8)
		for i := range results {
			id := fmt.Sprintf("job_batch_%d", i)
			if i%2 == 0 {
				if _, err := e.s.Expect(ctx, []string{id}, "", t0.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.s.Put(ctx, expectOnly(id))
				if err != nil {
					t.Error(err)
				}
				results[i] = r
			}()
		}
		wg.Wait()
		for i, r := range results {
			want := inbox.OutcomeStored
			if i%2 == 1 {
				want = inbox.OutcomeParked
			}
			if r.Outcome != want {
				t.Errorf("job_batch_%d: %+v, want %v", i, r, want)
			}
		}
		exp, err := e.s.Expected(ctx, t0, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range exp {
			if x.State != inbox.ExpectDone {
				t.Errorf("expectation %s = %s, want done by its delivery", x.JobID, x.State)
			}
		}
	})

	t.Run("expectations", func(t *testing.T) {
		t.Parallel()
		// An expectation's life: expected, already stored (done at once),
		// claimed by one poller only, settled, stale settlements ignored,
		// closed, and done by a delivery.
		e := o.fresh(t)
		e.put(job("job_early"))
		due := t0.Add(time.Hour)
		got, err := e.s.Expect(ctx, []string{"job_a", "job_b", "job_early"}, "", due)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].State != inbox.ExpectWaiting || got[2].State != inbox.ExpectDone ||
			!got[0].DueAt.Equal(due) || !got[0].ExpectedAt.Equal(t0) || got[0].Overdue {
			t.Fatalf("expect = %+v, want job_a waiting until t0+1h and job_early done", got)
		}
		if _, err := e.s.Expect(ctx, []string{"job_x", "sha256:abc"}, "", due); !errors.Is(err, inbox.ErrInvalidJobID) {
			t.Errorf("expect sha256:abc: %v, want ErrInvalidJobID", err)
		}
		if next, ok, err := e.s.NextPoll(ctx); err != nil || !ok || !next.Equal(due) {
			t.Errorf("next poll = %v %v %v, want %v", next, ok, err, due)
		}

		claim := func(owner string, now, until time.Time) []inbox.Poll {
			t.Helper()
			e.clock.Set(now)
			polls, err := e.s.ClaimPolls(ctx, owner, now, until, 10)
			if err != nil {
				t.Fatalf("claim polls for %s: %v", owner, err)
			}
			return polls
		}
		settle := func(owner string, at time.Time, results ...inbox.PollResult) int {
			t.Helper()
			e.clock.Set(at)
			stale, err := e.s.SettlePolls(ctx, owner, results)
			if err != nil {
				t.Fatalf("settle polls for %s: %v", owner, err)
			}
			return stale
		}
		// Nothing is due before its time.
		if polls := claim("p1", t0, t0.Add(time.Minute)); len(polls) != 0 {
			t.Fatalf("claim before due = %+v; want none", polls)
		}
		later := due.Add(time.Second)
		if over, err := e.s.Expected(ctx, later, true); err != nil || len(over) != 2 || !over[0].Overdue {
			t.Fatalf("overdue = %+v, %v; want job_a and job_b", over, err)
		}
		polls := claim("p1", later, later.Add(time.Minute))
		if len(polls) != 2 {
			t.Fatalf("claim = %+v; want job_a and job_b", polls)
		}
		// A second poller finds them held until the lease ends.
		if other := claim("p2", later.Add(30*time.Second), later.Add(2*time.Minute)); len(other) != 0 {
			t.Fatalf("second poller claimed %+v; want none", other)
		}
		var a, b inbox.Poll
		for _, p := range polls {
			switch p.JobID {
			case "job_a":
				a = p
			case "job_b":
				b = p
			}
		}
		if a.Attempt != 1 || a.Source != inbox.DefaultSource || !a.DueAt.Equal(due) {
			t.Errorf("poll of job_a = %+v, want poll 1, due at t0+1h", a)
		}
		// job_b is delivered while its poll is under way: the settlement is stale.
		e.put(job("job_b"))
		stale := settle("p1", later,
			inbox.PollResult{Poll: a, Fate: inbox.PollRedelivered, At: later, Next: later.Add(10 * time.Minute), JobStatus: "COMPLETED"},
			inbox.PollResult{Poll: b, Fate: inbox.PollRedelivered, At: later, Next: later.Add(10 * time.Minute), JobStatus: "COMPLETED"},
		)
		if stale != 1 {
			t.Fatalf("settle: stale %d; want 1 (job_b delivered meanwhile)", stale)
		}
		all, err := e.s.Expected(ctx, later, false)
		if err != nil {
			t.Fatal(err)
		}
		byJob := map[string]inbox.Expectation{}
		for _, x := range all {
			byJob[x.JobID] = x
		}
		if x := byJob["job_a"]; x.State != inbox.ExpectWaiting || x.Redeliveries != 1 || x.Polls != 1 || x.JobStatus != "COMPLETED" ||
			!x.NextPollAt.Equal(later.Add(10*time.Minute)) || !x.PolledAt.Equal(later) {
			t.Errorf("job_a = %+v, want waiting, one redelivery, next poll in 10m", x)
		}
		if x := byJob["job_b"]; x.State != inbox.ExpectDone || x.Redeliveries != 1 || !x.SettledAt.Equal(later.Add(30*time.Second)) {
			t.Errorf("job_b = %+v, want done by its delivery, the redelivery asked for meanwhile counted", x)
		}
		if _, err := e.s.SettlePolls(ctx, "p1", []inbox.PollResult{{Poll: a, Fate: inbox.PollFate(99), At: later}}); err == nil {
			t.Error("an unknown poll fate: no error")
		}

		// Polled again once due, and closed: the provider does not know it.
		at := later.Add(11 * time.Minute)
		polls = claim("p2", at, at.Add(time.Minute))
		if len(polls) != 1 || polls[0].JobID != "job_a" || polls[0].Attempt != 2 || polls[0].Redeliveries != 1 {
			t.Fatalf("second claim = %+v; want job_a at poll 2", polls)
		}
		// The first poller's claim is gone.
		if stale := settle("p1", at, inbox.PollResult{Poll: a, Fate: inbox.PollClose, At: at, Reason: "old"}); stale != 1 {
			t.Fatalf("settle of a lost claim: stale %d; want 1", stale)
		}
		settle("p2", at, inbox.PollResult{Poll: polls[0], Fate: inbox.PollClose, At: at, Reason: "Sume does not know job_a"})
		all, _ = e.s.Expected(ctx, at, false)
		for _, x := range all {
			if x.JobID == "job_a" && (x.State != inbox.ExpectClosed || x.Reason != "Sume does not know job_a" || !x.NextPollAt.IsZero()) {
				t.Errorf("job_a = %+v, want closed with the reason", x)
			}
		}
		if _, ok, err := e.s.NextPoll(ctx); ok || err != nil {
			t.Errorf("next poll with none waiting: %v %v", ok, err)
		}
		r, err := e.s.Reconciliation(ctx, at)
		if err != nil || r.Done != 2 || r.Closed != 1 || r.Waiting != 0 || r.Overdue != 0 {
			t.Errorf("reconciliation = %+v, %v; want 2 done, 1 closed", r, err)
		}
		// Expected again: a closed one waits anew, a done one stays done.
		got, err = e.s.Expect(ctx, []string{"job_a", "job_b"}, "https://api.example/jobs/job_a", at.Add(time.Hour))
		if err != nil || len(got) != 2 || got[0].State != inbox.ExpectWaiting || got[0].Reason != "" || got[1].State != inbox.ExpectDone {
			t.Errorf("expect again = %+v, %v; want job_a waiting, job_b done", got, err)
		}
		if r, err := e.s.Reconciliation(ctx, at); err != nil || r.Waiting != 1 || r.Done != 2 {
			t.Errorf("reconciliation = %+v, %v; want 1 waiting, 2 done", r, err)
		}
	})
}
