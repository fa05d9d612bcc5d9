package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"inbox/inbox"
	"inbox/sqlrow"
)

// reprocessing is the store's inbox.ReprocessStore, which
// inbox.Reprocessor, embedded in Store, reprocesses through: bodies are
// read through the read connections, and each batch is applied in one
// IMMEDIATE transaction of the write connection.
type reprocessing struct{ s *Store }

func (r reprocessing) ReadOnly() bool { return r.s.write == nil }

// StoredText returns s: a SQLite text column keeps any bytes.
func (reprocessing) StoredText(s string) string { return s }

// selectColumns are what inbox.ScanSelected reads, from events e joined
// with its parked job row j if it has one. The job row's size counts,
// conservatively, with each of the job's rows: it may be classified along
// with them.
const selectColumns = `SELECT e.id, COALESCE(e.job_id, e.id), e.size + COALESCE(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id != e.id AND j.status = 'parked'`

// ParkedRows returns the parked rows of sources, with reason (their own or
// a pair's) when given, oldest first.
func (r reprocessing) ParkedRows(ctx context.Context, sources []string, reason inbox.Reason) ([]inbox.Selected, error) {
	q := selectColumns + ` WHERE e.status = 'parked' AND e.source IN (?` + strings.Repeat(", ?", len(sources)-1) + `)`
	args := make([]any, 0, len(sources)+1)
	for _, n := range sources {
		args = append(args, n)
	}
	if reason != "" {
		// Parked with it itself, or at any of its destinations.
		w := dialect.Query()
		q, args = q+` AND `+w.ParkedWith("e", reason), append(args, w.Args()...)
	}
	rows, err := r.s.read.QueryContext(ctx, q+` ORDER BY e.received_at, e.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	defer rows.Close()
	var out []inbox.Selected
	for rows.Next() {
		sr, _, _, err := inbox.ScanSelected(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("select parked rows: %w", err)
		}
		out = append(out, sr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// SelectedRow reads the row id as a selection sees it.
func (r reprocessing) SelectedRow(ctx context.Context, id string) (inbox.Selected, inbox.Status, string, error) {
	sr, status, source, err := inbox.ScanSelected(r.s.read.QueryRowContext(ctx, selectColumns+` WHERE e.id = ?`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return sr, "", "", nil
	}
	return sr, status, source, err
}

// ReadParked reads the parked row id, body included, through the read
// connections; false when it is not there or not parked.
func (r reprocessing) ReadParked(ctx context.Context, id string) (inbox.Event, bool, error) {
	e, err := scanEvent(r.s.read.QueryRowContext(ctx, `SELECT `+bodyColumns+` FROM events WHERE id = ? AND (status = 'parked' OR status = 'dismissed')`, id).Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return inbox.Event{}, false, nil
	}
	return e, err == nil, err
}

// InReprocessTx runs fn in one IMMEDIATE transaction of the write
// connection (its DSN starts every transaction so), rolled back when
// dryRun.
func (r reprocessing) InReprocessTx(ctx context.Context, dryRun bool, fn func(inbox.ReprocessTx) error) error {
	tx, err := r.s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(reprocessTx{tx: tx, now: millis(r.s.now())}); err != nil {
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

// reprocessTx is inbox.ReprocessTx in tx, at now.
type reprocessTx struct {
	tx  *sql.Tx
	now int64
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked (or dismissed) and holds the body it was classified by.
const unchanged = ` AND (status = 'parked' OR status = 'dismissed') AND sha256 = ?`

// changedRows reports whether res touched a row.
func changedRows(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n == 1, err
}

// Current reads the row holding id; nil when none does. The write lock the
// transaction holds keeps it as read.
func (t reprocessTx) Current(ctx context.Context, id string) (*inbox.Event, error) {
	return sqlrow.ReadCurrent(ctx, queryOn(t.tx), currentSQL, id)
}

// MakeNew makes the parked row id the job's new row under key. Only the
// columns classification decides change: its body, size and sha256 stay.
func (t reprocessTx) MakeNew(ctx context.Context, id, sha, key string, d inbox.Delivery) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE events SET id = ?, status = 'new', reason = NULL,
		event = ?, job_status = ?, result_url = NULL, updated_at = ?,
		`+sqlrow.Fresh+` WHERE id = ?`+unchanged,
		key, nullable(d.Event), nullable(d.JobStatus), t.now, id, sha)
	if err != nil {
		return false, err
	}
	return changedRows(res)
}

// Park sets the parked row's reason, and parks it again when dismissed.
// An unchanged reason of a parked row is left alone: an update would
// write the whole row.
func (t reprocessTx) Park(ctx context.Context, id, sha string, reason inbox.Reason) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE events SET status = 'parked', reason = ?, updated_at = ?,
		dismissed_at = NULL, dismissed_by = NULL, dismiss_note = NULL
		WHERE id = ? AND (reason != ? OR status = 'dismissed')`+unchanged, string(reason), t.now, id, string(reason), sha)
	if err != nil {
		return false, err
	}
	return changedRows(res)
}

// StillParked reports whether id is still parked holding sha.
func (t reprocessTx) StillParked(ctx context.Context, id, sha string) (bool, error) {
	var one int
	err := t.tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ?`+unchanged, id, sha).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Fold counts the deliveries of the parked row from (holding sha) on the
// row into and deletes from; false when from is not there.
func (t reprocessTx) Fold(ctx context.Context, from, into, sha string) (bool, error) {
	var n, lastSeen int64
	err := t.tx.QueryRowContext(ctx, `SELECT deliveries, last_seen_at FROM events WHERE id = ?`+unchanged, from, sha).
		Scan(&n, &lastSeen)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM events WHERE id = ?`, from); err != nil {
		return false, err
	}
	if _, err := repeat(ctx, textExec{t.tx, repeatSQL}, into, n, lastSeen); err != nil {
		return false, err
	}
	return true, nil
}

// Rekey moves the parked row from, holding sha, to the id to.
func (t reprocessTx) Rekey(ctx context.Context, from, to, sha string) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE events SET id = ? WHERE id = ?`+unchanged, to, from, sha)
	return err
}
