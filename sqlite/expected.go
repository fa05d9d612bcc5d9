package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"inbox/inbox"
)

// Expect records that a delivery of each of Sume's jobs is expected by due,
// its status read at statusURL ("" for the API's own) when it is late, and
// returns the expectations as they then stand. A job whose row is already
// stored is done at once. Expecting a job again that is waiting (or was
// closed) moves it to the new due time, waiting; a done one stays done. It
// fails, recording nothing, on an invalid job id or when the store cannot
// take the write.
func (s *Store) Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]inbox.Expectation, error) {
	for _, id := range jobs {
		if err := inbox.CheckJobID(id); err != nil {
			return nil, err
		}
	}
	now := millis(s.now())
	var out []inbox.Expectation
	err := s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		for _, id := range jobs {
			_, err := tx.ExecContext(ctx, `INSERT INTO expectations
				(source, job_id, status_url, expected_at, due_at, state, settled_at, next_poll_at)
				SELECT ?1, ?2, ?3, ?4, ?5, CASE WHEN e.n THEN 'done' ELSE 'waiting' END,
					CASE WHEN e.n THEN ?4 END, ?5
				FROM (SELECT EXISTS (SELECT 1 FROM events WHERE id = ?2) AS n) AS e WHERE true
				ON CONFLICT(source, job_id) DO UPDATE SET
					status_url = coalesce(excluded.status_url, status_url),
					due_at = excluded.due_at, next_poll_at = excluded.due_at,
					state = excluded.state, settled_at = excluded.settled_at, reason = NULL,
					lease_owner = NULL, lease_until = NULL
				WHERE state <> 'done'`, inbox.DefaultSource, id, nullable(statusURL), now, millis(due))
			if err != nil {
				return fmt.Errorf("expect %s: %w", id, err)
			}
			e, err := readExpectation(ctx, tx, inbox.DefaultSource, id)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expect: %w", err)
	}
	for i := range out {
		out[i] = out[i].AsOf(fromMillis(now))
	}
	return out, nil
}

const expectationColumns = `source, job_id, coalesce(status_url, ''), expected_at, due_at, state,
	coalesce(reason, ''), coalesce(settled_at, 0), next_poll_at, polls, redeliveries,
	coalesce(job_status, ''), coalesce(polled_at, 0), coalesce(last_error, '')`

type scanner interface{ Scan(dest ...any) error }

func scanExpectation(sc scanner) (inbox.Expectation, error) {
	var e inbox.Expectation
	var expected, due, settled, next, polled int64
	if err := sc.Scan(&e.Source, &e.JobID, &e.StatusURL, &expected, &due, &e.State, &e.Reason,
		&settled, &next, &e.Polls, &e.Redeliveries, &e.JobStatus, &polled, &e.LastError); err != nil {
		return inbox.Expectation{}, err
	}
	e.ExpectedAt, e.DueAt, e.NextPollAt = fromMillis(expected), fromMillis(due), fromMillis(next)
	if settled != 0 {
		e.SettledAt = fromMillis(settled)
	}
	if polled != 0 {
		e.PolledAt = fromMillis(polled)
	}
	return e, nil
}

func readExpectation(ctx context.Context, tx *sql.Tx, source, id string) (inbox.Expectation, error) {
	e, err := scanExpectation(tx.QueryRowContext(ctx, `SELECT `+expectationColumns+
		` FROM expectations WHERE source = ? AND job_id = ?`, source, id))
	if err != nil {
		return inbox.Expectation{}, fmt.Errorf("read expectation of %s: %w", id, err)
	}
	return e, nil
}

