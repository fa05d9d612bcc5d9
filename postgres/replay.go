package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlrow"
)

// replaying is the store's inbox.ReplayStore, which inbox.Replayer,
// embedded in Store, replays through: each batch in one transaction
// bounded by the busy timeout, which locks the rows it reads, so that
// neither a dispatcher's settlement nor a delivery changes them under it.
type replaying struct{ s *Store }

func (r replaying) ReadOnly() bool { return r.s.readOnly }

// InReplayTx runs fn in one transaction bounded by the busy timeout, at
// the store's clock, rolled back when dryRun; it may run fn again (see
// Store.inTx).
func (r replaying) InReplayTx(ctx context.Context, dryRun bool, fn func(inbox.ReplayTx, time.Time) error) error {
	return r.inTx(ctx, dryRun, func(tx replayTx, now time.Time) error { return fn(tx, now) })
}

// inTx is InReplayTx with the store's own transaction, which a dismiss
// runs in too.
func (r replaying) inTx(ctx context.Context, dryRun bool, fn func(replayTx, time.Time) error) error {
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
	w, args := dialect.WhereIDs(sel.IDs, sel.Filter)
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

// Rows locks and reads the rows of ids that f still selects, oldest
// first.
func (t replayTx) Rows(ids []string, f inbox.Filter) ([]inbox.Event, error) {
	w, args := dialect.WhereIDs(ids, f)
	rows, err := t.tx.Query(t.ctx, `SELECT `+eventColumns+` FROM events`+w+` ORDER BY received_at, id FOR UPDATE`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Event, error) { return scanEvent(r.Scan, false) })
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	return out, nil
}

// Pairs reads the pairs of the rows of ids.
func (t replayTx) Pairs(ids []string) (map[string][]inbox.Pairing, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT event_id, destination, status, coalesce(reason, '') FROM deliveries
		WHERE event_id = ANY($1::text[]) ORDER BY event_id, destination`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	out := map[string][]inbox.Pairing{}
	var id string
	var p inbox.Pairing
	if _, err := pgx.ForEachRow(rows, []any{&id, &p.Destination, &p.Status, &p.Reason}, func() error {
		out[id] = append(out[id], p)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	return out, nil
}

// replaySet is the pairs of $1 to $4 (ids, destinations, statuses, dues)
// as rows.
const replaySet = `unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS v(id, dest, status, due)`

// replayArgs are the pairs as replaySet's arrays, then now.
func replayArgs(pairs []inbox.ReplayPair, now time.Time) []any {
	n := len(pairs)
	ids, dests, statuses, dues := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, p := range pairs {
		ids[i], dests[i], statuses[i], dues[i] = p.ID, p.Destination, string(p.Status), p.Due.UnixMilli()
	}
	return []any{ids, dests, statuses, dues, now.UnixMilli()}
}

// KeepSeries keeps the series of each pair still of the status read in
// delivery_history.
func (t replayTx) KeepSeries(pairs []inbox.ReplayPair, now time.Time) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO delivery_history (event_id, destination, series, status, reason,
			attempts, last_error, updated_at, done_at, replayed_at)
		SELECT d.event_id, d.destination, 1 + coalesce((SELECT max(h.series) FROM delivery_history h
				WHERE h.event_id = d.event_id AND h.destination = d.destination), 0),
			d.status, d.reason, d.attempts, d.last_error, d.updated_at, d.done_at, $5
		FROM `+replaySet+` JOIN deliveries d ON d.event_id = v.id AND d.destination = v.dest AND d.status = v.status
		WHERE d.status IN ('done', 'parked', 'dismissed')`, replayArgs(pairs, now)...)
	if err != nil {
		return fmt.Errorf("keep the series of %d pairs: %w", len(pairs), err)
	}
	return nil
}

// ResetPairs makes each pair still of the status read new again, due at
// its time.
func (t replayTx) ResetPairs(pairs []inbox.ReplayPair, now time.Time) (map[inbox.Pair]bool, error) {
	return t.changed("reset", len(pairs), `UPDATE deliveries d SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = v.due, lease_owner = NULL, lease_until = NULL, last_error = NULL,
			done_at = NULL, updated_at = $5
		FROM `+replaySet+`
		WHERE d.event_id = v.id AND d.destination = v.dest AND d.status = v.status AND d.status IN ('done', 'parked', 'dismissed')
		RETURNING d.event_id, d.destination`, replayArgs(pairs, now)...)
}

// AddPairs makes each pair new, due at its time, where its row was
// handed on and has no pair for the destination yet.
func (t replayTx) AddPairs(pairs []inbox.ReplayPair, now time.Time) (map[inbox.Pair]bool, error) {
	return t.changed("add", len(pairs), sqlrow.AddPairs(replaySet, "$5"), replayArgs(pairs, now)...)
}

// changed runs stmt, which does what to n pairs and returns those it
// changed (id, destination).
func (t replayTx) changed(what string, n int, stmt string, args ...any) (map[inbox.Pair]bool, error) {
	got := map[inbox.Pair]bool{}
	var p inbox.Pair
	rows, err := t.tx.Query(t.ctx, stmt, args...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&p.ID, &p.Destination}, func() error {
			got[p] = true
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("%s %d pairs: %w", what, n, err)
	}
	return got, nil
}

// Renew makes the rows of ids new, a dismissal no longer recorded; the
// row's last error is its pairs' again once Mirror has run.
func (t replayTx) Renew(ids []string, now time.Time) error {
	_, err := t.tx.Exec(t.ctx, `UPDATE events SET status = 'new', reason = NULL, done_at = NULL, last_error = NULL,
			dismissed_at = NULL, dismissed_by = NULL, dismiss_note = NULL,
			updated_at = CASE WHEN status <> 'new' THEN $2 ELSE updated_at END
		WHERE id = ANY($1::text[])`, ids, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("renew %d rows: %w", len(ids), err)
	}
	return nil
}

// Reroute makes the rows of ids that are done (or parked by the
// dispatcher, or dismissed so) with no pair new and not routed.
func (t replayTx) Reroute(ids []string, now time.Time) ([]string, error) {
	rows, err := t.tx.Query(t.ctx, `UPDATE events e SET status = 'new', reason = NULL, `+sqlrow.Fresh+`, updated_at = $2
		WHERE e.id = ANY($1::text[])
		AND (e.status = 'done' OR ((e.status = 'parked' OR e.status = 'dismissed') AND e.reason IN ('handler_failed', 'handler_rejected', 'too_large_for_destination')))
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
	_, err = pgx.ForEachRow(rows, []any{&dest, &h.N, &h.Status, &h.Reason, &h.Attempts, &h.LastError,
		sqlrow.Time{P: &h.UpdatedAt}, sqlrow.Time{P: &h.DoneAt, Unset: true}, sqlrow.Time{P: &h.ReplayedAt}}, func() error {
		out[dest] = append(out[dest], h)
		return nil
	})
	return out, err
}
