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

// stored holds while the events table has the row a refusal's key (the
// row id) names: such a refusal is not missed, whatever a race between
// replicas left behind.
const stored = `EXISTS (SELECT 1 FROM events WHERE events.id = refusals.key)`

// RecordRefusals writes refusals remembered while the store was down,
// adding each one's count and widening its times onto what the key already
// has. A key whose row exists by now is left out: a retry landed before
// the refusal could be written, so nothing is missing (and Missed leaves
// out one whose row a replica stored while this was written). It fails,
// writing nothing, when the store cannot take the write; the caller keeps
// them.
func (s *Store) RecordRefusals(ctx context.Context, refusals []inbox.Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	if s.readOnly {
		return errors.New("record refusals: store is read-only")
	}
	// Row locks in key order, as deliveries take them.
	refusals = slices.Clone(refusals)
	for i := range refusals {
		refusals[i] = refusals[i].Normalized()
	}
	slices.SortFunc(refusals, func(a, b inbox.Refusal) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, r := range refusals {
			_, err := tx.Exec(ctx, `INSERT INTO refusals AS r
				(source, key, job_id, event, first_refused_at, last_refused_at, refusals)
				SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM events WHERE id = $2)
				ON CONFLICT (source, key) DO UPDATE SET
					first_refused_at = least(r.first_refused_at, excluded.first_refused_at),
					last_refused_at = greatest(r.last_refused_at, excluded.last_refused_at),
					refusals = r.refusals + excluded.refusals,
					job_id = coalesce(excluded.job_id, r.job_id),
					event = coalesce(excluded.event, r.event)`,
				pgText(r.Source), pgText(r.Key), nullable(pgText(r.JobID)), nullable(pgText(r.Event)),
				r.First.UnixMilli(), r.Last.UnixMilli(), r.Count)
			if err != nil {
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

// Missed returns the refused keys not delivered since, first refused
// first; with before set, only those first refused before it.
func (s *Store) Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	limit := int64(1<<63 - 1)
	if !before.IsZero() {
		limit = before.UnixMilli()
	}
	rows, err := s.pool.Query(ctx, `SELECT source, key, coalesce(job_id, ''), coalesce(event, ''),
		first_refused_at, last_refused_at, refusals FROM refusals WHERE first_refused_at < $1 AND NOT `+stored+`
		ORDER BY first_refused_at, source, key`, limit)
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Refusal, error) {
		var ref inbox.Refusal
		var first, last int64
		err := r.Scan(&ref.Source, &ref.Key, &ref.JobID, &ref.Event, &first, &last, &ref.Count)
		ref.First, ref.Last = fromMillis(first), fromMillis(last)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	return out, nil
}

// settleArrivals runs in the transaction of a batch of deliveries, after
// they landed: each one clears its key's refusal and settles its job's
// waiting expectation as done, so a key is never both stored and missing.
// One statement, which finds nothing to do through the primary keys.
func settleArrivals(ctx context.Context, tx pgx.Tx, batch []*putRequest, now int64) error {
	n := len(batch)
	sources, keys, jobs := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	for _, req := range batch {
		d := req.d
		sources, keys, jobs = append(sources, inbox.SourceOf(d)), append(keys, d.Key), append(jobs, d.JobID)
	}
	// A poll under way keeps its lease, so it can still record the
	// redelivery it asked for (SettlePolls).
	_, err := tx.Exec(ctx, `WITH d AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS d(source, key, job_id)),
		cleared AS (DELETE FROM refusals f USING d WHERE f.source = d.source AND f.key = d.key)
		UPDATE expectations x SET state = 'done', settled_at = $4
		FROM d WHERE x.source = d.source AND x.job_id = d.job_id AND d.job_id <> '' AND x.state = 'waiting'`,
		sources, keys, jobs, now)
	if err != nil {
		return fmt.Errorf("settle arrivals: %w", err)
	}
	return nil
}

// Expect records that a delivery of each of Sume's jobs is expected by due
// (on this process's clock, placed on the store's), its status read at
// statusURL ("" for the API's own) when it is late, and returns the
// expectations as they then stand. A job whose row is already stored is
// done at once. Expecting a job again that is waiting (or was closed)
// moves it to the new due time, waiting; a done one stays done. It fails,
// recording nothing, on an invalid job id or when the store cannot take
// the write.
func (s *Store) Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]inbox.Expectation, error) {
	for _, id := range jobs {
		if err := inbox.CheckJobID(id); err != nil {
			return nil, err
		}
	}
	if s.readOnly {
		return nil, errors.New("expect: store is read-only")
	}
	ahead := due.Sub(s.localNow()).Milliseconds()
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var out []inbox.Expectation
	var now int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		var err error
		if now, err = s.txNow(ctx, tx); err != nil {
			return err
		}
		for _, id := range jobs {
			_, err := tx.Exec(ctx, `INSERT INTO expectations AS x
				(source, job_id, status_url, expected_at, due_at, state, settled_at, next_poll_at)
				SELECT $1, $2, $3, $4, $5, CASE WHEN e.n THEN 'done' ELSE 'waiting' END,
					CASE WHEN e.n THEN $4::bigint END, $5
				FROM (SELECT EXISTS (SELECT 1 FROM events WHERE id = $6) AS n) AS e
				ON CONFLICT (source, job_id) DO UPDATE SET
					status_url = coalesce(excluded.status_url, x.status_url),
					due_at = excluded.due_at, next_poll_at = excluded.due_at,
					state = excluded.state, settled_at = excluded.settled_at, reason = NULL,
					lease_owner = NULL, lease_until = NULL
				WHERE x.state <> 'done'`, inbox.DefaultSource, id, nullable(statusURL), now, now+ahead,
				inbox.RowID(inbox.DefaultSource, id))
			if err != nil {
				return fmt.Errorf("expect %s: %w", id, err)
			}
			e, err := scanExpectation(tx.QueryRow(ctx, `SELECT `+expectationColumns+
				` FROM expectations WHERE source = $1 AND job_id = $2`, inbox.DefaultSource, id))
			if err != nil {
				return fmt.Errorf("read expectation of %s: %w", id, err)
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

func scanExpectation(row pgx.Row) (inbox.Expectation, error) {
	var e inbox.Expectation
	var state string
	var expected, due, settled, next, polled int64
	if err := row.Scan(&e.Source, &e.JobID, &e.StatusURL, &expected, &due, &state, &e.Reason,
		&settled, &next, &e.Polls, &e.Redeliveries, &e.JobStatus, &polled, &e.LastError); err != nil {
		return inbox.Expectation{}, err
	}
	e.State = inbox.ExpectState(state)
	e.ExpectedAt, e.DueAt, e.NextPollAt = fromMillis(expected), fromMillis(due), fromMillis(next)
	if settled != 0 {
		e.SettledAt = fromMillis(settled)
	}
	if polled != 0 {
		e.PolledAt = fromMillis(polled)
	}
	return e, nil
}

// Expected returns the expectations, due first; with overdue, only those
// waiting past their due time at now.
func (s *Store) Expected(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	q := `SELECT ` + expectationColumns + ` FROM expectations`
	var args []any
	if overdue {
		q += ` WHERE state = 'waiting' AND due_at <= $1`
		args = append(args, now.UnixMilli())
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY due_at, job_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Expectation, error) {
		e, err := scanExpectation(r)
		return e.AsOf(now), err
	})
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	return out, nil
}

// ClaimPolls leases up to max waiting expectations due on the store's
// clock to owner, for until-now from it, in one transaction: each one's
// poll count goes up and its next poll time becomes the lease's end, so
// pollers on several replicas never hold the same one (SKIP LOCKED passes
// over those another poller is claiming), and one whose poller died is
// claimed again once the lease is over. A due expectation whose job is
// stored by now (a delivery on another replica raced its Expect) is
// settled done rather than claimed. It fails, claiming nothing, when the
// store cannot take the write.
func (s *Store) ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	if owner == "" || max <= 0 || !until.After(now) {
		return nil, fmt.Errorf("claim polls: want an owner, a max above 0 and a lease ending after now")
	}
	if s.readOnly {
		return nil, errors.New("claim polls: store is read-only")
	}
	lease := until.Sub(now).Milliseconds()
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var polls []inbox.Poll
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `WITH due AS (
				SELECT x.source, x.job_id, EXISTS (SELECT 1 FROM events
					WHERE events.id = CASE WHEN x.source = $5 THEN x.job_id ELSE x.source || '/' || x.job_id END) AS stored
				FROM expectations x WHERE x.state = 'waiting' AND x.next_poll_at <= $3
				ORDER BY x.next_poll_at LIMIT $4 FOR UPDATE SKIP LOCKED),
			settled AS (UPDATE expectations x SET state = 'done', settled_at = $3, lease_owner = NULL, lease_until = NULL
				FROM due WHERE due.stored AND x.source = due.source AND x.job_id = due.job_id)
			UPDATE expectations x SET polls = x.polls + 1, lease_owner = $1, lease_until = $2, next_poll_at = $2
			FROM due WHERE NOT due.stored AND x.source = due.source AND x.job_id = due.job_id
			RETURNING x.source, x.job_id, coalesce(x.status_url, ''), x.polls, x.redeliveries, x.due_at`,
			pgText(owner), now+lease, now, max, inbox.DefaultSource)
		if err != nil {
			return err
		}
		polls, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Poll, error) {
			var p inbox.Poll
			var due int64
			err := r.Scan(&p.Source, &p.JobID, &p.StatusURL, &p.Attempt, &p.Redeliveries, &due)
			p.DueAt = fromMillis(due)
			return p, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim polls: %w", err)
	}
	slices.SortFunc(polls, func(a, b inbox.Poll) int { return a.DueAt.Compare(b.DueAt) })
	return polls, nil
}