// Expected returns the expectations, due first; with overdue, only those
// waiting past their due time at now. A database that has no
// expectations table yet (made by an earlier inbox, opened read-only) has
// none.
func (s *Store) Expected(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error) {
	if ok, err := s.hasTable(ctx, "expectations"); err != nil || !ok {
		return nil, err
	}
	q := `SELECT ` + expectationColumns + ` FROM expectations`
	var args []any
	if overdue {
		q += ` WHERE state = 'waiting' AND due_at <= ?`
		args = append(args, millis(now))
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY due_at, job_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	defer rows.Close()
	var out []inbox.Expectation
	for rows.Next() {
		e, err := scanExpectation(rows)
		if err != nil {
			return nil, fmt.Errorf("read expectations: %w", err)
		}
		out = append(out, e.AsOf(now))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	return out, nil
}

// ClaimPolls leases up to max waiting expectations due at now to owner
// until until, in one transaction of the store's writer: each one's poll
// count goes up and its next poll time becomes the lease's end, so two
// pollers (two processes, two hosts on one database) never hold the same
// one, and one whose poller died is claimed again once the lease is over.
// It fails, claiming nothing, when the store cannot take the write.
func (s *Store) ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	if owner == "" || max <= 0 || !until.After(now) {
		return nil, fmt.Errorf("claim polls: want an owner, a max above 0 and a lease ending after now")
	}
	var polls []inbox.Poll
	err := s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		polls = polls[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE expectations
			SET polls = polls + 1, lease_owner = ?1, lease_until = ?2, next_poll_at = ?2
			WHERE rowid IN (SELECT rowid FROM expectations WHERE state = 'waiting' AND next_poll_at <= ?3
				ORDER BY next_poll_at LIMIT ?4)
			RETURNING source, job_id, coalesce(status_url, ''), polls, redeliveries, due_at`,
			owner, millis(until), millis(now), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p inbox.Poll
			var due int64
			if err := rows.Scan(&p.Source, &p.JobID, &p.StatusURL, &p.Attempt, &p.Redeliveries, &due); err != nil {
				return err
			}
			p.DueAt = fromMillis(due)
			polls = append(polls, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim polls: %w", err)
	}
	return polls, nil
}

// SettlePolls records the results of polls owner claimed. A result whose
// claim is gone (the job was delivered meanwhile, or the lease ran out and
// another poller claimed it) is counted in stale and changes nothing, but
// for a job delivered while this poll held it: its poll and redelivery
// are counted on the done expectation.
func (s *Store) SettlePolls(ctx context.Context, owner string, results []inbox.PollResult) (stale int, err error) {
	if len(results) == 0 {
		return 0, nil
	}
	if err := inbox.CheckPollResults(results); err != nil {
		return 0, fmt.Errorf("settle polls: %w", err)
	}
	var gotStale int
	err = s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		gotStale = 0
		for _, r := range results {
			set := `lease_owner = NULL, lease_until = NULL, polled_at = ?, job_status = coalesce(?, job_status), last_error = ?`
			args := []any{millis(r.At), nullable(r.JobStatus), nullable(r.KeptError())}
			switch r.Fate {
			case inbox.PollAgain:
				set += `, next_poll_at = ?`
				args = append(args, millis(r.Next))
			case inbox.PollRedelivered:
				set += `, next_poll_at = ?, redeliveries = redeliveries + 1`
				args = append(args, millis(r.Next))
			case inbox.PollClose:
				set += `, state = 'closed', reason = ?, settled_at = ?`
				args = append(args, r.CloseReason(), millis(r.At))
			}
			res, err := tx.ExecContext(ctx, `UPDATE expectations SET `+set+
				` WHERE source = ? AND job_id = ? AND lease_owner = ? AND polls = ? AND state = 'waiting'`,
				append(args, r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt)...)
			if err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			} else if n == 1 {
				continue
			}
			gotStale++
			// Delivered while polled (the redelivery may be what landed):
			// what the poll did is still counted, and its lease let go.
			redelivered := 0
			if r.Fate == inbox.PollRedelivered {
				redelivered = 1
			}
			if _, err := tx.ExecContext(ctx, `UPDATE expectations SET lease_owner = NULL, lease_until = NULL,
				polled_at = ?, job_status = coalesce(?, job_status), redeliveries = redeliveries + ?
				WHERE source = ? AND job_id = ? AND lease_owner = ? AND polls = ? AND state = 'done'`,
				millis(r.At), nullable(r.JobStatus), redelivered, r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt); err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("settle polls: %w", err)
	}
	return gotStale, nil
}

// NextPoll returns when the first waiting expectation becomes due; ok is
// false when none waits. It reads, so it never waits for the write lock.
func (s *Store) NextPoll(ctx context.Context) (at time.Time, ok bool, err error) {
	if ok, err := s.hasTable(ctx, "expectations"); err != nil || !ok {
		return time.Time{}, false, err
	}
	var ms sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT min(next_poll_at) FROM expectations WHERE state = 'waiting'`).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next poll: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(ms.Int64), true, nil
}

// Reconciliation reads the counts at now, in two queries.
func (s *Store) Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error) {
	var r inbox.Reconciliation
	if ok, err := s.hasTable(ctx, "expectations"); err != nil || !ok {
		return r, err
	}
	var oldest sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*), min(first_refused_at) FROM refusals`).Scan(&r.Missed, &oldest); err != nil {
		return r, fmt.Errorf("count missed: %w", err)
	}
	if oldest.Valid {
		r.OldestMissed = fromMillis(oldest.Int64)
	}
	err := s.read.QueryRowContext(ctx, `SELECT
		coalesce(sum(state = 'waiting' AND due_at > ?1), 0), coalesce(sum(state = 'waiting' AND due_at <= ?1), 0),
		coalesce(sum(state = 'done'), 0), coalesce(sum(state = 'closed'), 0) FROM expectations`, millis(now)).
		Scan(&r.Waiting, &r.Overdue, &r.Done, &r.Closed)
	if err != nil {
		return r, fmt.Errorf("count expectations: %w", err)
	}
	return r, nil
}
