package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The writes of reconciliation as every store makes them: refusals
// remembered while the store was down, expectations, and their polls. A
// store implements only the statements (ReconcileStore); the checks, the
// order and the counting are here.

// ReconcileStore is what a store implements of the reconciliation writes.
type ReconcileStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// InReconcileTx runs fn in one write transaction, committed when fn
	// returns nil; a store may run fn again in a new one. The times given
	// to the transaction are on this process's clock, which reads ref
	// (zero: the time the transaction starts) at the store clock's
	// ReconcileTx.Now: a store whose clock is the database's places them
	// relative to it.
	InReconcileTx(ctx context.Context, ref time.Time, fn func(ReconcileTx) error) error
	// Expectations reads the expectations, due first and by job id; with
	// overdue, only those waiting with a due time not after now.
	Expectations(ctx context.Context, now time.Time, overdue bool) ([]Expectation, error)
}

// ReconcileTx is a store's transaction of reconciliation writes, which
// runs its statements under a context of its own, as QueueTx does: a store
// may share the transaction with other callers' writes, which a caller
// that gives up must not interrupt.
type ReconcileTx interface {
	// Now is the store's clock in the transaction.
	Now() time.Time
	// RecordRefusal adds r, normalized, to what its key has, unless the
	// key's row exists.
	RecordRefusal(r Refusal) error
	// Expect records that a delivery of the job is expected by due (done
	// at once when its row is stored), unless it is done already, and
	// returns the expectation as it then stands.
	Expect(jobID, statusURL string, due time.Time) (Expectation, error)
	// ClaimPolls leases up to max waiting expectations due at now to owner
	// for leases that run out at until, each one's poll count raised and
	// its next poll time the lease's end.
	ClaimPolls(owner string, now, until time.Time, max int) ([]Poll, error)
	// SettlePoll records r on its waiting expectation; false when owner's
	// claim of it is gone.
	SettlePoll(owner string, r PollResult) (bool, error)
	// SettleDelivered counts r's poll and redelivery on its expectation
	// when the job was delivered while owner's claim held it, and lets the
	// lease go.
	SettleDelivered(owner string, r PollResult) error
}

// Reconciler is what a Store answers of reconciliation but the reads that
// are one statement, made from a store's statements: a store embeds it.
type Reconciler struct{ store ReconcileStore }

// NewReconciler returns the reconciliation of store.
func NewReconciler(store ReconcileStore) Reconciler { return Reconciler{store} }

// RecordRefusals writes refusals remembered while the store was down, adding
// each one's count and widening its times onto what the key already has.
// A key whose row exists by now is left out: a retry landed before the
// refusal could be written, so nothing is missing. They are written in
// key order, the order deliveries lock rows in. It fails, writing nothing,
// when the store cannot take the write; the caller keeps them.
func (rc Reconciler) RecordRefusals(ctx context.Context, refusals []Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	if rc.store.ReadOnly() {
		return errors.New("record refusals: store is read-only")
	}
	refusals = slices.Clone(refusals)
	for i := range refusals {
		refusals[i] = refusals[i].normalized()
	}
	slices.SortFunc(refusals, func(a, b Refusal) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Key, b.Key))
	})
	err := rc.store.InReconcileTx(ctx, time.Time{}, func(tx ReconcileTx) error {
		for _, r := range refusals {
			if err := tx.RecordRefusal(r); err != nil {
				return fmt.Errorf("record refusal of %s: %w", r.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d refusals: %w", len(refusals), err)
	}
	return nil
}

// Expect records in the store that a delivery of each of Sume's jobs is
// expected by due, its status read at statusURL ("" for the API's own)
// when it is late, and returns the expectations as they then stand. A job
// whose row is already stored is done at once. Expecting a job again that
// is waiting (or was closed) moves it to the new due time, waiting; a done
// one stays done. It fails, recording nothing, on an invalid job id
// (CheckJobID) or when the store cannot take the write.
func (rc Reconciler) Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]Expectation, error) {
	for _, id := range jobs {
		if err := CheckJobID(id); err != nil {
			return nil, err
		}
	}
	if rc.store.ReadOnly() {
		return nil, errors.New("expect: store is read-only")
	}
	var out []Expectation
	var now time.Time
	err := rc.store.InReconcileTx(ctx, time.Time{}, func(tx ReconcileTx) error {
		out, now = out[:0], tx.Now()
		for _, id := range jobs {
			e, err := tx.Expect(id, statusURL, due)
			if err != nil {
				return fmt.Errorf("expect %s: %w", id, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expect: %w", err)
	}
	for i := range out {
		out[i] = out[i].asOf(now)
	}
	return out, nil
}

// Expected returns the store's expectations, due first, each as read at now
// (asOf); with overdue, only those waiting past their due time. It fails
// when they cannot be read.
func (rc Reconciler) Expected(ctx context.Context, now time.Time, overdue bool) ([]Expectation, error) {
	out, err := rc.store.Expectations(ctx, now, overdue)
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	for i := range out {
		out[i] = out[i].asOf(now)
	}
	return out, nil
}

// ClaimPolls leases up to max waiting expectations of the store due at now
// to owner, the leases running out at until, in one transaction, due
// first: each one's poll count goes up and its next poll time becomes the
// lease's end, so two pollers never hold the same one, and one whose
// poller died is claimed again once the lease is over. It fails, claiming
// nothing, when the store cannot take the write.
func (rc Reconciler) ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]Poll, error) {
	if owner == "" || max <= 0 || !until.After(now) {
		return nil, fmt.Errorf("claim polls: want an owner, a max above 0 and a lease ending after now")
	}
	if rc.store.ReadOnly() {
		return nil, errors.New("claim polls: store is read-only")
	}
	var polls []Poll
	err := rc.store.InReconcileTx(ctx, now, func(tx ReconcileTx) error {
		var err error
		polls, err = tx.ClaimPolls(owner, now, until, max)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim polls: %w", err)
	}
	slices.SortStableFunc(polls, func(a, b Poll) int { return a.DueAt.Compare(b.DueAt) })
	return polls, nil
}

// SettlePolls records in the store the results of polls owner claimed, in key
// order, their times placed relative to the latest At. A result whose
// claim is gone (the job was delivered meanwhile, or the lease ran out
// and another poller claimed it) is counted in stale and changes nothing,
// but for a job delivered while this poll held it: its poll and
// redelivery are counted on the done expectation.
func (rc Reconciler) SettlePolls(ctx context.Context, owner string, results []PollResult) (stale int, err error) {
	if len(results) == 0 {
		return 0, nil
	}
	if err := checkPollResults(results); err != nil {
		return 0, fmt.Errorf("settle polls: %w", err)
	}
	if rc.store.ReadOnly() {
		return 0, errors.New("settle polls: store is read-only")
	}
	var ref time.Time
	for _, r := range results {
		if r.At.After(ref) {
			ref = r.At
		}
	}
	results = slices.Clone(results)
	slices.SortStableFunc(results, func(a, b PollResult) int {
		return cmp.Or(cmp.Compare(a.Poll.Source, b.Poll.Source), cmp.Compare(a.Poll.JobID, b.Poll.JobID))
	})
	err = rc.store.InReconcileTx(ctx, ref, func(tx ReconcileTx) error {
		stale = 0
		for _, r := range results {
			ok, err := tx.SettlePoll(owner, r)
			if err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			}
			if ok {
				continue
			}
			stale++
			// Delivered while polled (the redelivery may be what landed):
			// what the poll did is still counted, and its lease let go.
			if err := tx.SettleDelivered(owner, r); err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("settle polls: %w", err)
	}
	return stale, nil
}
