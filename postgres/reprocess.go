package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inbox/inbox"
)

// Bounds on one reprocess transaction, as on the SQLite store: whole jobs
// are added to a batch until it holds reprocessBatch rows or
// reprocessBatchBytes of bodies.
const (
	reprocessBatch      = 100
	reprocessBatchBytes = 8 << 20
)

// Reprocess classifies the stored bodies of the selected parked rows again
// under their source's rules and applies the result the way a delivery
// would land, without ever dropping a body, as the SQLite store's
// Reprocess does (read its documentation for the rules).
//
// Every statement is bounded by the busy timeout, each batch's transaction
// too. Bodies are read and classified outside any transaction; each batch of
// whole jobs is then applied in one transaction that locks the job's row
// and skips any row that changed meanwhile (another replica's delivery, a
// purge), counting it as changed. A dry run rolls every batch back.
//
// It fails, changing nothing, when the selection is empty, or an id names
// no row, a row that is not parked, or a row of a source rules does not
// name. When a batch fails it is rolled back and the report counts the
// batches before it.
func (s *Store) Reprocess(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules, dryRun bool) (inbox.ReprocessReport, error) {
	rep := inbox.ReprocessReport{Parked: map[inbox.Reason]int{}, DryRun: dryRun}
	if s.readOnly {
		return rep, errors.New("reprocess: store is read-only")
	}
	rows, err := s.selectParked(ctx, sel, rules)
	if err != nil {
		return rep, fmt.Errorf("reprocess: %w", err)
	}
	for _, batch := range inbox.Batches(rows, reprocessBatch, reprocessBatchBytes) {
		plans, err := s.planJobs(ctx, batch, rules)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		done, err := s.applyJobs(ctx, plans, dryRun)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		rep.Add(done)
	}
	return rep, nil
}

// selectColumns reads an inbox.Selected, and the row's status and source,
// from events e, joined with its parked job row j if it has one.
const selectColumns = `SELECT e.id, coalesce(e.job_id, e.id), e.size + coalesce(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id <> e.id AND j.status = 'parked'`

// scanSelected scans a row of selectColumns.
func scanSelected(scan func(...any) error) (r inbox.Selected, status inbox.Status, source string, err error) {
	var received int64
	err = scan(&r.ID, &r.Job, &r.Size, &received, &status, &source)
	r.ReceivedAt = fromMillis(received)
	return r, status, source, err
}

