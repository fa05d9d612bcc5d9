package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// purgeBatch bounds how many rows one purge transaction deletes, so the
// write lock is never held long enough to make the receiver answer 503.
const purgeBatch = 1000

// purgeWhere selects the rows of one status received before a cutoff; the
// events_status_received index serves it.
const purgeWhere = `status = ? AND received_at < ?`

// Purgeable counts, per status, the rows Purge would delete. It fails when
// statuses holds StatusNew or the database cannot be read.
func (s *Store) Purgeable(ctx context.Context, before time.Time, statuses []Status) (map[Status]int64, error) {
	if err := checkPurgeable(statuses); err != nil {
		return nil, err
	}
	counts := map[Status]int64{}
	for _, st := range statuses {
		var n int64
		err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere,
			string(st), millis(before)).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		counts[st] = n
	}
	return counts, nil
}

// Purge deletes the rows with the given statuses received before before, in
// IMMEDIATE transactions of purgeBatch rows, and returns how many it
// deleted per status. Retention counts from receipt: the provider's retries
// and redeliveries of a job run from when it first arrived, not from when
// the application handed it on. It refuses StatusNew (those rows are still
// owed to the application); on an error, the counts say what earlier
// transactions deleted.
func (s *Store) Purge(ctx context.Context, before time.Time, statuses []Status) (map[Status]int64, error) {
	if err := checkPurgeable(statuses); err != nil {
		return nil, err
	}
	if s.write == nil {
		return nil, errors.New("purge: store is read-only")
	}
	counts := map[Status]int64{}
	for _, st := range statuses {
		for {
			n, err := s.purgeTx(ctx, st, before)
			counts[st] += n
			if err != nil {
				return counts, fmt.Errorf("purge %s rows: %w", st, err)
			}
			if n < purgeBatch {
				break
			}
		}
	}
	return counts, nil
}

// purgeTx deletes up to purgeBatch rows of one status in one IMMEDIATE
// transaction.
func (s *Store) purgeTx(ctx context.Context, st Status, before time.Time) (int64, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE rowid IN
		(SELECT rowid FROM events WHERE `+purgeWhere+` LIMIT ?)`, string(st), millis(before), purgeBatch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

func checkPurgeable(statuses []Status) error {
	if slices.Contains(statuses, StatusNew) {
		return errors.New("purge: new rows are never purged")
	}
	for _, st := range statuses {
		if !st.Valid() {
			return fmt.Errorf("purge: unknown status %q", st)
		}
	}
	return nil
}
