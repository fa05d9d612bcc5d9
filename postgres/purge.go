package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"inbox/inbox"
)

// purgeBatch bounds how many rows one purge statement deletes, so no
// transaction holds many rows that deliveries may be waiting to count a
// repeat on.
const purgeBatch = 1000

// purgeWhere selects the rows of one status (never new, $1) last seen
// before a cutoff ($2). Retention counts from the last delivery: a row a
// redelivery landed on yesterday is what makes the next one a counted
// repeat.
const purgeWhere = `status <> 'new' AND status = $1 AND last_seen_at < $2`

// besideRemains holds for a done row while a parked row of its job is
// there and is not itself being purged ($3 says whether parked rows are,
// $4 is the cutoff). Such a done row is kept: were it gone, reprocessing
// the parked row would hand the job to the application again as new.
const besideRemains = `EXISTS (SELECT 1 FROM events b WHERE b.job_id = events.id AND b.job_id <> b.id
	AND b.status = 'parked' AND NOT ($3::boolean AND b.last_seen_at < $4))`

// Purgeable counts, per status, the rows Purge would delete, and the done
// rows it would keep. It fails when statuses holds StatusNew or the
// database cannot be read.
func (s *Store) Purgeable(ctx context.Context, before time.Time, statuses []inbox.Status) (inbox.PurgeReport, error) {
	rep := inbox.PurgeReport{Deleted: map[inbox.Status]int64{}}
	if err := checkPurgeable(statuses); err != nil {
		return rep, err
	}
	parkedToo := slices.Contains(statuses, inbox.StatusParked)
	for _, st := range statuses {
		w, args := purgeFilter(st, before, parkedToo)
		var n int64
		qctx, cancel := context.WithTimeout(ctx, s.busy)
		err := s.pool.QueryRow(qctx, `SELECT count(*) FROM events WHERE `+w, args...).Scan(&n)
		cancel()
		if err != nil {
			return rep, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		rep.Deleted[st] = n
	}
	var err error
	rep.KeptDone, err = s.keptDone(ctx, before, statuses)
	return rep, err
}

// Purge deletes the rows with the given statuses last seen before before,
// purgeBatch rows a statement. A done row stays while a parked row of its
// job stays (with StatusParked, parked rows past retention go first, and
// then the done rows they kept). It refuses StatusNew (those rows are still
// owed to the application); on an error, the report says what earlier
// statements deleted.
func (s *Store) Purge(ctx context.Context, before time.Time, statuses []inbox.Status) (inbox.PurgeReport, error) {
	rep := inbox.PurgeReport{Deleted: map[inbox.Status]int64{}}
	if err := checkPurgeable(statuses); err != nil {
		return rep, err
	}
	if s.readOnly {
		return rep, errors.New("purge: store is read-only")
	}
	parkedToo := slices.Contains(statuses, inbox.StatusParked)
	for _, st := range []inbox.Status{inbox.StatusParked, inbox.StatusIgnored, inbox.StatusDone} {
		if !slices.Contains(statuses, st) {
			continue
		}
		w, args := purgeFilter(st, before, parkedToo)
		for {
			dctx, cancel := context.WithTimeout(ctx, s.busy)
			tag, err := s.pool.Exec(dctx, fmt.Sprintf(`DELETE FROM events WHERE id IN
				(SELECT id FROM events WHERE %s LIMIT %d)`, w, purgeBatch), args...)
			cancel()
			n := tag.RowsAffected()
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
func purgeFilter(st inbox.Status, before time.Time, parkedToo bool) (string, []any) {
	w, args := purgeWhere, []any{string(st), before.UnixMilli()}
	if st == inbox.StatusDone {
		w, args = w+` AND NOT `+besideRemains, append(args, parkedToo, before.UnixMilli())
	}
	return w, args
}

// keptDone counts the done rows past retention that a purge keeps.
func (s *Store) keptDone(ctx context.Context, before time.Time, statuses []inbox.Status) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	if !slices.Contains(statuses, inbox.StatusDone) {
		return 0, nil
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+purgeWhere+` AND `+besideRemains,
		string(inbox.StatusDone), before.UnixMilli(), slices.Contains(statuses, inbox.StatusParked), before.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count kept done rows: %w", err)
	}
	return n, nil
}

func checkPurgeable(statuses []inbox.Status) error {
	if slices.Contains(statuses, inbox.StatusNew) {
		return errors.New("purge: new rows are never purged")
	}
	for _, st := range statuses {
		if !st.Valid() {
			return fmt.Errorf("purge: unknown status %q", st)
		}
	}
	return nil
}
