package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inbox/inbox"
	"inbox/sqlrow"
)

// reprocessing is the store's inbox.ReprocessStore, which
// inbox.Reprocessor, embedded in Store, reprocesses through: every
// statement is bounded by the busy timeout, each batch's transaction too;
// the transaction locks the job's row before it changes the job's rows.
type reprocessing struct{ s *Store }

func (r reprocessing) ReadOnly() bool { return r.s.readOnly }

// StoredText returns s as Put stores it in a text column (pgText).
func (reprocessing) StoredText(s string) string { return pgText(s) }

// selectColumns are what inbox.ScanSelected reads, from events e joined
// with its parked job row j if it has one.
const selectColumns = `SELECT e.id, coalesce(e.job_id, e.id), e.size + coalesce(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id <> e.id AND j.status = 'parked'`

// ParkedRows returns the parked rows of sources, with reason (their own or
// a pair's) when given, oldest first.
func (r reprocessing) ParkedRows(ctx context.Context, sources []string, reason inbox.Reason) ([]inbox.Selected, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	w := dialect.Query()
	q := selectColumns + ` WHERE e.status = 'parked' AND e.source = ANY(` + w.Arg(sources) + `)`
	if reason != "" {
		// Parked with it itself, or at any of its destinations.
		q += ` AND ` + w.ParkedWith("e", reason)
	}
	rows, err := r.s.pool.Query(ctx, q+` ORDER BY e.received_at, e.id`, w.Args()...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Selected, error) {
		sr, _, _, err := inbox.ScanSelected(r.Scan)
		return sr, err
	})
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// SelectedRow reads the row id as a selection sees it.
func (r reprocessing) SelectedRow(ctx context.Context, id string) (inbox.Selected, inbox.Status, string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	sr, status, source, err := inbox.ScanSelected(r.s.pool.QueryRow(ctx, selectColumns+` WHERE e.id = $1`, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return sr, "", "", nil
	}
	return sr, status, source, err
}

// ReadParked reads the parked row id, body included, outside any
// transaction; false when it is not there or not parked.
func (r reprocessing) ReadParked(ctx context.Context, id string) (inbox.Event, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	e, err := scanEvent(r.s.pool.QueryRow(ctx, `SELECT `+bodyColumns+` FROM events WHERE id = $1 AND status IN ('parked', 'dismissed')`, id).Scan, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Event{}, false, nil
	}
	return e, err == nil, err
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// InReprocessTx runs fn in one transaction bounded by the busy timeout,
// at the store's clock, rolled back when dryRun. A key that another
// replica's delivery took meanwhile (a unique violation) makes it run
// again: every statement checks the row it changes, so a new run skips
// what changed.
func (r reprocessing) InReprocessTx(ctx context.Context, dryRun bool, fn func(inbox.ReprocessTx) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.s.busy)
	defer cancel()
	err := r.s.inTx(ctx, func(tx pgx.Tx) error {
		now, err := r.s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		if err := fn(reprocessTx{tx: tx, now: now}); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
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

// reprocessTx is inbox.ReprocessTx in tx, at now.
type reprocessTx struct {
	tx  pgx.Tx
	now int64
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked (or dismissed) and holds the body it was classified by ($2).
const unchanged = ` AND status IN ('parked', 'dismissed') AND sha256 = $2`

// Current locks and reads the row holding id; nil when none does.
func (t reprocessTx) Current(ctx context.Context, id string) (*inbox.Event, error) {
	return sqlrow.ReadCurrent(ctx, queryOn(t.tx), `SELECT `+sqlrow.Current.List(true)+` FROM events WHERE id = $1 FOR UPDATE`, id)
}

// MakeNew makes the parked row id the job's new row under key.
func (t reprocessTx) MakeNew(ctx context.Context, id, sha, key string, d inbox.Delivery) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE events SET id = $3, status = 'new', reason = NULL,
		event = $4, job_status = $5, result_url = NULL, updated_at = $6,
		`+sqlrow.Fresh+` WHERE id = $1`+unchanged,
		id, sha, key, nullable(d.Event), nullable(d.JobStatus), t.now)
	return tag.RowsAffected() == 1, err
}

// Park sets the parked row's reason, and parks it again when dismissed;
// an unchanged reason of a parked row is left alone.
func (t reprocessTx) Park(ctx context.Context, id, sha string, reason inbox.Reason) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE events SET status = 'parked', reason = $3, updated_at = $4,
		dismissed_at = NULL, dismissed_by = NULL, dismiss_note = NULL
		WHERE id = $1 AND (reason <> $3 OR status = 'dismissed')`+unchanged, id, sha, string(reason), t.now)
	return tag.RowsAffected() == 1, err
}

// StillParked reports whether id is still parked holding sha, and locks
// it.
func (t reprocessTx) StillParked(ctx context.Context, id, sha string) (bool, error) {
	var one int
	err := t.tx.QueryRow(ctx, `SELECT 1 FROM events WHERE id = $1`+unchanged+` FOR UPDATE`, id, sha).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Fold counts the deliveries of the parked row from (holding sha) on the
// row into and deletes from; false when from is not there. A row into
// gone meanwhile makes the transaction run again.
func (t reprocessTx) Fold(ctx context.Context, from, into, sha string) (bool, error) {
	var n, lastSeen int64
	err := t.tx.QueryRow(ctx, `DELETE FROM events WHERE id = $1`+unchanged+` RETURNING deliveries, last_seen_at`, from, sha).
		Scan(&n, &lastSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tag, err := t.tx.Exec(ctx, `UPDATE events SET deliveries = deliveries + $2,
		last_seen_at = greatest(last_seen_at, $3) WHERE id = $1`, into, n, lastSeen)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() != 1 {
		return false, errRetry
	}
	return true, nil
}

// Rekey moves the parked row from, holding sha, to the id to.
func (t reprocessTx) Rekey(ctx context.Context, from, to, sha string) error {
	_, err := t.tx.Exec(ctx, `UPDATE events SET id = $3 WHERE id = $1`+unchanged, from, sha, to)
	return err
}
