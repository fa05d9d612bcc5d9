package replica

import (
	"context"
	"errors"
	"time"

	"inbox/inbox"
)

// Store is an inbox store whose database a Replicator replicates. Under
// --replica-sync, Put returns only once the delivery's commit has reached
// the replica too, and fails (wrapping ErrBehind) when it did not in time:
// the receiver then answers 503 and remembers the key, as for any store
// outage; the row stays in the file, and the provider's retry lands on it.
type Store struct {
	inbox.Store
	r *Replicator
}

// Wrap returns store, whose database r replicates, as a Store.
func Wrap(store inbox.Store, r *Replicator) *Store { return &Store{Store: store, r: r} }

// Replica returns the Replicator, for what the operator sees of it.
func (s *Store) Replica() *Replicator { return s.r }

// minWait is the least a delivery waits for the replica under Sync.
const minWait = 500 * time.Millisecond

// Put stores d (see inbox.Store) and, under --replica-sync, waits for the
// replica.
func (s *Store) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	start := time.Now()
	res, err := s.Store.Put(ctx, d)
	if err != nil || !s.r.cfg.Sync {
		return res, err
	}
	// What the commit left of WaitTimeout, so the 503 is written before
	// the write deadline, which the busy timeout is checked against; at
	// least minWait, for the sync itself.
	ctx, cancel := context.WithTimeout(ctx, max(s.r.cfg.WaitTimeout-time.Since(start), minWait))
	defer cancel()
	if err := s.r.Wait(ctx); err != nil {
		return inbox.Result{}, err
	}
	return res, nil
}

// Close closes the store, then sends its last commits to the replica and
// stops replicating.
func (s *Store) Close() error {
	return errors.Join(s.Store.Close(), s.r.Close())
}