// SettlePolls records the results of polls owner claimed; their At and
// Next are placed on the store's clock relative to the latest At, as
// Settle places a dispatcher's times. A result whose claim is gone (the
// job was delivered meanwhile, or the lease ran out and another poller
// claimed it) is counted in stale and changes nothing, but for a job
// delivered while this poll held it: its poll and redelivery are counted
// on the done expectation.
func (s *Store) SettlePolls(ctx context.Context, owner string, results []inbox.PollResult) (stale int, err error) {
	if len(results) == 0 {
		return 0, nil
	}
	if s.readOnly {
		return 0, errors.New("settle polls: store is read-only")
	}
	if err := inbox.CheckPollResults(results); err != nil {
		return 0, fmt.Errorf("settle polls: %w", err)
	}
	var ref time.Time
	for _, r := range results {
		if r.At.After(ref) {
			ref = r.At
		}
	}
	// Row locks in key order.
	results = slices.Clone(results)
	slices.SortStableFunc(results, func(a, b inbox.PollResult) int {
		if c := strings.Compare(a.Poll.Source, b.Poll.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Poll.JobID, b.Poll.JobID)
	})
	owner = pgText(owner)
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		stale = 0
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		at := func(t time.Time) int64 { return now + t.Sub(ref).Milliseconds() }
		for _, r := range results {
			args := []any{r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt,
				at(r.At), nullable(pgText(r.JobStatus)), nullable(pgText(r.KeptError()))}
			set := `lease_owner = NULL, lease_until = NULL, polled_at = $5, job_status = coalesce($6, job_status), last_error = $7`
			switch r.Fate {
			case inbox.PollAgain:
				set += `, next_poll_at = $8`
				args = append(args, at(r.Next))
			case inbox.PollRedelivered:
				set += `, next_poll_at = $8, redeliveries = redeliveries + 1`
				args = append(args, at(r.Next))
			case inbox.PollClose:
				set += `, state = 'closed', reason = $8, settled_at = $5`
				args = append(args, pgText(r.CloseReason()))
			}
			tag, err := tx.Exec(ctx, `UPDATE expectations SET `+set+
				` WHERE source = $1 AND job_id = $2 AND lease_owner = $3 AND polls = $4 AND state = 'waiting'`, args...)
			if err != nil {
				return fmt.Errorf("settle poll of %s: %w", r.Poll.JobID, err)
			}
			if tag.RowsAffected() == 1 {
				continue
			}
			stale++
			// Delivered while polled (the redelivery may be what landed):
			// what the poll did is still counted, and its lease let go.
			redelivered := 0
			if r.Fate == inbox.PollRedelivered {
				redelivered = 1
			}
			if _, err := tx.Exec(ctx, `UPDATE expectations SET lease_owner = NULL, lease_until = NULL,
				polled_at = $5, job_status = coalesce($6, job_status), redeliveries = redeliveries + $7
				WHERE source = $1 AND job_id = $2 AND lease_owner = $3 AND polls = $4 AND state = 'done'`,
				r.Poll.Source, r.Poll.JobID, owner, r.Poll.Attempt, at(r.At), nullable(pgText(r.JobStatus)), redelivered); err != nil {
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

// NextPoll returns when the first waiting expectation becomes due, on this
// process's clock (as NextDue does); ok is false when none waits.
func (s *Store) NextPoll(ctx context.Context) (at time.Time, ok bool, err error) {
	at, ok, err = s.earliest(ctx, `min(next_poll_at) FROM expectations WHERE state = 'waiting'`)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next poll: %w", err)
	}
	return at, ok, nil
}

// Reconciliation reads the counts at now, in two queries.
func (s *Store) Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var r inbox.Reconciliation
	var oldest *int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(first_refused_at) FROM refusals WHERE NOT `+stored).
		Scan(&r.Missed, &oldest); err != nil {
		return r, fmt.Errorf("count missed: %w", err)
	}
	if oldest != nil {
		r.OldestMissed = fromMillis(*oldest)
	}
	err := s.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE state = 'waiting' AND due_at > $1), count(*) FILTER (WHERE state = 'waiting' AND due_at <= $1),
		count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'closed') FROM expectations`, now.UnixMilli()).
		Scan(&r.Waiting, &r.Overdue, &r.Done, &r.Closed)
	if err != nil {
		return r, fmt.Errorf("count expectations: %w", err)
	}
	return r, nil
}
