package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// Settle records the settlements of rows that owner claimed, then claims
// rows as claim asks (none when claim.Max is 0) for owner, in one
// transaction. Claims take the oldest due rows that no other transaction
// holds (FOR UPDATE SKIP LOCKED), so dispatchers on several replicas never
// claim one row twice. A claim leases the row and leaves its attempt count
// alone: an attempt counts when it starts (Start), so a dispatcher that
// dies between claiming and sending costs the row no attempt; the outcome
// of a claim that Start did not mark counts its attempt then.
//
// Times come from the store's clock (the database's, see Options.Now), not
// the caller's: a row is due when its next_attempt_at has passed on that
// clock, and a lease runs for claim.Until-claim.Now from it, so a caller
// whose clock is behind or ahead cannot shorten or lengthen a lease. The
// settlements' times are taken relative to claim.Now (or, with no claim,
// to the latest At): a retry is due after RetryAt-At on the store's clock.
//
// A settlement whose claim is gone (its lease ran out and the row was
// claimed again, or a person changed the row) changes nothing and is
// counted in stale. Settle fails, with nothing changed, when the database
// cannot be written or inbox.CheckSettle refuses the call (a settlement
// of an unknown fate or reason, say).
func (s *Store) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) (jobs []inbox.Job, stale int, err error) {
	if err := inbox.CheckSettle(owner, settled, claim); err != nil {
		return nil, 0, fmt.Errorf("settle: %w", err)
	}
	if s.readOnly {
		return nil, 0, errors.New("settle: store is read-only")
	}
	ref := claim.Now
	for _, st := range settled {
		if claim.Now.IsZero() && st.At.After(ref) {
			ref = st.At
		}
	}
	// Row locks in id order, as Put takes them.
	settled = slices.Clone(settled)
	slices.SortStableFunc(settled, func(a, b inbox.Settlement) int { return strings.Compare(a.Job.ID, b.Job.ID) })
	owner = pgText(owner)

	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		jobs, stale = nil, 0
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		// at places a caller's time on the store's clock.
		at := func(t time.Time) int64 {
			if ref.IsZero() {
				return now
			}
			return now + t.Sub(ref).Milliseconds()
		}
		var done []inbox.Settlement
		for _, st := range settled {
			if st.Fate == inbox.FateDone {
				done = append(done, st)
				continue
			}
			applied, err := settle(ctx, tx, owner, st, now, at)
			if err != nil {
				return err
			}
			if !applied {
				stale++
			}
		}
		n, err := settleDone(ctx, tx, owner, done, at)
		if err != nil {
			return err
		}
		stale += len(done) - n
		if claim.Max > 0 {
			jobs, err = claimRows(ctx, tx, owner, claim.Max, now, claim.Until.Sub(claim.Now).Milliseconds())
		}
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("settle: %w", err)
	}
	return jobs, stale, nil
}

// settleDone marks done the rows of batch whose claims hold, in one
// statement, and returns how many it marked.
func settleDone(ctx context.Context, tx pgx.Tx, owner string, batch []inbox.Settlement, at func(time.Time) int64) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	n := len(batch)
	ids, held, attempts, ats := make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, st := range batch {
		ids[i], held[i], attempts[i], ats[i] = st.Job.ID, int64(st.Job.HeldAttempts()), int64(st.Job.Attempt), at(st.At)
	}
	tag, err := tx.Exec(ctx, `UPDATE events e SET status = 'done', done_at = u.at, updated_at = u.at,
		lease_owner = NULL, lease_until = NULL, next_attempt_at = 0, attempts = u.attempt
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u(id, held, attempt, at)
		WHERE e.id = u.id AND e.attempts = u.held AND e.lease_owner = $5 AND e.status = 'new'`,
		ids, held, attempts, ats, owner)
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	return int(tag.RowsAffected()), nil
}

// claimGuard matches a row only while the claim it names holds: the same
// owner, and the attempt count the claim left (or Start made) unchanged.
const claimGuard = ` WHERE id = $1 AND status = 'new' AND lease_owner = $2 AND attempts = $3`

