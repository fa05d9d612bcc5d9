package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The queue's writes as every store makes them: Settle (the settlements of
// claimed rows, then the next claim) and Start (the attempts counted as
// they start). A store implements only the statements (QueueStore); the
// checks, the order and the counting are here, so that every store refuses
// the same calls with the same words, and writes nothing for them.

// QueueStore is what a store implements of Settle and Start.
type QueueStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// InQueueTx runs fn in one write transaction, committed when fn
	// returns nil; a store may run fn again in a new one. The times given
	// to the transaction are on the caller's clock, which reads ref at the
	// start of the transaction: a store whose clock is the database's
	// places them relative to it.
	InQueueTx(ctx context.Context, ref time.Time, fn func(QueueTx) error) error
}

// QueueTx is a store's transaction of queue writes, which runs its
// statements under a context of its own: a store may share the
// transaction with other callers' writes, which a caller that gives up
// must not interrupt. Each write matches a
// row only while the claim a Job names holds: the same owner, and the
// attempt count the claim left (or Start made) unchanged (HeldAttempts).
type QueueTx interface {
	// Lock locks, in id order, the rows of ids (sorted) that no other
	// transaction holds, for the rest of the transaction, waiting for
	// none, and returns the ids of those another holds. A store whose
	// write transaction holds every row at once returns none.
	Lock(ids []string) (held []string, err error)
	// Settle records st, of any fate but FateDone, unless its claim is
	// gone (false).
	Settle(owner string, st Settlement) (bool, error)
	// SettleDone marks done the rows of done whose claims hold, and
	// returns how many it marked.
	SettleDone(owner string, done []Settlement) (int, error)
	// Claim leases up to claim.Max due new rows, oldest due first, to
	// owner until claim.Until, counts in the same statements the attempts
	// of those claim.Counts takes in that order (as Start does from
	// claim.Now to claim.Until), and returns the jobs, each Attempt its
	// count's next, with the ids of the rows it counted.
	Claim(owner string, claim Claim) (jobs []Job, counted []string, err error)
	// Start counts the attempts of jobs whose claims hold and whose
	// leases have not run out at now, renews those leases to run out at
	// until, and returns the ids of the rows it counted.
	Start(owner string, jobs []Job, now, until time.Time) ([]string, error)
	// Unrouted returns up to max new rows not yet routed, oldest first,
	// passing over rows another transaction holds.
	Unrouted(max int) ([]Unrouted, error)
	// AddPairs adds the pairs, new and due at now; a parked pair becomes
	// new again with no attempt, any other is left as it is.
	AddPairs(pairs []Pair, now time.Time) error
	// Mirror sets the queue columns of the new rows ids names from their
	// pairs (new while any is new, else parked while any is parked, else
	// done), and marks each routed; a row with no pair is done at now.
	Mirror(ids []string, now time.Time) error
}

// Settle records on store the settlements of rows that owner claimed, then
// claims rows as claim asks (none when claim.Max is 0) for owner, counting
// the attempts of up to claim.Start of them, in one transaction, the settlements in id order (the order deliveries lock rows
// in). A settlement whose claim is gone changes nothing and is counted in
// stale. It fails, writing nothing, when CheckSettle refuses the call,
// when the store is read-only, and when the store cannot take the write.
//
// A row another session holds (Lock) does not hold up the rest: the other
// settlements and the claim commit without it, and its settlement is tried
// again in a transaction of its own every settleRetry until it commits or
// ctx is done. Then Settle returns the jobs claimed and the stale count
// with a *PartialError naming the settlements not recorded, which the
// caller settles again; each was recorded at most once.
func Settle(ctx context.Context, store QueueStore, owner string, settled []Settlement, claim Claim) (jobs []Job, stale int, err error) {
	if err := CheckSettle(owner, settled, claim); err != nil {
		return nil, 0, fmt.Errorf("settle: %w", err)
	}
	if store.ReadOnly() {
		return nil, 0, errors.New("settle: store is read-only")
	}
	// The caller's times are placed on the store's clock from claim.Now,
	// or, with no claim, from the latest settlement.
	ref := claim.Now
	for _, st := range settled {
		if claim.Now.IsZero() && st.At.After(ref) {
			ref = st.At
		}
	}
	todo := slices.Clone(settled)
	slices.SortStableFunc(todo, func(a, b Settlement) int { return strings.Compare(a.Job.ID, b.Job.ID) })
	for round := 0; ; round++ {
		var c Claim
		if round == 0 {
			c = claim
		}
		got, n, held, err := settleTx(ctx, store, ref, owner, todo, c)
		if err != nil && round == 0 {
			return nil, 0, fmt.Errorf("settle: %w", err)
		}
		if err != nil {
			return jobs, stale, &PartialError{Held: todo, Err: err}
		}
		jobs, stale, todo = append(jobs, got...), stale+n, held
		if len(todo) == 0 {
			return jobs, stale, nil
		}
		if _, ok := ctx.Deadline(); !ok {
			return jobs, stale, &PartialError{Held: todo, Err: errHeld}
		}
		select {
		case <-ctx.Done():
			return jobs, stale, &PartialError{Held: todo, Err: errHeld}
		case <-time.After(settleRetry):
		}
	}
}

