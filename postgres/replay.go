package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// replaying is the store's inbox.ReplayStore, which inbox.Replayer,
// embedded in Store, replays through: each batch in one transaction
// bounded by the busy timeout, which locks the rows it reads, so that
// neither a dispatcher's settlement nor a delivery changes them under it.
type replaying struct{ s *Store }

func (r replaying) ReadOnly() bool { return r.s.readOnly }

// InReplayTx runs fn in one transaction bounded by the busy timeout, at
// the store's clock, rolled back when dryRun; it may run fn again (see
// inTx).
func (r replaying) InReplayTx(ctx context.Context, dryRun bool, fn func(inbox.ReplayTx, time.Time) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	err := r.s.inTx(ctx, func(tx pgx.Tx) error {
		now, err := r.s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		if err := fn(replayTx{queueTx{ctx: ctx, tx: tx, now: now}}, fromMillis(now)); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return nil
	}
	return err
}

// replayTx is inbox.ReplayTx in tx; it mirrors as the queue does.
type replayTx struct{ queueTx }

// Missing returns the ids that name no row.
func (r replaying) Missing(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	err := r.s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT u.id FROM unnest($1::text[]) AS u(id)
			WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = u.id)`, ids)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look for the rows named: %w", err)
	}
	return out, nil
}

// selectTimeout bounds Select when the caller set no deadline: a replay
// of millions of rows reads their ids in seconds.
const selectTimeout = 5 * time.Minute

// Select returns the ids of the rows sel selects, oldest first.
func (r replaying) Select(ctx context.Context, sel inbox.ReplaySelection) ([]string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, selectTimeout)
		defer cancel()
	}
	w, args := replayWhere(sel.IDs, sel.Filter)
	var out []string
	err := r.s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT id FROM events`+w+` ORDER BY received_at, id`, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}

// replayWhere is where's clause for f, narrowed to ids when given.
func replayWhere(ids []string, f inbox.Filter) (string, []any) {
	w, args := where(f)
	if len(ids) == 0 {
		return w, args
	}
	args = append(args, ids)
	cond := fmt.Sprintf(` id = ANY($%d::text[])`, len(args))
	if w == "" {
		return ` WHERE` + cond, args
	}
	return w + ` AND` + cond, args
}

