package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"inbox/inbox"
	"inbox/sqlrow"
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
	return r.inTx(ctx, dryRun, func(tx replayTx, now time.Time) error { return fn(tx, now) })
}

// inTx is InReplayTx with the store's own transaction, which a dismiss
// runs in too.
func (r replaying) inTx(ctx context.Context, dryRun bool, fn func(replayTx, time.Time) error) error {
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
	w, args := dialect.WhereIDs(sel.IDs, sel.Filter)
	rows, err := r.s.read.QueryContext(ctx, `SELECT id FROM events`+w+` ORDER BY received_at, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(scan func(...any) error) (id string, err error) { return id, scan(&id) })
}

// Rows reads the rows of ids that f still selects, oldest first.
func (t replayTx) Rows(ids []string, f inbox.Filter) ([]inbox.Event, error) {
	// The rows are found by id, each then checked against f: CROSS JOIN
	// keeps the planner from walking an index f names (the received
	// times of a --since) through every row it holds, for each batch.
	w, args := dialect.Where(f)
	rows, err := t.tx.QueryContext(t.ctx, `SELECT `+eventColumns+` FROM events WHERE rowid IN (SELECT events.rowid
		FROM json_each(?) AS j CROSS JOIN events ON events.id = j.value`+w+`) ORDER BY received_at, id`,
		append([]any{jsonList(ids)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	out, err := collect(rows, func(scan func(...any) error) (inbox.Event, error) { return scanEvent(scan, false) })
	if err != nil {
		return nil, fmt.Errorf("read the rows: %w", err)
	}
	return out, nil
}

// Pairs reads the pairs of the rows of ids.
func (t replayTx) Pairs(ids []string) (map[string][]inbox.Pairing, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT event_id, destination, status, coalesce(reason, '') FROM deliveries
		WHERE event_id IN (SELECT value FROM json_each(?)) ORDER BY event_id, destination`, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("read the rows' destinations: %w", err)
	}
	out := map[string][]inbox.Pairing{}
	err = each(rows, func(scan func(...any) error) error {
		var id string
		var p inbox.Pairing
		err := scan(&id, &p.Destination, &p.Status, &p.Reason)
		out[id] = append(out[id], p)
		return err
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

// KeepSeries keeps the series of each pair still of the status read in
// delivery_history.
func (t replayTx) KeepSeries(pairs []inbox.ReplayPair, now time.Time) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO delivery_history (event_id, destination, series, status, reason,
			attempts, last_error, updated_at, done_at, replayed_at)
		SELECT d.event_id, d.destination, 1 + coalesce((SELECT max(h.series) FROM delivery_history h
				WHERE h.event_id = d.event_id AND h.destination = d.destination), 0),
			d.status, d.reason, d.attempts, d.last_error, d.updated_at, d.done_at, ?2
		FROM `+replaySet+` AS v JOIN deliveries d ON d.event_id = v.id AND d.destination = v.dest AND d.status = v.status
		WHERE d.status IN ('done', 'parked', 'dismissed')`, replayValues(pairs), millis(now))
	if err != nil {
		return fmt.Errorf("keep the series of %d pairs: %w", len(pairs), err)
	}
	return nil
}

// ResetPairs makes each pair still of the status read new again, due at
// its time.
func (t replayTx) ResetPairs(pairs []inbox.ReplayPair, now time.Time) (map[inbox.Pair]bool, error) {
	return t.changed("reset", len(pairs), `UPDATE deliveries SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = v.due, lease_owner = NULL, lease_until = NULL, last_error = NULL,
			done_at = NULL, updated_at = ?2
		FROM `+replaySet+` AS v
		WHERE deliveries.event_id = v.id AND deliveries.destination = v.dest AND deliveries.status = v.status
		AND deliveries.status IN ('done', 'parked', 'dismissed')
		RETURNING deliveries.event_id, deliveries.destination`, replayValues(pairs), millis(now))
}

// AddPairs makes each pair new, due at its time, where its row was
// handed on and has no pair for the destination yet.
func (t replayTx) AddPairs(pairs []inbox.ReplayPair, now time.Time) (map[inbox.Pair]bool, error) {
	return t.changed("add", len(pairs), sqlrow.AddPairs(replaySet+` AS v`, "?2"), replayValues(pairs), millis(now))
}

// changed runs stmt, which does what to n pairs and returns those it
// changed (id, destination).
func (t replayTx) changed(what string, n int, stmt string, args ...any) (map[inbox.Pair]bool, error) {
	got := map[inbox.Pair]bool{}
	rows, err := t.tx.QueryContext(t.ctx, stmt, args...)
	if err == nil {
		err = each(rows, func(scan func(...any) error) error {
			var p inbox.Pair
			err := scan(&p.ID, &p.Destination)
			got[p] = true
			return err
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
	_, err := t.tx.ExecContext(t.ctx, `UPDATE events SET status = 'new', reason = NULL, done_at = NULL, last_error = NULL,
			dismissed_at = NULL, dismissed_by = NULL, dismiss_note = NULL,
			updated_at = CASE WHEN status <> 'new' THEN ?2 ELSE updated_at END
		WHERE id IN (SELECT value FROM json_each(?1))`, jsonList(ids), millis(now))
	if err != nil {
		return fmt.Errorf("renew %d rows: %w", len(ids), err)
	}
	return nil
}

// Reroute makes the rows of ids that are done (or parked by the
// dispatcher, or dismissed so) with no pair new and not routed.
func (t replayTx) Reroute(ids []string, now time.Time) ([]string, error) {
	rows, err := t.tx.QueryContext(t.ctx, `UPDATE events SET status = 'new', reason = NULL, `+sqlrow.Fresh+`, updated_at = ?2
		WHERE id IN (SELECT value FROM json_each(?1))
		AND (status = 'done' OR ((status = 'parked' OR status = 'dismissed') AND reason IN ('handler_failed', 'handler_rejected', 'too_large_for_destination')))
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
		err := scan(&dest, &h.N, &h.Status, &h.Reason, &h.Attempts, &h.LastError, sqlrow.Time{P: &h.UpdatedAt},
			sqlrow.Time{P: &h.DoneAt, Unset: true}, sqlrow.Time{P: &h.ReplayedAt})
		out[dest] = append(out[dest], h)
		return err
	})
}
