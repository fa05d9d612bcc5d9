package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"inbox/inbox"
)

// replaying is the store's inbox.ReplayStore, which inbox.Replayer,
// embedded in Store, replays through: each batch in one IMMEDIATE
// transaction of the write connection, which holds the database, so what
// a batch reads stays as read until it commits.
type replaying struct{ s *Store }

func (r replaying) ReadOnly() bool { return r.s.write == nil }

// errNoHistory is Replay's error on a database that serve or dispatch of
// this version has not opened yet: the admin commands do not upgrade it.
var errNoHistory = errors.New("the database has no delivery_history table yet: run inbox migrate once, which upgrades it")

// InReplayTx runs fn in one IMMEDIATE transaction of the write
// connection, rolled back when dryRun, at the store's clock.
func (r replaying) InReplayTx(ctx context.Context, dryRun bool, fn func(inbox.ReplayTx, time.Time) error) error {
	tx, err := r.s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	ok, err := hasTable(ctx, tx, "delivery_history")
	if err != nil {
		return err
	}
	if !ok {
		return errNoHistory
	}
	now := r.s.now()
	if err := fn(replayTx{r.s.queueTx(ctx, tx)}, now); err != nil {
		return err
	}
	if dryRun {
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// replayTx is inbox.ReplayTx in tx; it mirrors as the queue does.
type replayTx struct{ queueTx }

// jsonList is ids as the JSON array json_each reads.
func jsonList(ids []string) string {
	b, _ := json.Marshal(ids) // strings: cannot fail
	return string(b)
}

// Missing returns the ids that name no row.
func (r replaying) Missing(ctx context.Context, ids []string) ([]string, error) {
	rows, err := r.s.read.QueryContext(ctx, `SELECT value FROM json_each(?1)
		WHERE value NOT IN (SELECT id FROM events WHERE id IN (SELECT value FROM json_each(?1)))`, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("look for the rows named: %w", err)
	}
	return collect(rows, func(scan func(...any) error) (id string, err error) { return id, scan(&id) })
}

// Select returns the ids of the rows sel selects, oldest first, through
// the read connections.
func (r replaying) Select(ctx context.Context, sel inbox.ReplaySelection) ([]string, error) {
	w, args := replayWhere(sel.IDs, sel.Filter)
	rows, err := r.s.read.QueryContext(ctx, `SELECT id FROM events`+w+` ORDER BY received_at, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(scan func(...any) error) (id string, err error) { return id, scan(&id) })
}

// replayWhere is where's clause for f, narrowed to ids when given.
func replayWhere(ids []string, f inbox.Filter) (string, []any) {
	w, args := where(f)
	if len(ids) == 0 {
		return w, args
	}
	cond := ` id IN (SELECT value FROM json_each(?))`
	if w == "" {
		return ` WHERE` + cond, append(args, jsonList(ids))
	}
	return w + ` AND` + cond, append(args, jsonList(ids))
}

// Rows reads the rows of ids that f still selects, oldest first, with
// their pairs.
func (t replayTx) Rows(ids []string, f inbox.Filter) ([]inbox.ReplayRow, error) {
	// The rows are found by id, each then checked against f: CROSS JOIN
	// keeps the planner from walking an index f names (the received
	// times of a --since) through every row it holds, for each batch.
	w, args := where(f)
	rows, err := t.tx.QueryContext(t.ctx, `SELECT `+eventColumns+` FROM events WHERE rowid IN (SELECT events.rowid
		FROM json_each(?) AS j CROSS JOIN events ON events.id = j.value`+w+`) ORDER BY received_at, id`,
		append([]any{jsonList(ids)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	out, err := collect(rows, func(scan func(...any) error) (inbox.ReplayRow, error) {
		e, err := scanEvent(scan, false)
		return inbox.ReplayRow{Event: e}, err
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	at := map[string]int{}
	for i, r := range out {
		at[r.Event.ID] = i
	}
	pairs, err := t.tx.QueryContext(t.ctx, `SELECT event_id, destination, status, coalesce(reason, '') FROM deliveries
		WHERE event_id IN (SELECT value FROM json_each(?)) ORDER BY event_id, destination`, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	err = each(pairs, func(scan func(...any) error) error {
		var id string
		var p inbox.Pairing
		if err := scan(&id, &p.Destination, &p.Status, &p.Reason); err != nil {
			return err
		}
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

// replayValues is pairs as the JSON array of [id, destination, status,
// due] the reset statements read.
func replayValues(pairs []inbox.ReplayPair) string {
	vals := make([][]any, len(pairs))
	for i, p := range pairs {
		vals[i] = []any{p.ID, p.Destination, string(p.Status), millis(p.Due)}
	}
	b, _ := json.Marshal(vals) // strings and numbers: cannot fail
	return string(b)
}

// replaySet is the pairs of the JSON array replayValues makes, as rows.
const replaySet = `(SELECT value ->> 0 AS id, value ->> 1 AS dest, value ->> 2 AS status, value ->> 3 AS due
	FROM json_each(?1))`

// Reset keeps each pair's series in delivery_history, then makes it new
// again, due at its time, and its row new; only pairs still of the status
// read.
func (t replayTx) Reset(pairs []inbox.ReplayPair, now time.Time) ([]inbox.ReplayPair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	vals, at := replayValues(pairs), millis(now)
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO delivery_history (event_id, destination, series, status, reason,
			attempts, last_error, updated_at, done_at, replayed_at)
		SELECT d.event_id, d.destination, 1 + coalesce((SELECT max(h.series) FROM delivery_history h
				WHERE h.event_id = d.event_id AND h.destination = d.destination), 0),
			d.status, d.reason, d.attempts, d.last_error, d.updated_at, d.done_at, ?2
		FROM `+replaySet+` AS v JOIN deliveries d ON d.event_id = v.id AND d.destination = v.dest AND d.status = v.status
		WHERE d.status IN ('done', 'parked')`, vals, at)
	if err != nil {
		return nil, fmt.Errorf("keep the series of %d pairs: %w", len(pairs), err)
	}
	rows, err := t.tx.QueryContext(t.ctx, `UPDATE deliveries SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = v.due, lease_owner = NULL, lease_until = NULL, last_error = NULL,
			done_at = NULL, updated_at = ?2
		FROM `+replaySet+` AS v
		WHERE deliveries.event_id = v.id AND deliveries.destination = v.dest AND deliveries.status = v.status
		AND deliveries.status IN ('done', 'parked')
		RETURNING deliveries.event_id, deliveries.destination`, vals, at)
	if err != nil {
		return nil, fmt.Errorf("reset %d pairs: %w", len(pairs), err)
	}
	done, err := t.renew(rows, pairs, at)
	if err != nil {
		return nil, fmt.Errorf("reset %d pairs: %w", len(pairs), err)
	}
	return done, nil
}

// renew reads the pairs rows returns (id, destination), and makes the rows
// of those of pairs among them new with no error of their own: the row's
// last error is its pairs' again once Mirror has run. It returns those
// pairs, in the order given.
func (t replayTx) renew(rows *sql.Rows, pairs []inbox.ReplayPair, at int64) ([]inbox.ReplayPair, error) {
	got := map[inbox.Pair]bool{}
	err := each(rows, func(scan func(...any) error) error {
		var p inbox.Pair
		err := scan(&p.ID, &p.Destination)
		got[p] = true
		return err
	})
	if err != nil {
		return nil, err
	}
	kept, ids := inbox.Returned(pairs, got)
	_, err = t.tx.ExecContext(t.ctx, `UPDATE events SET status = 'new', reason = NULL, done_at = NULL, last_error = NULL,
			updated_at = CASE WHEN status <> 'new' THEN ?2 ELSE updated_at END
		WHERE id IN (SELECT value FROM json_each(?1))`, jsonList(ids), at)
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
	vals, at := replayValues(pairs), millis(now)
	rows, err := t.tx.QueryContext(t.ctx, `INSERT INTO deliveries (event_id, destination, status, attempts,
			next_attempt_at, received_at, updated_at)
		SELECT v.id, v.dest, 'new', 0, v.due, e.received_at, ?2
		FROM `+replaySet+` AS v JOIN events e ON e.id = v.id
		WHERE e.status = 'done' OR (e.status = 'parked' AND e.reason IN ('handler_failed', 'handler_rejected'))
			OR (e.status = 'new' AND EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = e.id))
		ON CONFLICT (event_id, destination) DO NOTHING
		RETURNING event_id, destination`, vals, at)
	if err != nil {
		return nil, fmt.Errorf("add %d pairs: %w", len(pairs), err)
	}
	added, err := t.renew(rows, pairs, at)
	if err != nil {
		return nil, fmt.Errorf("add %d pairs: %w", len(pairs), err)
	}
	return added, nil
}

// Reroute makes the rows of ids that are done (or parked by the
// dispatcher) with no pair new and not routed.
func (t replayTx) Reroute(ids []string, now time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := t.tx.QueryContext(t.ctx, `UPDATE events SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = 0, lease_owner = NULL, lease_until = NULL, last_error = NULL, done_at = NULL, updated_at = ?2
		WHERE id IN (SELECT value FROM json_each(?1))
		AND (status = 'done' OR (status = 'parked' AND reason IN ('handler_failed', 'handler_rejected')))
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id)
		RETURNING id`, jsonList(ids), millis(now))
	if err != nil {
		return nil, fmt.Errorf("route %d rows again: %w", len(ids), err)
	}
	return collect(rows, func(scan func(...any) error) (id string, err error) { return id, scan(&id) })
}

// history returns the earlier series of the row id's pairs, by
// destination, oldest first; none on a database not upgraded yet.
func (s *Store) history(ctx context.Context, id string) (map[string][]inbox.Series, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'delivery_history'`).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT destination, series, status, coalesce(reason, ''), attempts,
		coalesce(last_error, ''), updated_at, coalesce(done_at, 0), replayed_at
		FROM delivery_history WHERE event_id = ? ORDER BY destination, series`, id)
	if err != nil {
		return nil, err
	}
	out := map[string][]inbox.Series{}
	return out, each(rows, func(scan func(...any) error) error {
		var dest string
		var h inbox.Series
		var updated, done, replayed int64
		if err := scan(&dest, &h.N, &h.Status, &h.Reason, &h.Attempts, &h.LastError, &updated, &done, &replayed); err != nil {
			return err
		}
		h.UpdatedAt, h.DoneAt, h.ReplayedAt = fromMillis(updated), optMillis(done), fromMillis(replayed)
		out[dest] = append(out[dest], h)
		return nil
	})
}