// Rows locks and reads the rows of ids that f still selects, oldest
// first, with their pairs.
func (t replayTx) Rows(ids []string, f inbox.Filter) ([]inbox.ReplayRow, error) {
	w, args := replayWhere(ids, f)
	rows, err := t.tx.Query(t.ctx, `SELECT `+eventColumns+` FROM events`+w+` ORDER BY received_at, id FOR UPDATE`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.ReplayRow, error) {
		e, err := scanEvent(r.Scan, false)
		return inbox.ReplayRow{Event: e}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	at := map[string]int{}
	for i, r := range out {
		at[r.Event.ID] = i
	}
	pairs, err := t.tx.Query(t.ctx, `SELECT event_id, destination, status, coalesce(reason, '') FROM deliveries
		WHERE event_id = ANY($1::text[]) ORDER BY event_id, destination`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	var id string
	var p inbox.Pairing
	_, err = pgx.ForEachRow(pairs, []any{&id, &p.Destination, &p.Status, &p.Reason}, func() error {
		if i, ok := at[id]; ok {
			out[i].Pairs = append(out[i].Pairs, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	return out, nil
}

// replaySet is the pairs of $1 to $4 (ids, destinations, statuses, dues)
// as rows.
const replaySet = `unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS v(id, dest, status, due)`

// replayArrays is pairs as the four arrays replaySet reads.
func replayArrays(pairs []inbox.ReplayPair) (ids, dests, statuses []string, dues []int64) {
	n := len(pairs)
	ids, dests, statuses, dues = make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, p := range pairs {
		ids[i], dests[i], statuses[i], dues[i] = p.ID, p.Destination, string(p.Status), p.Due.UnixMilli()
	}
	return ids, dests, statuses, dues
}

// Reset keeps each pair's series in delivery_history, then makes it new
// again, due at its time, and its row new; only pairs still of the status
// read.
func (t replayTx) Reset(pairs []inbox.ReplayPair, now time.Time) ([]inbox.ReplayPair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	n := len(pairs)
	ids, dests, statuses, dues := replayArrays(pairs)
	at := now.UnixMilli()
	_, err := t.tx.Exec(t.ctx, `INSERT INTO delivery_history (event_id, destination, series, status, reason,
			attempts, last_error, updated_at, done_at, replayed_at)
		SELECT d.event_id, d.destination, 1 + coalesce((SELECT max(h.series) FROM delivery_history h
				WHERE h.event_id = d.event_id AND h.destination = d.destination), 0),
			d.status, d.reason, d.attempts, d.last_error, d.updated_at, d.done_at, $5
		FROM `+replaySet+` JOIN deliveries d ON d.event_id = v.id AND d.destination = v.dest AND d.status = v.status
		WHERE d.status IN ('done', 'parked')`, ids, dests, statuses, dues, at)
	if err != nil {
		return nil, fmt.Errorf("keep the series of %d pairs: %w", n, err)
	}
	rows, err := t.tx.Query(t.ctx, `UPDATE deliveries d SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = v.due, lease_owner = NULL, lease_until = NULL, last_error = NULL,
			done_at = NULL, updated_at = $5
		FROM `+replaySet+`
		WHERE d.event_id = v.id AND d.destination = v.dest AND d.status = v.status AND d.status IN ('done', 'parked')
		RETURNING d.event_id, d.destination`, ids, dests, statuses, dues, at)
	if err != nil {
		return nil, fmt.Errorf("reset %d pairs: %w", n, err)
	}
	done, err := t.renew(rows, pairs, at)
	if err != nil {
		return nil, fmt.Errorf("reset %d pairs: %w", n, err)
	}
	return done, nil
}

// renew reads the pairs rows returns (id, destination), and makes the rows
// of those of pairs among them new with no error of their own: the row's
// last error is its pairs' again once Mirror has run. It returns those
// pairs, in the order given.
func (t replayTx) renew(rows pgx.Rows, pairs []inbox.ReplayPair, at int64) ([]inbox.ReplayPair, error) {
	got := map[inbox.Pair]bool{}
	var p inbox.Pair
	if _, err := pgx.ForEachRow(rows, []any{&p.ID, &p.Destination}, func() error {
		got[p] = true
		return nil
	}); err != nil {
		return nil, err
	}
	kept, ids := inbox.Returned(pairs, got)
	_, err := t.tx.Exec(t.ctx, `UPDATE events SET status = 'new', reason = NULL, done_at = NULL, last_error = NULL,
			updated_at = CASE WHEN status <> 'new' THEN $2 ELSE updated_at END
		WHERE id = ANY($1::text[])`, ids, at)
	if err != nil {
		return nil, fmt.Errorf("renew %d rows: %w", len(ids), err)
	}
	return kept, nil
}

// Add makes the pairs new, due at their times, and their rows new: only
// for a row handed on already (done, parked by the dispatcher, or new
// with a pair) that has no pair for the destination yet.
func (t replayTx) Add(pairs []inbox.ReplayPair, now time.Time) ([]inbox.ReplayPair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	n := len(pairs)
	ids, dests, statuses, dues := replayArrays(pairs)
	at := now.UnixMilli()
	rows, err := t.tx.Query(t.ctx, `INSERT INTO deliveries (event_id, destination, status, attempts,
			next_attempt_at, received_at, updated_at)
		SELECT v.id, v.dest, 'new', 0, v.due, e.received_at, $5
		FROM `+replaySet+` JOIN events e ON e.id = v.id
		WHERE e.status = 'done' OR (e.status = 'parked' AND e.reason IN ('handler_failed', 'handler_rejected'))
			OR (e.status = 'new' AND EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = e.id))
		ON CONFLICT (event_id, destination) DO NOTHING
		RETURNING event_id, destination`, ids, dests, statuses, dues, at)
	if err != nil {
		return nil, fmt.Errorf("add %d pairs: %w", n, err)
	}
	added, err := t.renew(rows, pairs, at)
	if err != nil {
		return nil, fmt.Errorf("add %d pairs: %w", n, err)
	}
	return added, nil
}

// Reroute makes the rows of ids that are done (or parked by the
// dispatcher) with no pair new and not routed.
func (t replayTx) Reroute(ids []string, now time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := t.tx.Query(t.ctx, `UPDATE events e SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = 0, lease_owner = NULL, lease_until = NULL, last_error = NULL, done_at = NULL, updated_at = $2
		WHERE e.id = ANY($1::text[])
		AND (e.status = 'done' OR (e.status = 'parked' AND e.reason IN ('handler_failed', 'handler_rejected')))
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
		RETURNING e.id`, ids, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("route %d rows again: %w", len(ids), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("route %d rows again: %w", len(ids), err)
	}
	return out, nil
}

// history returns the earlier series of the row id's pairs, by
// destination, oldest first.
func (s *Store) history(ctx context.Context, id string) (map[string][]inbox.Series, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination, series, status, coalesce(reason, ''), attempts,
		coalesce(last_error, ''), updated_at, coalesce(done_at, 0), replayed_at
		FROM delivery_history WHERE event_id = $1 ORDER BY destination, series`, id)
	if err != nil {
		return nil, err
	}
	out := map[string][]inbox.Series{}
	var dest string
	var h inbox.Series
	var updated, done, replayed int64
	_, err = pgx.ForEachRow(rows, []any{&dest, &h.N, &h.Status, &h.Reason, &h.Attempts, &h.LastError, &updated, &done, &replayed}, func() error {
		h.UpdatedAt, h.DoneAt, h.ReplayedAt = fromMillis(updated), optMillis(done), fromMillis(replayed)
		out[dest] = append(out[dest], h)
		return nil
	})
	return out, err
}