// settleRetry is how soon Settle tries again the settlements whose rows
// another session held.
const settleRetry = 20 * time.Millisecond

// errHeld is why a settlement whose row another session held was not
// recorded.
var errHeld = errors.New("the row is held by another session (a transaction left open?) past the busy timeout")

// PartialError is Settle's error when it recorded all but Held (and made
// its claim): their rows were held by another session until ctx was done,
// or the transaction that tried them again failed (Err).
type PartialError struct {
	Held []Settlement
	Err  error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("settle: %d of the settlements not recorded: %v", len(e.Held), e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// settleTx records, in one transaction, the settlements of settled (in id
// order) whose rows no other session holds, then claims as claim asks, and
// returns the jobs claimed, the stale count and the settlements held.
func settleTx(ctx context.Context, store QueueStore, ref time.Time, owner string, settled []Settlement, claim Claim) (jobs []Job, stale int, held []Settlement, err error) {
	ids := make([]string, len(settled))
	for i, st := range settled {
		ids[i] = st.Job.ID
	}
	// fn may still run after ctx is done and the store has returned: it
	// writes only its own variables, read only after it succeeded.
	var gotJobs []Job
	var gotStale int
	var gotHeld []Settlement
	err = store.InQueueTx(ctx, ref, func(tx QueueTx) error {
		gotJobs, gotStale, gotHeld = nil, 0, nil
		heldIDs := map[string]bool{}
		if len(ids) > 0 {
			h, err := tx.Lock(slices.Compact(slices.Clone(ids)))
			if err != nil {
				return err
			}
			for _, id := range h {
				heldIDs[id] = true
			}
		}
		var done []Settlement
		for _, st := range settled {
			switch {
			case heldIDs[st.Job.ID]:
				gotHeld = append(gotHeld, st)
				continue
			case st.Fate == FateDone:
				done = append(done, st)
				continue
			}
			applied, err := tx.Settle(owner, st)
			if err != nil {
				return err
			}
			if !applied {
				gotStale++
			}
		}
		if len(done) > 0 {
			n, err := tx.SettleDone(owner, done)
			if err != nil {
				return err
			}
			gotStale += len(done) - n
		}
		// The rows settled, routed and claimed are mirrored once, at the
		// end.
		var mirror []string
		for _, st := range settled {
			if !heldIDs[st.Job.ID] {
				mirror = append(mirror, st.Job.ID)
			}
		}
		if claim.Max > 0 {
			routed, err := route(tx, claim.routes(), claim.Now, claim.Dest(), claim.Max)
			if err != nil {
				return err
			}
			var counted []string
			if gotJobs, counted, err = tx.Claim(owner, claim); err != nil {
				return err
			}
			markCounted(gotJobs, counted)
			mirror = append(mirror, routed...)
			for _, j := range gotJobs {
				mirror = append(mirror, j.ID)
			}
		}
		if len(mirror) == 0 {
			return nil
		}
		slices.Sort(mirror)
		return tx.Mirror(slices.Compact(mirror), ref)
	})
	if err != nil {
		return nil, 0, nil, err
	}
	return gotJobs, gotStale, gotHeld, nil
}

// markCounted marks started the jobs whose ids a claim counted.
func markCounted(jobs []Job, ids []string) {
	if len(ids) == 0 {
		return
	}
	counted := make(map[string]bool, len(ids))
	for _, id := range ids {
		counted[id] = true
	}
	for i, j := range jobs {
		if counted[j.ID] {
			jobs[i] = markStarted(j)
		}
	}
}

// Start counts on store the attempts of jobs, as the dispatcher is about
// to make them, and renews owner's lease on each row to run from now until
// until, in one transaction, the rows in id order. It returns the jobs
// whose attempts it counted, marked started, in the order given; a job it
// leaves out must not be attempted: its claim is gone, its lease ran out
// before now, or it was started already. It fails, writing nothing, when
// jobs are given and until is not after now, when the store is read-only,
// and when the store cannot take the write.
func Start(ctx context.Context, store QueueStore, owner string, jobs []Job, now, until time.Time) ([]Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if store.ReadOnly() {
		return nil, errors.New("start: store is read-only")
	}
	todo, err := startable(jobs, now, until)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(todo)
	slices.SortFunc(sorted, func(a, b Job) int { return strings.Compare(a.ID, b.ID) })
	// fn may still run after ctx is done and the store has returned: it
	// writes only its own variable, read only after it succeeded.
	var counted map[string]bool
	err = store.InQueueTx(ctx, now, func(tx QueueTx) error {
		ids, err := tx.Start(owner, sorted, now, until)
		if err != nil {
			return err
		}
		counted = make(map[string]bool, len(ids))
		for _, id := range ids {
			counted[id] = true
		}
		if len(ids) == 0 {
			return nil
		}
		ids = slices.Clone(ids)
		slices.Sort(ids)
		return tx.Mirror(slices.Compact(ids), now)
	})
	if err != nil {
		return nil, fmt.Errorf("start %d attempts: %w", len(todo), err)
	}
	var started []Job
	for _, j := range todo {
		if counted[j.ID] {
			started = append(started, markStarted(j))
		}
	}
	return started, nil
}

// CheckSettle refuses a Settle by owner of settled, claiming as claim
// asks, that no store may carry out: no owner; a claim (Max above 0) whose
// lease does not end after its Now; a settlement of an unknown fate; a
// park with an unknown reason; a release of an attempt Start counted; an
// uncount (FateUnsent) of one it did not. There is no park without an
// attempt: a row is parked for failing only by the outcome of one.
func CheckSettle(owner string, settled []Settlement, claim Claim) error {
	if owner == "" {
		return errors.New("no owner")
	}
	if claim.Max > 0 && !claim.Until.After(claim.Now) {
		return fmt.Errorf("lease until %s is not after %s", claim.Until, claim.Now)
	}
	if claim.Start < 0 {
		return fmt.Errorf("a claim cannot start %d attempts", claim.Start)
	}
	if claim.Max > 0 && len(claim.Routes) > 0 {
		if err := CheckRoutes(claim.Routes); err != nil {
			return err
		}
		if !slices.ContainsFunc(claim.Routes, func(r Route) bool { return r.Name == claim.Dest() }) {
			return fmt.Errorf("destination %q is not among the routes", claim.Dest())
		}
	}
	for _, st := range settled {
		switch st.Fate {
		case FateDone, FateRetry:
		case FateRelease:
			if st.Job.Started() {
				return fmt.Errorf("release %s: attempt %d has started", st.Job.ID, st.Job.Attempt)
			}
		case FatePark:
			if !st.Reason.Valid() {
				return fmt.Errorf("park %s: unknown reason %q", st.Job.ID, st.Reason)
			}
		case FateUnsent:
			if !st.Job.Started() {
				return fmt.Errorf("uncount %s: attempt %d was not started", st.Job.ID, st.Job.Attempt)
			}
		default:
			return fmt.Errorf("settle %s: unknown fate %d", st.Job.ID, st.Fate)
		}
	}
	return nil
}

// startable returns the jobs of a Start from now to until whose attempts
// it is to count, in the order given: each row once (two copies of one
// claim start once), none Start counted already. It fails when jobs are
// given and until is not after now.
func startable(jobs []Job, now, until time.Time) ([]Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if !until.After(now) {
		return nil, fmt.Errorf("lease until %s is not after %s", until, now)
	}
	var todo []Job
	seen := map[string]bool{}
	for _, j := range jobs {
		if !j.Started() && !seen[j.ID] {
			seen[j.ID] = true
			todo = append(todo, j)
		}
	}
	return todo, nil
}
