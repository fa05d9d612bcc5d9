package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// The reconciliation records: refusals remembered while the store was
// down, expectations and their polls, and settling them as deliveries
// land. The writes run as inbox.Reconciler, embedded in Store, says, each
// in one transaction bounded by the busy timeout, on the store's clock
// (reconciling); the reads are here. Missed leaves out a refusal whose row
// a replica stored while it was written. Pollers on several replicas
// never hold the same expectation (SKIP LOCKED passes over those another
// poller is claiming), and a due one whose job is stored by now (a
// delivery on another replica raced its Expect) is settled done rather
// than claimed. Expect places due, and SettlePolls the results' times, on
// the store's clock as far ahead as it is of this process's.

// stored holds while the events table has the row a refusal's key (the
// row id) names: such a refusal is not missed, whatever a race between
// replicas left behind.
const stored = `EXISTS (SELECT 1 FROM events WHERE events.id = refusals.key)`

// reconciling is the store's inbox.ReconcileStore.
type reconciling struct{ s *Store }

func (r reconciling) ReadOnly() bool { return r.s.readOnly }

// InReconcileTx runs fn in one transaction bounded by the busy timeout,
// at the database's clock (the injected one when set), placing the times
// it is given relative to ref.
func (r reconciling) InReconcileTx(ctx context.Context, ref time.Time, fn func(inbox.ReconcileTx) error) error {
	if ref.IsZero() {
		ref = r.s.localNow()
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	return r.s.inTx(ctx, func(tx pgx.Tx) error {
		now, err := r.s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		return fn(reconcileTx{ctx: ctx, tx: tx, now: now, ref: ref})
	})
}

// reconcileTx is inbox.ReconcileTx in tx, under the transaction's bounded
// context, whose clock reads now when this process's reads ref.
type reconcileTx struct {
	ctx context.Context
	tx  pgx.Tx
	now int64
	ref time.Time
}

func (t reconcileTx) Now() time.Time { return fromMillis(t.now) }

// at places t on the store's clock.
func (t reconcileTx) at(tm time.Time) int64 { return t.now + tm.Sub(t.ref).Milliseconds() }

// RecordRefusal adds r to its key's refusal unless the key's row exists.
func (t reconcileTx) RecordRefusal(r inbox.Refusal) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO refusals AS r
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
	return err
}

