package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// Settle records the settlements of rows that owner claimed, then claims
// rows as claim asks (none when claim.Max is 0) for owner, in one
// transaction. Claims take the oldest due rows that no other transaction
// holds (FOR UPDATE SKIP LOCKED), so dispatchers on several replicas never
// claim one row twice. A claim leases the rows and counts the attempts of
// only those claim.Start asks for (inbox.Claim.Counts), in the statement
// that leases them: any other attempt counts when it starts (Start), so a
// dispatcher that dies between claiming and sending costs those rows no
// attempt.
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
// of an unknown fate or reason, say). A row another session holds fails
// only its own settlement, once it is still held at the busy timeout
// (*inbox.PartialError): the rest commit without it.
func (s *Store) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) (jobs []inbox.Job, stale int, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	return inbox.Settle(ctx, queueing{s}, owner, settled, claim)
}

// queueing is the store's inbox.QueueStore.
type queueing struct{ s *Store }

func (q queueing) ReadOnly() bool { return q.s.readOnly }

// InQueueTx runs fn in one transaction bounded by the busy timeout, at the
// database's clock (the injected one when set), placing the times it is
// given relative to ref.
func (q queueing) InQueueTx(ctx context.Context, ref time.Time, fn func(inbox.QueueTx) error) error {
	ctx, cancel := context.WithTimeout(ctx, q.s.busy)
	defer cancel()
	return q.s.inTx(ctx, func(tx pgx.Tx) error {
		now, err := q.s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		return fn(queueTx{ctx: ctx, tx: tx, now: now, ref: ref})
	})
}

// queueTx is inbox.QueueTx in tx, whose clock reads now when the caller's
// reads ref.
type queueTx struct {
	ctx context.Context
	tx  pgx.Tx
	now int64
	ref time.Time
}

// at places t on the store's clock.
func (t queueTx) at(tm time.Time) int64 {
	if t.ref.IsZero() {
		return t.now
	}
	return t.now + tm.Sub(t.ref).Milliseconds()
}

