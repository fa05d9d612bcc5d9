package sqlite

import (
	"context"
	"fmt"
	"time"

	"inbox/inbox"
)

// dismissing is the store's inbox.DismissStore, which inbox.Dismisser,
// embedded in Store, dismisses through: the rows are selected as a
// replay's are, and each batch is taken in one IMMEDIATE transaction of
// the write connection, which holds the database, so what a batch reads
// stays as read until it commits.
type dismissing struct{ replaying }

// InDismissTx runs fn in one IMMEDIATE transaction of the write
// connection, rolled back when dryRun, at the store's clock, as a replay's.
func (d dismissing) InDismissTx(ctx context.Context, dryRun bool, fn func(inbox.DismissTx, time.Time) error) error {
	return d.inTx(ctx, dryRun, func(tx replayTx, now time.Time) error { return fn(dismissTx{tx}, now) })
}

// dismissTx is inbox.DismissTx in tx: it reads the rows and their pairs
// as a replay does.
type dismissTx struct{ replayTx }

// DismissPairs makes each pair still parked dismissed.
func (t dismissTx) DismissPairs(pairs []inbox.Pair, now time.Time) (map[inbox.Pair]bool, error) {
	return t.changed("dismiss", len(pairs), `UPDATE deliveries SET status = 'dismissed', updated_at = ?2
		FROM (SELECT value ->> 0 AS id, value ->> 1 AS dest FROM json_each(?1)) AS v
		WHERE deliveries.event_id = v.id AND deliveries.destination = v.dest AND deliveries.status = 'parked'
		RETURNING deliveries.event_id, deliveries.destination`, pairList(pairs), millis(now))
}

// dismissRowsSQL records the dismissal (?2 when, ?3 who, ?4 why) on the
// rows ?1 lists (a JSON array of ids): a parked row with no pair new or
// parked becomes dismissed, at ?2; one still parked at a pair takes that
// pair's reason, as the mirror gives it. SET reads the row as it was.
const dismissRowsSQL = `UPDATE events SET
		status = CASE WHEN status = 'parked' AND NOT EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = events.id AND (d.status = 'new' OR d.status = 'parked')) THEN 'dismissed' ELSE status END,
		reason = CASE WHEN status = 'parked' THEN coalesce((SELECT max(d.reason) FROM deliveries d
			WHERE d.event_id = events.id AND d.status = 'parked'), reason) ELSE reason END,
		updated_at = CASE WHEN status = 'parked' AND NOT EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = events.id AND (d.status = 'new' OR d.status = 'parked')) THEN ?2 ELSE updated_at END,
		dismissed_at = ?2, dismissed_by = ?3, dismiss_note = ?4
	WHERE id IN (SELECT value FROM json_each(?1))
	RETURNING id, status`

// DismissRows records d on the rows of ids and dismisses those left with
// nothing parked or new.
func (t dismissTx) DismissRows(ids []string, d inbox.Dismissal, now time.Time) (map[string]inbox.Status, error) {
	rows, err := t.tx.QueryContext(t.ctx, dismissRowsSQL, jsonList(ids), millis(now), d.By, d.Note)
	if err != nil {
		return nil, fmt.Errorf("dismiss %d rows: %w", len(ids), err)
	}
	out := map[string]inbox.Status{}
	err = each(rows, func(scan func(...any) error) error {
		var id string
		var st inbox.Status
		err := scan(&id, &st)
		out[id] = st
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dismiss %d rows: %w", len(ids), err)
	}
	return out, nil
}
