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

// purgeWhere selects the rows of one status (never new) last seen before a
// cutoff; the events_settled_last_seen index serves it. Retention counts from the last
// delivery, not from the first: a row a redelivery landed on yesterday is
// what makes the next one a counted repeat.
const purgeWhere = settled + ` AND status = ? AND last_seen_at < ?`

// besideRemains holds for a done row while a parked row of its job is
// there and is not itself being purged (the first argument says whether
// parked rows are, the second is the cutoff). Such a done row is kept: were
// it gone, reprocessing the parked row would hand the job to the
// application again as new.
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND b.status = 'parked' AND NOT (? AND b.last_seen_at < ?))`

// PurgeReport is what Purge deleted, or Purgeable would delete.
type PurgeReport struct {
	// Deleted counts the rows deleted per status.
	Deleted map[Status]int64 `json:"deleted"`
	// KeptDone counts the done rows past retention that were kept because
	// a parked row of their job stays.
	KeptDone int64 `json:"kept_done"`
}

// Purgeable counts, per status, the rows Purge would delete, and the done
// rows it would keep. It fails when statuses holds StatusNew or the
// database cannot be read.
func (s *Store) Purgeable(ctx context.Context, before time.Time, statuses []Status) (PurgeReport, error) {
	rep := PurgeReport{Deleted: map[Status]int64{}}
	if err := checkPurgeable(statuses); err != nil {
		return rep, err
	}
	parkedToo := slices.Contains(statuses, StatusParked)
	for _, st := range statuses {
		where, args := purgeFilter(st, before, parkedToo)
		var n int64
		if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+where, args...).Scan(&n); err != nil {
			return rep, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		rep.Deleted[st] = n
	}
	var err error
	rep.KeptDone, err = s.keptDone(ctx, before, statuses)
	return rep, err
}

// Purge deletes the rows with the given statuses last seen before before,
// in IMMEDIATE transactions of purgeBatch rows. A done row stays while a
// parked row of its job stays (with StatusParked, parked rows past
// retention go first, and then the done rows they kept). It refuses
// StatusNew (those rows are still owed to the application); on an error,
// the report says what earlier transactions deleted.
func (s *Store) Purge(ctx context.Context, before time.Time, statuses []Status) (PurgeReport, error) {
	rep := PurgeReport{Deleted: map[Status]int64{}}
	if err := checkPurgeable(statuses); err != nil {
		return rep, err
	}
	if s.write == nil {
		return rep, errors.New("purge: store is read-only")
	}
	parkedToo := slices.Contains(statuses, StatusParked)
	// Parked rows before done rows: a done row goes only once the parked
	// rows beside it have gone.
	for _, st := range []Status{StatusParked, StatusIgnored, StatusDone} {
		if !slices.Contains(statuses, st) {
			continue
		}
		where, args := purgeFilter(st, before, parkedToo)
		for {
			n, err := s.purgeTx(ctx, where, args)
			rep.Deleted[st] += n
			if err != nil {
				return rep, fmt.Errorf("purge %s rows: %w", st, err)
			}
			if n < purgeBatch {
				break
			}
		}
	}
	var err error
	rep.KeptDone, err = s.keptDone(ctx, before, statuses)
	return rep, err
}

// purgeFilter is the WHERE clause, and its arguments, of the rows of
// status st that a purge deletes.
func purgeFilter(st Status, before time.Time, parkedToo bool) (string, []any) {
	where, args := purgeWhere, []any{string(st), millis(before)}
	if st == StatusDone {
		where, args = where+` AND NOT `+besideRemains, append(args, parkedToo, millis(before))
	}
	return where, args
}

// keptDone counts the done rows past retention that a purge keeps.
func (s *Store) keptDone(ctx context.Context, before time.Time, statuses []Status) (int64, error) {
	if !slices.Contains(statuses, StatusDone) {
		return 0, nil
	}
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
		string(StatusDone), millis(before), slices.Contains(statuses, StatusParked), millis(before)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count kept done rows: %w", err)
	}
	return n, nil
}

// purgeTx deletes up to purgeBatch rows matching where in one IMMEDIATE
// transaction.
func (s *Store) purgeTx(ctx context.Context, where string, args []any) (int64, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE rowid IN
		(SELECT rowid FROM events WHERE `+where+` LIMIT ?)`, append(args, purgeBatch)...)
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
