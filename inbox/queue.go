package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Job is a new row claimed for delivery to the application.
type Job struct {
	ID      string // the row's id, the job_id: the application keys its writes on it
	Event   string
	Body    []byte
	Attempt int // this attempt's number, from 1
}

// Claim asks for up to Max rows that are due at Now, leased until Until.
type Claim struct {
	Now, Until time.Time
	Max        int
}

// Fate is what an attempt made of a claimed row.
type Fate int

// The fates of a claimed row.
const (
	FateDone    Fate = iota + 1 // the application took it: done, at At
	FateRetry                   // it failed: new again, claimable from RetryAt
	FatePark                    // it failed for good: parked with Reason
	FateRelease                 // it was never attempted: claimable at once, the attempt not counted
)

// Settlement records the fate of one claimed row.
type Settlement struct {
	Job     Job // its ID and Attempt name the claim
	Fate    Fate
	At      time.Time // when the attempt ended
	RetryAt time.Time // with FateRetry
	Reason  Reason    // with FatePark
	Error   string    // with FateRetry and FatePark: the attempt's error, never the body
}

// Settle records the settlements of rows that owner claimed, then claims
// rows as claim asks (none when claim.Max is 0) for owner, all in one
// transaction of the store's writer, shared with whatever else it commits
// then. A claim makes the row's attempt count one higher and its
// next_attempt_at the lease's end, so a row whose dispatcher died is
// claimed again once the lease runs out. Rows are claimed oldest due first.
//
// A settlement whose claim is gone (its lease ran out and the row was
// claimed again, or a person changed the row) changes nothing and is
// counted in stale. Settle fails, with nothing changed, when the database
// cannot be written; the settlements can then be given again. When ctx ends
// first, Settle returns its error, yet the transaction may still commit,
// claims included: pass a ctx that ends only when giving up is right.
func (s *Store) Settle(ctx context.Context, owner string, settled []Settlement, claim Claim) (jobs []Job, stale int, err error) {
	if owner == "" {
		return nil, 0, errors.New("settle: no owner")
	}
	if claim.Max > 0 && !claim.Until.After(claim.Now) {
		return nil, 0, fmt.Errorf("settle: lease until %s is not after %s", claim.Until, claim.Now)
	}
	// The op may still run after ctx is done and writeOp has returned: it
	// writes only its own variables, read only after it succeeded.
	var gotJobs []Job
	var gotStale int
	err = s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		gotJobs, gotStale = nil, 0
		var done []Settlement
		for _, st := range settled {
			if st.Fate == FateDone {
				done = append(done, st)
				continue
			}
			applied, err := settle(ctx, tx, owner, st)
			if err != nil {
				return err
			}
			if !applied {
				gotStale++
			}
		}
		for start := 0; start < len(done); start += maxDoneBatch {
			batch := done[start:min(start+maxDoneBatch, len(done))]
			n, err := settleDone(ctx, tx, owner, batch)
			if err != nil {
				return err
			}
			gotStale += len(batch) - n
		}
		if claim.Max <= 0 {
			return nil
		}
		var err error
		gotJobs, err = claimRows(ctx, tx, owner, claim)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("settle: %w", err)
	}
	return gotJobs, gotStale, nil
}

// maxDoneBatch bounds the rows one statement marks done (three parameters
// each, well under SQLite's limit).
const maxDoneBatch = 1000

// settleDone marks done the rows of batch whose claims hold, in one
// statement (the common outcome: one statement per transaction, not per
// row), and returns how many it marked.
func settleDone(ctx context.Context, tx *sql.Tx, owner string, batch []Settlement) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	values := strings.Repeat("(?, ?, ?), ", len(batch))
	args := make([]any, 0, 3*len(batch)+1)
	for _, st := range batch {
		args = append(args, st.Job.ID, st.Job.Attempt, millis(st.At))
	}
	args = append(args, owner)
	// VALUES names its columns column1, column2, column3: id, attempt, at.
	res, err := tx.ExecContext(ctx, `UPDATE events SET status = 'done', done_at = s.column3,
		updated_at = s.column3, lease_owner = NULL, lease_until = NULL, next_attempt_at = 0
		FROM (VALUES `+values[:len(values)-2]+`) AS s
		WHERE events.id = s.column1 AND events.attempts = s.column2
		AND events.lease_owner = ? AND events.status = 'new'`, args...)
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mark %d rows done: %w", len(batch), err)
	}
	return int(n), nil
}