func settle(ctx context.Context, tx pgx.Tx, owner string, st inbox.Settlement, now int64, at func(time.Time) int64) (bool, error) {
	args := []any{st.Job.ID, owner, st.Job.HeldAttempts()}
	var q string
	switch st.Fate {
	case inbox.FateRetry:
		q = `UPDATE events SET lease_owner = NULL, lease_until = NULL, next_attempt_at = greatest($4::bigint, $6::bigint),
			last_error = $5, attempts = $7`
		args = append(args, at(st.RetryAt), pgText(st.Error), now, st.Job.Attempt)
	case inbox.FatePark:
		q = `UPDATE events SET status = 'parked', reason = $4, last_error = $5, updated_at = $6,
			lease_owner = NULL, lease_until = NULL, next_attempt_at = 0, attempts = $7`
		args = append(args, string(st.Reason), pgText(st.Error), at(st.At), st.Job.Attempt)
	case inbox.FateExhausted:
		q = `UPDATE events SET status = 'parked', reason = $4, last_error = $5, updated_at = $6,
			lease_owner = NULL, lease_until = NULL, next_attempt_at = 0`
		args = append(args, string(st.Reason), pgText(st.Error), at(st.At))
	case inbox.FateRelease:
		q = `UPDATE events SET lease_owner = NULL, lease_until = NULL, next_attempt_at = $4`
		args = append(args, at(st.At))
	}
	tag, err := tx.Exec(ctx, q+claimGuard, args...)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// claimRows leases up to max due new rows to owner for lease milliseconds
// from now, their attempts not counted yet. SKIP LOCKED passes over rows
// another claimer (or a delivery being counted) holds, and FOR UPDATE
// re-checks a row that another transaction changed since the query's
// snapshot, so no row is claimed twice.
func claimRows(ctx context.Context, tx pgx.Tx, owner string, max int, now, lease int64) ([]inbox.Job, error) {
	rows, err := tx.Query(ctx, `WITH due AS (
			SELECT id FROM events WHERE status = 'new' AND next_attempt_at <= $3
			ORDER BY next_attempt_at, received_at LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE events e SET lease_owner = $1, lease_until = $2, next_attempt_at = $2
		FROM due WHERE e.id = due.id
		RETURNING e.id, e.source, coalesce(e.event, ''), e.body, e.attempts + 1`,
		owner, now+lease, now, max)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Job, error) {
		var j inbox.Job
		err := r.Scan(&j.ID, &j.Source, &j.Event, &j.Body, &j.Attempt)
		j.Key = inbox.KeyOf(j.Source, j.ID)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, nil
}

// Start counts the attempts of jobs, as the dispatcher is about to make
// them, and renews owner's lease on each row so it runs until-now from the
// store's clock (the database's, see Settle), however long its row waited
// for a worker. It returns the jobs whose attempts it counted, marked
// started, to settle with, in the order given. A job it leaves out must
// not be attempted: its claim is gone (the row was settled, released,
// taken over or changed by a person), its lease ran out on the store's
// clock, or it was started already. It fails, with nothing changed, when
// the database cannot be written. A COMMIT whose answer is lost (the
// connection broke, ctx ended) is looked up on the server: it fails only
// when the server cannot tell within the busy timeout, and then the
// attempts may have been counted.
func (s *Store) Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if s.readOnly {
		return nil, errors.New("start: store is read-only")
	}
	todo, err := inbox.Startable(jobs, now, until)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	// Row locks in id order, as Put and Settle take them.
	sorted := slices.Clone(todo)
	slices.SortFunc(sorted, func(a, b inbox.Job) int { return strings.Compare(a.ID, b.ID) })
	ids, held, attempts := make([]string, len(sorted)), make([]int64, len(sorted)), make([]int64, len(sorted))
	for i, j := range sorted {
		ids[i], held[i], attempts[i] = j.ID, int64(j.HeldAttempts()), int64(j.Attempt)
	}
	lease := until.Sub(now).Milliseconds()
	owner = pgText(owner)

	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var counted map[string]bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		counted = map[string]bool{}
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE events e SET attempts = u.attempt, lease_until = $1, next_attempt_at = $1
			FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS u(id, held, attempt)
			WHERE e.id = u.id AND e.attempts = u.held AND e.lease_owner = $5 AND e.status = 'new' AND e.lease_until > $6
			RETURNING e.id`, now+lease, ids, held, attempts, owner, now)
		if err != nil {
			return fmt.Errorf("count %d attempts: %w", len(ids), err)
		}
		started, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("count %d attempts: %w", len(ids), err)
		}
		for _, id := range started {
			counted[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start %d attempts: %w", len(todo), err)
	}
	var started []inbox.Job
	for _, j := range todo {
		if counted[j.ID] {
			started = append(started, inbox.MarkStarted(j))
		}
	}
	return started, nil
}

// NextDue returns when the first new row becomes claimable, on this
// process's clock (the database's time for it, moved by how far this
// clock is from the database's), a time at or before now for a row that is
// due; ok is false when there is no new row.
func (s *Store) NextDue(ctx context.Context) (due time.Time, ok bool, err error) {
	due, ok, err = s.earliest(ctx, `min(next_attempt_at) FROM events WHERE status = 'new'`)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due row: %w", err)
	}
	return due, ok, nil
}

// earliest reads first, "min(<column>) FROM ...", a time in milliseconds
// on the store's clock, and places it on this process's clock: moved by
// how far this clock is from the store's. ok is false when first is NULL.
func (s *Store) earliest(ctx context.Context, first string) (at time.Time, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var next *int64
	var now int64
	err = s.pool.QueryRow(ctx, `SELECT coalesce($1::bigint, `+dbNow+`), `+first, s.clockArg()).Scan(&now, &next)
	if err != nil || next == nil {
		return time.Time{}, false, err
	}
	return s.localNow().Add(time.Duration(*next-now) * time.Millisecond).UTC(), true, nil
}

// Queue reads the queue's state at now in one query. now is on the
// caller's clock, as the SQLite store takes it; it is placed on the store's
// clock (the database's, by how far the caller's is from it), where leases
// and due times are.
func (s *Store) Queue(ctx context.Context, now time.Time) (inbox.Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var ahead int64
	if !now.IsZero() {
		ahead = now.Sub(s.localNow()).Milliseconds()
	}
	var q inbox.Queue
	var oldest *int64
	err := s.pool.QueryRow(ctx, `WITH c AS (SELECT coalesce($1::bigint, `+dbNow+`) + $2 AS now)
		SELECT count(e.id), min(e.received_at),
			count(*) FILTER (WHERE e.lease_owner IS NOT NULL AND e.lease_until > c.now),
			count(*) FILTER (WHERE e.attempts > 0 AND e.next_attempt_at > c.now AND e.lease_owner IS NULL)
		FROM c LEFT JOIN events e ON e.status = 'new'`, s.clockArg(), ahead).Scan(&q.Depth, &oldest, &q.InFlight, &q.Retrying)
	if err != nil {
		return inbox.Queue{}, fmt.Errorf("read the queue: %w", err)
	}
	if oldest != nil {
		q.Oldest = fromMillis(*oldest)
	}
	return q, nil
}