// Lock locks the rows of ids that no other transaction holds, in id
// order (SKIP LOCKED), and returns those another holds: a row left out that
// is gone is not held (its settlement is stale).
func (t queueTx) Lock(ids []string) ([]string, error) {
	rows, err := t.tx.Query(t.ctx, `WITH locked AS (
			SELECT id FROM events WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED)
		SELECT e.id FROM events e WHERE e.id = ANY($1) AND e.id NOT IN (SELECT id FROM locked) ORDER BY e.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	return held, nil
}

// SettleDone marks done the pairs of batch whose claims hold, in one
// statement, and returns how many it marked.
func (t queueTx) SettleDone(owner string, batch []inbox.Settlement) (int, error) {
	n := len(batch)
	ids, dests, held, attempts, ats := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, st := range batch {
		ids[i], dests[i], held[i], attempts[i], ats[i] = st.Job.ID, st.Job.Dest(), int64(st.Job.HeldAttempts()), int64(st.Job.Attempt), t.at(st.At)
	}
	tag, err := t.tx.Exec(t.ctx, `UPDATE deliveries d SET status = 'done', done_at = u.at, updated_at = u.at,
		lease_owner = NULL, lease_until = NULL, next_attempt_at = 0, attempts = u.attempt
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(id, dest, held, attempt, at)
		WHERE d.event_id = u.id AND d.destination = u.dest AND d.attempts = u.held AND d.lease_owner = $6 AND d.status = 'new'`,
		ids, dests, held, attempts, ats, pgText(owner))
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	return int(tag.RowsAffected()), nil
}

// claimGuard matches a pair only while the claim it names holds: the same
// owner, and the attempt count the claim left (or Start made) unchanged.
const claimGuard = ` WHERE event_id = $1 AND destination = $2 AND status = 'new' AND lease_owner = $3 AND attempts = $4`

// Settle records st unless its claim is gone (false). A retry is never
// due before now.
func (t queueTx) Settle(owner string, st inbox.Settlement) (bool, error) {
	at, now := t.at, t.now
	args := []any{st.Job.ID, st.Job.Dest(), pgText(owner), st.Job.HeldAttempts()}
	var q string
	switch st.Fate {
	case inbox.FateRetry:
		q = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = greatest($5::bigint, $7::bigint),
			last_error = $6, attempts = $8, updated_at = $9`
		args = append(args, at(st.RetryAt), pgText(st.Error), now, st.Job.Attempt, at(st.At))
	case inbox.FatePark:
		q = `UPDATE deliveries SET status = 'parked', reason = $5, last_error = $6, updated_at = $7,
			lease_owner = NULL, lease_until = NULL, next_attempt_at = 0, attempts = $8`
		args = append(args, string(st.Reason), pgText(st.Error), at(st.At), st.Job.Attempt)
	case inbox.FateRelease:
		q = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = $5`
		args = append(args, at(st.At))
	case inbox.FateUnsent:
		q = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, next_attempt_at = $5, attempts = $6,
			last_error = coalesce($7, last_error)`
		args = append(args, at(st.Due()), st.Job.Attempt-1, unsentError(st))
	}
	tag, err := t.tx.Exec(t.ctx, q+claimGuard, args...)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Claim leases up to c.Max due new pairs of c's destination to owner for
// c.Until-c.Now from the store's clock, none while the destination is
// paused, and counts the attempts of those c.Counts takes (the rule is
// written again in the statement: up to $6 pairs, oldest due first, none
// whose attempt would be past $7 when $7 is above 0). SKIP LOCKED passes
// over pairs another claimer (or a delivery being counted) holds, and over
// pairs whose row another session holds (the claim then mirrors onto the
// row without waiting), and FOR UPDATE re-checks a pair that another
// transaction changed since the query's snapshot, so no pair is claimed
// twice.
func (t queueTx) Claim(owner string, c inbox.Claim) (jobs []inbox.Job, counted []string, err error) {
	now, lease := t.now, c.Until.Sub(c.Now).Milliseconds()
	rows, err := t.tx.Query(t.ctx, `WITH due AS (
			SELECT d.event_id, d.destination, d.attempts, d.next_attempt_at, d.received_at
			FROM deliveries d JOIN events e ON e.id = d.event_id
			WHERE d.destination = $5 AND d.status = 'new' AND d.next_attempt_at <= $3
			AND NOT EXISTS (SELECT 1 FROM paused_destinations WHERE name = $5)
			ORDER BY d.next_attempt_at, d.received_at LIMIT $4
			FOR UPDATE OF d, e SKIP LOCKED),
		ranked AS (SELECT event_id, destination, ($7::bigint <= 0 OR attempts + 1 <= $7::bigint)
				AND row_number() OVER (PARTITION BY ($7::bigint <= 0 OR attempts + 1 <= $7::bigint)
					ORDER BY next_attempt_at, received_at, event_id) <= $6::bigint AS counts
			FROM due),
		claimed AS (UPDATE deliveries d SET lease_owner = $1, lease_until = $2, next_attempt_at = $2,
				attempts = d.attempts + CASE WHEN r.counts THEN 1 ELSE 0 END
			FROM ranked r WHERE d.event_id = r.event_id AND d.destination = r.destination
			RETURNING d.event_id, d.attempts + CASE WHEN r.counts THEN 0 ELSE 1 END AS attempt, r.counts, d.received_at)
		SELECT e.id, e.source, coalesce(e.event, ''), e.body, claimed.attempt, claimed.counts
		FROM claimed JOIN events e ON e.id = claimed.event_id ORDER BY claimed.received_at, e.id`,
		pgText(owner), now+lease, now, c.Max, c.Dest(), c.Start, c.LastAttempt)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Job, error) {
		j := inbox.Job{Destination: c.Dest()}
		var counts bool
		err := r.Scan(&j.ID, &j.Source, &j.Event, &j.Body, &j.Attempt, &counts)
		j.Key = inbox.KeyOf(j.Source, j.ID)
		if counts {
			counted = append(counted, j.ID)
		}
		return j, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, counted, nil
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
	return inbox.Start(ctx, queueing{s}, owner, jobs, now, until)
}

// Start counts the attempts of jobs whose claims hold, in one statement.
func (t queueTx) Start(owner string, jobs []inbox.Job, now, until time.Time) ([]string, error) {
	n := len(jobs)
	ids, dests, held, attempts := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n)
	for i, j := range jobs {
		ids[i], dests[i], held[i], attempts[i] = j.ID, j.Dest(), int64(j.HeldAttempts()), int64(j.Attempt)
	}
	rows, err := t.tx.Query(t.ctx, `UPDATE deliveries d SET attempts = u.attempt, lease_until = $1, next_attempt_at = $1
		FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u(id, dest, held, attempt)
		WHERE d.event_id = u.id AND d.destination = u.dest AND d.attempts = u.held AND d.lease_owner = $6
		AND d.status = 'new' AND d.lease_until > $7
		RETURNING d.event_id`, t.at(until), ids, dests, held, attempts, pgText(owner), t.at(now))
	if err != nil {
		return nil, fmt.Errorf("count %d attempts: %w", len(ids), err)
	}
	counted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("count %d attempts: %w", len(ids), err)
	}
	return counted, nil
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

// unsentError is the last_error a FateUnsent settlement records: its
// Error, or NULL to keep the pair's.
func unsentError(st inbox.Settlement) any {
	if st.Error == "" {
		return nil
	}
	return pgText(st.Error)
}
