package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// dismissing is the store's inbox.DismissStore, which inbox.Dismisser,
// embedded in Store, dismisses through: the rows are selected as a
// replay's are, and each batch is taken in one transaction bounded by the
// busy timeout, which locks the rows it reads, so that neither a
// dispatcher's settlement nor a delivery changes them under it.
type dismissing struct{ replaying }

// InDismissTx runs fn in one transaction bounded by the busy timeout, at
// the store's clock, rolled back when dryRun, as a replay's; it may run
// fn again (see Store.inTx).
func (d dismissing) InDismissTx(ctx context.Context, dryRun bool, fn func(inbox.DismissTx, time.Time) error) error {
	return d.inTx(ctx, dryRun, func(tx replayTx, now time.Time) error { return fn(dismissTx{tx}, now) })
}

// dismissTx is inbox.DismissTx in tx: it reads and locks the rows, and
// reads their pairs, as a replay does.
type dismissTx struct{ replayTx }

// DismissPairs makes each pair still parked dismissed.
func (t dismissTx) DismissPairs(pairs []inbox.Pair, now time.Time) (map[inbox.Pair]bool, error) {
	ids, dests := pairArrays(pairs)
	return t.changed("dismiss", len(pairs), `UPDATE deliveries d SET status = 'dismissed', updated_at = $3
		FROM unnest($1::text[], $2::text[]) AS v(id, dest)
		WHERE d.event_id = v.id AND d.destination = v.dest AND d.status = 'parked'
		RETURNING d.event_id, d.destination`, ids, dests, now.UnixMilli())
}

// dismissRowsSQL records the dismissal ($2 when, $3 who, $4 why) on the
// rows of the array $1: a parked row with no pair new or parked becomes
// dismissed, at $2; one still parked at a pair takes that pair's reason,
// as the mirror gives it. SET reads the row as it was.
const dismissRowsSQL = `UPDATE events e SET
		status = CASE WHEN e.status = 'parked' AND NOT EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = e.id AND d.status IN ('new', 'parked')) THEN 'dismissed' ELSE e.status END,
		reason = CASE WHEN e.status = 'parked' THEN coalesce((SELECT max(d.reason) FROM deliveries d
			WHERE d.event_id = e.id AND d.status = 'parked'), e.reason) ELSE e.reason END,
		updated_at = CASE WHEN e.status = 'parked' AND NOT EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = e.id AND d.status IN ('new', 'parked')) THEN $2 ELSE e.updated_at END,
		dismissed_at = $2, dismissed_by = $3, dismiss_note = $4
	WHERE e.id = ANY($1::text[])
	RETURNING e.id, e.status`

// DismissRows records d on the rows of ids and dismisses those left with
// nothing parked or new.
func (t dismissTx) DismissRows(ids []string, d inbox.Dismissal, now time.Time) (map[string]inbox.Status, error) {
	rows, err := t.tx.Query(t.ctx, dismissRowsSQL, ids, now.UnixMilli(), pgText(d.By), pgText(d.Note))
	if err != nil {
		return nil, fmt.Errorf("dismiss %d rows: %w", len(ids), err)
	}
	out := map[string]inbox.Status{}
	var id string
	var st inbox.Status
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error {
		out[id] = st
		return nil
	}); err != nil {
		return nil, fmt.Errorf("dismiss %d rows: %w", len(ids), err)
	}
	return out, nil
}