// claimGuard matches a row only while the claim it names holds.
const claimGuard = ` WHERE id = ? AND status = 'new' AND lease_owner = ? AND attempts = ?`

func settle(ctx context.Context, tx *sql.Tx, owner string, st Settlement) (bool, error) {
	guard := []any{st.Job.ID, owner, st.Job.Attempt}
	var q string
	var args []any
	switch st.Fate {
	case FateRetry:
		q = `UPDATE events SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, last_error = ?`
		args = []any{millis(st.RetryAt), st.Error}
	case FatePark:
		if !st.Reason.Valid() {
			return false, fmt.Errorf("park %s: unknown reason %q", st.Job.ID, st.Reason)
		}
		q = `UPDATE events SET status = 'parked', reason = ?, last_error = ?, updated_at = ?,
			lease_owner = NULL, lease_until = NULL, next_attempt_at = 0`
		args = []any{string(st.Reason), st.Error, millis(st.At)}
	case FateRelease:
		q = `UPDATE events SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?,
			attempts = attempts - 1`
		args = []any{millis(st.At)}
	default:
		return false, fmt.Errorf("settle %s: unknown fate %d", st.Job.ID, st.Fate)
	}
	res, err := tx.ExecContext(ctx, q+claimGuard, append(args, guard...)...)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", st.Job.ID, err)
	}
	return n == 1, nil
}

// claimRows leases up to c.Max due new rows to owner. The events_queue
// index serves the inner query, so it reads only the rows it takes.
func claimRows(ctx context.Context, tx *sql.Tx, owner string, c Claim) ([]Job, error) {
	until := millis(c.Until)
	rows, err := tx.QueryContext(ctx, `UPDATE events
		SET attempts = attempts + 1, lease_owner = ?, lease_until = ?, next_attempt_at = ?
		WHERE rowid IN (SELECT rowid FROM events WHERE status = 'new' AND next_attempt_at <= ?
			ORDER BY next_attempt_at, received_at LIMIT ?)
		RETURNING id, coalesce(event, ''), body, attempts`,
		owner, until, until, millis(c.Now), c.Max)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		var j Job
		if err := rows.Scan(&j.ID, &j.Event, &j.Body, &j.Attempt); err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, nil
}

// NextDue returns when the first new row becomes claimable (a time at or
// before now for a row that is due); ok is false when there is no new row.
// It reads, so it never waits for the write lock.
func (s *Store) NextDue(ctx context.Context) (due time.Time, ok bool, err error) {
	var ms sql.NullInt64
	err = s.read.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM events WHERE status = 'new'`).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due row: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(ms.Int64), true, nil
}

// Queue describes the new rows: what the application still has to take.
type Queue struct {
	Depth    int64     `json:"depth"`     // new rows, claimed or not
	InFlight int64     `json:"in_flight"` // claimed, the lease still running
	Retrying int64     `json:"retrying"`  // failed at least once, waiting for the next attempt
	Oldest   time.Time `json:"oldest_received_at,omitzero"`
}

// Age is how long the oldest new row has waited at now; zero when none.
func (q Queue) Age(now time.Time) time.Duration {
	if q.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(q.Oldest), 0)
}

// Queue reads the queue's state at now, in one query.
func (s *Store) Queue(ctx context.Context, now time.Time) (Queue, error) {
	var q Queue
	var oldest sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT count(*), min(received_at),
		coalesce(sum(lease_owner IS NOT NULL AND lease_until > ?1), 0),
		coalesce(sum(attempts > 0 AND next_attempt_at > ?1 AND lease_owner IS NULL), 0)
		FROM events WHERE status = 'new'`, millis(now)).Scan(&q.Depth, &oldest, &q.InFlight, &q.Retrying)
	if err != nil {
		return Queue{}, fmt.Errorf("read the queue: %w", err)
	}
	if oldest.Valid {
		q.Oldest = fromMillis(oldest.Int64)
	}
	return q, nil
}