// Expect records the expectation of jobID and reads it back.
func (t reconcileTx) Expect(jobID, statusURL string, due time.Time) (inbox.Expectation, error) {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO expectations AS x
		(source, job_id, status_url, expected_at, due_at, state, settled_at, next_poll_at)
		SELECT $1, $2, $3, $4, $5, CASE WHEN e.n THEN 'done' ELSE 'waiting' END,
			CASE WHEN e.n THEN $4::bigint END, $5
		FROM (SELECT EXISTS (SELECT 1 FROM events WHERE id = $6) AS n) AS e
		ON CONFLICT (source, job_id) DO UPDATE SET
			status_url = coalesce(excluded.status_url, x.status_url),
			due_at = excluded.due_at, next_poll_at = excluded.due_at,
			state = excluded.state, settled_at = excluded.settled_at, reason = NULL,
			lease_owner = NULL, lease_until = NULL
		WHERE x.state <> 'done'`, inbox.DefaultSource, jobID, nullable(statusURL), t.now, t.at(due),
		inbox.RowID(inbox.DefaultSource, jobID))
	if err != nil {
		return inbox.Expectation{}, err
	}
	e, err := inbox.ScanExpectation(t.tx.QueryRow(t.ctx, `SELECT `+expectationColumns+
		` FROM expectations WHERE source = $1 AND job_id = $2`, inbox.DefaultSource, jobID).Scan)
	if err != nil {
		return inbox.Expectation{}, fmt.Errorf("read expectation of %s: %w", jobID, err)
	}
	return e, nil
}

// ClaimPolls leases the due expectations, settling done those whose job
// is stored.
func (t reconcileTx) ClaimPolls(owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	rows, err := t.tx.Query(t.ctx, `WITH due AS (
			SELECT x.source, x.job_id, EXISTS (SELECT 1 FROM events
				WHERE events.id = CASE WHEN x.source = $5 THEN x.job_id ELSE x.source || '/' || x.job_id END) AS stored
			FROM expectations x WHERE x.state = 'waiting' AND x.next_poll_at <= $3
			ORDER BY x.next_poll_at LIMIT $4 FOR UPDATE SKIP LOCKED),
		settled AS (UPDATE expectations x SET state = 'done', settled_at = $3, lease_owner = NULL, lease_until = NULL
			FROM due WHERE due.stored AND x.source = due.source AND x.job_id = due.job_id)
		UPDATE expectations x SET polls = x.polls + 1, lease_owner = $1, lease_until = $2, next_poll_at = $2
		FROM due WHERE NOT due.stored AND x.source = due.source AND x.job_id = due.job_id
		RETURNING x.source, x.job_id, coalesce(x.status_url, ''), x.polls, x.redeliveries, x.due_at`,
		pgText(owner), t.at(until), t.at(now), max, inbox.DefaultSource)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Poll, error) {
		var p inbox.Poll
		var due int64
		err := r.Scan(&p.Source, &p.JobID, &p.StatusURL, &p.Attempt, &p.Redeliveries, &due)
		p.DueAt = fromMillis(due)
		return p, err
	})
}

// SettlePoll records r on its waiting expectation while owner holds it.
func (t reconcileTx) SettlePoll(owner string, r inbox.PollResult) (bool, error) {
	args := []any{r.Poll.Source, r.Poll.JobID, pgText(owner), r.Poll.Attempt,
		t.at(r.At), nullable(pgText(r.JobStatus)), nullable(pgText(r.KeptError()))}
	set := `lease_owner = NULL, lease_until = NULL, polled_at = $5, job_status = coalesce($6, job_status), last_error = $7`
	switch r.Fate {
	case inbox.PollAgain:
		set += `, next_poll_at = $8`
		args = append(args, t.at(r.Next))
	case inbox.PollRedelivered:
		set += `, next_poll_at = $8, redeliveries = redeliveries + 1`
		args = append(args, t.at(r.Next))
	case inbox.PollClose:
		set += `, state = 'closed', reason = $8, settled_at = $5`
		args = append(args, pgText(r.CloseReason()))
	}
	tag, err := t.tx.Exec(t.ctx, `UPDATE expectations SET `+set+
		` WHERE source = $1 AND job_id = $2 AND lease_owner = $3 AND polls = $4 AND state = 'waiting'`, args...)
	return tag.RowsAffected() == 1, err
}

// SettleDelivered counts r on the done expectation owner's claim held.
func (t reconcileTx) SettleDelivered(owner string, r inbox.PollResult) error {
	redelivered := 0
	if r.Fate == inbox.PollRedelivered {
		redelivered = 1
	}
	_, err := t.tx.Exec(t.ctx, `UPDATE expectations SET lease_owner = NULL, lease_until = NULL,
		polled_at = $5, job_status = coalesce($6, job_status), redeliveries = redeliveries + $7
		WHERE source = $1 AND job_id = $2 AND lease_owner = $3 AND polls = $4 AND state = 'done'`,
		r.Poll.Source, r.Poll.JobID, pgText(owner), r.Poll.Attempt, t.at(r.At), nullable(pgText(r.JobStatus)), redelivered)
	return err
}

// Missed returns the refused keys not delivered since, first refused
// first; with before set, only those first refused before it.
func (s *Store) Missed(ctx context.Context, before time.Time) ([]inbox.Refusal, error) {
	limit := int64(1<<63 - 1)
	if !before.IsZero() {
		limit = before.UnixMilli()
	}
	out, err := collect(ctx, s, `SELECT source, key, coalesce(job_id, ''), coalesce(event, ''),
		first_refused_at, last_refused_at, refusals FROM refusals WHERE first_refused_at < $1 AND NOT `+stored+`
		ORDER BY first_refused_at, source, key`, []any{limit},
		func(r pgx.CollectableRow) (ref inbox.Refusal, err error) {
			var first, last int64
			err = r.Scan(&ref.Source, &ref.Key, &ref.JobID, &ref.Event, &first, &last, &ref.Count)
			ref.First, ref.Last = fromMillis(first), fromMillis(last)
			return ref, err
		})
	if err != nil {
		return nil, fmt.Errorf("read missed: %w", err)
	}
	return out, nil
}

// settleArrivals queues in t, for the transaction of a batch of
// deliveries, after they landed: each one clears its key's refusal and
// settles its job's waiting expectation as done, so a key is never both
// stored and missing. One statement a source (sources in order, so two
// batches take the rows in the same order), which finds nothing to do
// through the primary keys: a statement the server plans in a small part
// of what a join of the batch's pairs took it.
func settleArrivals(t *tail, landed []inbox.Delivery, now int64) {
	bySource := map[string][]inbox.Delivery{}
	var sources []string
	for _, d := range landed {
		src := inbox.SourceOf(d)
		if _, ok := bySource[src]; !ok {
			sources = append(sources, src)
		}
		bySource[src] = append(bySource[src], d)
	}
	slices.Sort(sources)
	for _, src := range sources {
		ds := bySource[src]
		keys, jobs := make([]string, 0, len(ds)), make([]string, 0, len(ds))
		for _, d := range ds {
			keys = append(keys, d.Key)
			if d.JobID != "" {
				jobs = append(jobs, d.JobID)
			}
		}
		// A poll under way keeps its lease, so it can still record the
		// redelivery it asked for (SettlePolls).
		t.queue("settle arrivals", `WITH cleared AS (DELETE FROM refusals WHERE source = $1 AND key = ANY($2))
		UPDATE expectations SET state = 'done', settled_at = $4
		WHERE source = $1 AND job_id = ANY($3) AND state = 'waiting'`,
			src, keys, jobs, now)
	}
}

// expectationColumns are what inbox.ScanExpectation reads.
const expectationColumns = `source, job_id, coalesce(status_url, ''), expected_at, due_at, state,
	coalesce(reason, ''), coalesce(settled_at, 0), next_poll_at, polls, redeliveries,
	coalesce(job_status, ''), coalesce(polled_at, 0), coalesce(last_error, '')`

// Expectations reads the expectations in a read (Store.read).
func (r reconciling) Expectations(ctx context.Context, now time.Time, overdue bool) ([]inbox.Expectation, error) {
	q := `SELECT ` + expectationColumns + ` FROM expectations`
	var args []any
	if overdue {
		q += ` WHERE state = 'waiting' AND due_at <= $1`
		args = append(args, now.UnixMilli())
	}
	return collect(ctx, r.s, q+` ORDER BY due_at, job_id`, args, func(row pgx.CollectableRow) (inbox.Expectation, error) {
		return inbox.ScanExpectation(row.Scan)
	})
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

// Reconciliation reads the counts at now, in two queries of one read
// (Store.read).
func (s *Store) Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error) {
	var r inbox.Reconciliation
	var oldest *int64
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		if err := q.QueryRow(ctx, `SELECT count(*), min(first_refused_at) FROM refusals WHERE NOT `+stored).
			Scan(&r.Missed, &oldest); err != nil {
			return fmt.Errorf("count missed: %w", err)
		}
		if err := q.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE state = 'waiting' AND due_at > $1), count(*) FILTER (WHERE state = 'waiting' AND due_at <= $1),
			count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'closed') FROM expectations`, now.UnixMilli()).
			Scan(&r.Waiting, &r.Overdue, &r.Done, &r.Closed); err != nil {
			return fmt.Errorf("count expectations: %w", err)
		}
		return nil
	})
	if err != nil {
		return inbox.Reconciliation{}, err
	}
	if oldest != nil {
		r.OldestMissed = fromMillis(*oldest)
	}
	return r, nil
}
