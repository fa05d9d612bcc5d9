package replica

import (
	"context"
	"errors"

	"inbox/inbox"
)

// Store is an inbox store whose database a Replicator replicates. Under
// --replica-sync, Put returns only once the delivery's commit has reached
// the replica too, and fails (wrapping ErrBehind) when it did not in time:
// the receiver then answers 503 and remembers the key, as for any store
// outage; the row stays in the file, and the provider's retry lands on it.
type Store struct {
	inbox.Store
	Replicator *Replicator
}

// Put stores d (see inbox.Store) and, under --replica-sync, waits for the
// replica.
func (s *Store) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	res, err := s.Store.Put(ctx, d)
	if err != nil {
		return res, err
	}
	if err := s.Replicator.Wait(ctx); err != nil {
		return inbox.Result{}, err
	}
	return res, nil
}

// Close closes the store, then sends its last commits to the replica and
// stops replicating.
func (s *Store) Close() error {
	return errors.Join(s.Store.Close(), s.Replicator.Close())
}
