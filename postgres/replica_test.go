package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/inbox/storetest"
	"inbox/postgres"
)

// The suite's rules and deliveries, for this package's own tests.
var (
	rules  = storetest.Rules
	job    = storetest.Job
	failed = storetest.Failed
)

// replicas opens n stores on one schema at once, as replicas starting
// together would: their migrations take turns.
func replicas(t *testing.T, n int, opts postgres.Options) []*postgres.Store {
	t.Helper()
	dsn := testURL(t)
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(context.Background(), dsn, opts) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open replica %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	return stores
}

// TestReplicasPutOverlappingKeys has three stores on one database take the
// same keys at once from many goroutines each, every key as its job event
// and some as another event too: one row per key (and one beside it for
// the other event), every delivery counted exactly once.
func TestReplicasPutOverlappingKeys(t *testing.T) {
	t.Parallel()
	putOverlapping(t, replicas(t, 3, postgres.Options{}), 8)
}

// putOverlapping has perStore goroutines on each of stores put the same
// keys at once, in an order of their own, every key as its job event and
// some as another event too, and checks that each key made one row (and
// one beside it for the other event), every delivery counted exactly once.
func putOverlapping(t *testing.T, stores []*postgres.Store, perStore int) {
	t.Helper()
	const keys, conflicting = 100, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[inbox.Outcome]int{}
	var firstErr error
	start := time.Now()
	for _, s := range stores {
		for range perStore {
			wg.Go(func() {
				order := rand.Perm(keys)
				for _, k := range order {
					ds := []inbox.Delivery{job(fmt.Sprintf("job_%03d", k))}
					if k < conflicting {
						ds = append(ds, failed(fmt.Sprintf("job_%03d", k)))
					}
					for _, d := range ds {
						res, err := s.Put(context.Background(), d)
						mu.Lock()
						if err != nil && firstErr == nil {
							firstErr = err
						}
						outcomes[res.Outcome]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	senders := len(stores) * perStore
	puts := senders * (keys + conflicting)
	t.Logf("%d puts from %d goroutines on %d stores in %s (%.0f/s)", puts, senders, len(stores), time.Since(start), float64(puts)/time.Since(start).Seconds())
	if firstErr != nil {
		t.Fatalf("put: %v", firstErr)
	}
	if outcomes[inbox.OutcomeStored] != keys || outcomes[inbox.OutcomeParked] != conflicting ||
		outcomes[inbox.OutcomeDuplicate] != puts-keys-conflicting {
		t.Errorf("outcomes %v, want %d stored, %d parked, the rest duplicate", outcomes, keys, conflicting)
	}
	rows, err := stores[0].List(context.Background(), inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != keys+conflicting {
		t.Fatalf("%d rows, want %d", len(rows), keys+conflicting)
	}
	for _, r := range rows {
		if r.Deliveries != int64(senders) {
			t.Errorf("%s (%s %s) has %d deliveries, want %d", r.ID, r.Status, r.Reason, r.Deliveries, senders)
		}
	}
}

// TestClaimersNeverShareARow has three dispatchers, one per replica, claim
// the same queue at once: each row is claimed once, by one of them, and
// every row is handed on.
func TestClaimersNeverShareARow(t *testing.T) {
	t.Parallel()
	stores := replicas(t, 3, postgres.Options{})
	const n = 1500
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := stores[i%3].Put(context.Background(), job(fmt.Sprintf("job_%04d", i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var mu sync.Mutex
	claimedBy := map[string]string{}
	var twice []string
	perOwner := map[string]int{}
	for i, s := range stores {
		for w := range 2 {
			owner := fmt.Sprintf("replica%d-%d", i, w)
			wg.Go(func() {
				var pending []inbox.Settlement
				for {
					now := time.Now()
					jobs, stale, err := s.Settle(context.Background(), owner, pending, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 25})
					if err != nil {
						t.Errorf("%s: settle: %v", owner, err)
						return
					}
					if stale != 0 {
						t.Errorf("%s: %d stale settlements", owner, stale)
					}
					pending = pending[:0]
					if len(jobs) == 0 {
						return
					}
					mu.Lock()
					for _, j := range jobs {
						if prev, ok := claimedBy[j.ID]; ok {
							twice = append(twice, fmt.Sprintf("%s by %s and %s", j.ID, prev, owner))
						}
						claimedBy[j.ID] = owner
						perOwner[owner]++
					}
					mu.Unlock()
					for _, j := range jobs {
						pending = append(pending, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: time.Now()})
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("claims per dispatcher: %v", perOwner)
	if len(twice) > 0 {
		t.Fatalf("%d rows claimed twice, e.g. %s", len(twice), twice[0])
	}
	if len(claimedBy) != n {
		t.Errorf("%d rows claimed, want %d", len(claimedBy), n)
	}
	counts, err := stores[0].CountByStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if counts[inbox.StatusDone] != n {
		t.Errorf("counts %v, want %d done", counts, n)
	}
}

// TestLeaseOnTheDatabaseClock claims from dispatchers whose clocks are an
// hour off: the lease runs for its length on the database's clock, so a
// dispatcher an hour ahead cannot take over a row another just claimed,
// and one an hour behind still finds rows due.
func TestLeaseOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, testURL(t), postgres.Options{})
	ctx := context.Background()
	for _, id := range []string{"job_1", "job_2"} {
		if _, err := s.Put(ctx, job(id)); err != nil {
			t.Fatal(err)
		}
	}
	behind := time.Now().Add(-time.Hour)
	jobs, _, err := s.Settle(ctx, "behind", nil, inbox.Claim{Now: behind, Until: behind.Add(30 * time.Second), Max: 1})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim from a clock an hour behind: %v %v, want one row", jobs, err)
	}
	e, err := s.Get(ctx, jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if until := time.Until(e.LeaseUntil); until < 20*time.Second || until > 40*time.Second {
		t.Errorf("lease ends in %s, want about 30s from now", until)
	}
	ahead := time.Now().Add(time.Hour)
	jobs, _, err = s.Settle(ctx, "ahead", nil, inbox.Claim{Now: ahead, Until: ahead.Add(30 * time.Second), Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID == e.ID {
		t.Errorf("a clock an hour ahead claimed %v, want only the unclaimed row", jobs)
	}
	// The next due time is on the caller's clock: the lease's end.
	due, ok, err := s.NextDue(ctx)
	if err != nil || !ok {
		t.Fatalf("next due: %v %v", ok, err)
	}
	if d := time.Until(due); d < 20*time.Second || d > 40*time.Second {
		t.Errorf("next due in %s, want about 30s", d)
	}
	// A retry is due after its delay on the database's clock.
	if _, _, err := s.Settle(ctx, "ahead", []inbox.Settlement{{Job: jobs[0], Fate: inbox.FateRetry, At: ahead, RetryAt: ahead.Add(time.Minute)}}, inbox.Claim{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(r.NextAttemptAt); d < 50*time.Second || d > 70*time.Second {
		t.Errorf("retry due in %s, want about a minute", d)
	}
}