// selectParked returns the selected parked rows of the sources of rules,
// oldest first.
func (s *Store) selectParked(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules) ([]inbox.Selected, error) {
	if err := sel.Check(rules); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	if len(sel.IDs) > 0 {
		return s.selectIDs(ctx, sel.UniqueIDs(), rules)
	}
	q, args := selectColumns+` WHERE e.status = 'parked' AND e.source = ANY($1)`, []any{rules.Names()}
	if sel.Reason != "" {
		q, args = q+` AND e.reason = $2`, append(args, string(sel.Reason))
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY e.received_at, e.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Selected, error) {
		sr, _, _, err := scanSelected(r.Scan)
		return sr, err
	})
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// selectIDs checks that every id names a parked row of a source of rules
// and returns them, oldest first.
func (s *Store) selectIDs(ctx context.Context, ids []string, rules inbox.SourceRules) ([]inbox.Selected, error) {
	var out []inbox.Selected
	for _, id := range ids {
		r, status, source, err := scanSelected(s.pool.QueryRow(ctx, selectColumns+` WHERE e.id = $1`, id).Scan)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%s: %w", id, inbox.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		if err := rules.CheckSelected(id, status, source); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	inbox.SortSelected(out)
	return out, nil
}

// planJobs reads and classifies the rows of jobs outside any transaction.
// The columns classification fills are made text PostgreSQL takes, as Put
// stores them.
func (s *Store) planJobs(ctx context.Context, jobs []inbox.JobRows, rules inbox.SourceRules) ([]inbox.JobPlan, error) {
	plans := make([]inbox.JobPlan, 0, len(jobs))
	for _, j := range jobs {
		p, err := inbox.PlanJob(j, rules, func(id string) (inbox.Event, bool, error) { return s.readParked(ctx, id) })
		if err != nil {
			return nil, err
		}
		for i := range p.Rows {
			d := &p.Rows[i].Delivery
			d.JobID, d.Event, d.JobStatus, d.ResultURL = pgText(d.JobID), pgText(d.Event), pgText(d.JobStatus), pgText(d.ResultURL)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// readParked reads the parked row id, body included; false when it is not
// there or not parked.
func (s *Store) readParked(ctx context.Context, id string) (inbox.Event, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	row := s.pool.QueryRow(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = $1 AND status = 'parked'`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Event{}, false, nil
	}
	if err != nil {
		return inbox.Event{}, false, fmt.Errorf("read %s: %w", id, err)
	}
	return e, true, nil
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// applyJobs applies plans in one transaction, rolled back when dryRun, and
// returns what it did. A key that another replica's delivery took
// meanwhile (a unique violation) makes it run again: every statement
// checks the row it changes, so a new run skips what changed.
func (s *Store) applyJobs(ctx context.Context, plans []inbox.JobPlan, dryRun bool) (inbox.ReprocessReport, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	var rep inbox.ReprocessReport
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rep = inbox.ReprocessReport{Parked: map[inbox.Reason]int{}}
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		for _, p := range plans {
			if err := applyJob(ctx, tx, p, now, &rep); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "23505" {
					return fmt.Errorf("%w: %w", errRetry, err)
				}
				return err
			}
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return rep, nil
	}
	if err != nil {
		return inbox.ReprocessReport{}, err
	}
	return rep, nil
}

// readCurrent locks and reads the row holding id; pgx.ErrNoRows when there
// is none.
func readCurrent(ctx context.Context, tx pgx.Tx, id string) (inbox.Event, error) {
	var r inbox.Event
	err := tx.QueryRow(ctx, `SELECT status, coalesce(reason, ''), sha256, coalesce(event, ''),
		coalesce(job_status, ''), source, response FROM events WHERE id = $1 FOR UPDATE`, id).
		Scan(&r.Status, &r.Reason, &r.SHA256, &r.Event, &r.JobStatus, &r.Source, &r.Response)
	return r, err
}

// applyJob applies one job's plan as inbox.JobPlan.Apply decides, with
// the statements of reprocessTx.
func applyJob(ctx context.Context, tx pgx.Tx, p inbox.JobPlan, now int64, rep *inbox.ReprocessReport) error {
	var current *inbox.Event
	row, err := readCurrent(ctx, tx, p.Job)
	if err == nil {
		current = &row
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read %s: %w", p.Job, err)
	}
	return p.Apply(ctx, reprocessTx{tx: tx, now: now}, current, rep)
}

// reprocessTx is inbox.ReprocessTx in tx, at now. Every statement names the
// row's id, its status parked and the sha256 it was classified by, so a
// row that changed since it was read is left alone (false).
type reprocessTx struct {
	tx  pgx.Tx
	now int64
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked and holds the body it was classified by ($2).
const unchanged = ` AND status = 'parked' AND sha256 = $2`

// MakeNew makes the parked row r the job's new row, keyed by jobID, queued
// afresh for the dispatcher: no attempts, no lease, no error.
func (t reprocessTx) MakeNew(ctx context.Context, r inbox.Reclassified, jobID string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE events SET id = $3, status = 'new', reason = NULL,
		event = $4, job_status = $5, result_url = NULL, updated_at = $6,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL
		WHERE id = $1`+unchanged,
		r.ID, r.SHA256, jobID, nullable(r.Delivery.Event), nullable(r.Delivery.JobStatus), t.now)
	if err != nil {
		return false, fmt.Errorf("make %s new as %s: %w", r.ID, jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Park keeps r parked with reason; false when r changed meanwhile. An
// unchanged reason is only checked.
func (t reprocessTx) Park(ctx context.Context, r inbox.Reclassified, reason inbox.Reason) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE events SET reason = $3, updated_at = $4
		WHERE id = $1 AND reason <> $3`+unchanged, r.ID, r.SHA256, string(reason), t.now)
	if err != nil {
		return false, fmt.Errorf("re-park %s as %s: %w", r.ID, reason, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	return t.StillParked(ctx, r)
}

// StillParked reports whether r is still parked with the body it was
// classified by, and locks it.
func (t reprocessTx) StillParked(ctx context.Context, r inbox.Reclassified) (bool, error) {
	var one int
	err := t.tx.QueryRow(ctx, `SELECT 1 FROM events WHERE id = $1`+unchanged+` FOR UPDATE`, r.ID, r.SHA256).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r.ID, err)
	}
	return true, nil
}

// Fold adds the deliveries of the parked row r to the row at into, which
// holds the same event, and removes r.
func (t reprocessTx) Fold(ctx context.Context, r inbox.Reclassified, into string) (bool, error) {
	ok, err := foldRow(ctx, t.tx, r.ID, into, r.SHA256)
	if err != nil {
		return false, fmt.Errorf("fold %s into %s: %w", r.ID, into, err)
	}
	return ok, nil
}

// foldRow counts the deliveries of the parked row from (holding sha) on
// the row into and deletes from; false when from is not there.
func foldRow(ctx context.Context, tx pgx.Tx, from, into, sha string) (bool, error) {
	var n, lastSeen int64
	err := tx.QueryRow(ctx, `DELETE FROM events WHERE id = $1`+unchanged+` RETURNING deliveries, last_seen_at`, from, sha).
		Scan(&n, &lastSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, `UPDATE events SET deliveries = deliveries + $2,
		last_seen_at = greatest(last_seen_at, $3) WHERE id = $1`, into, n, lastSeen)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() != 1 {
		return false, errRetry
	}
	return true, nil
}

// MoveAside re-keys the job's parked row jobID, holding sha, as key, so
// another row can take the job's key without its body being lost. When a
// row with key exists it holds the same bytes, and the job row's
// deliveries are counted on it instead.
func (t reprocessTx) MoveAside(ctx context.Context, jobID, key, sha string) error {
	if _, err := readCurrent(ctx, t.tx, key); err == nil {
		if _, err := foldRow(ctx, t.tx, jobID, key, sha); err != nil {
			return fmt.Errorf("fold %s into %s: %w", jobID, key, err)
		}
		return nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if _, err := t.tx.Exec(ctx, `UPDATE events SET id = $3 WHERE id = $1`+unchanged, jobID, sha, key); err != nil {
		return fmt.Errorf("move %s aside as %s: %w", jobID, key, err)
	}
	return nil
}
