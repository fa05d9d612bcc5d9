package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"inbox/inbox"
)

// Bounds on one reprocess transaction, so the write lock is never held long
// enough to make the receiver answer 503. Whole jobs are added to a batch
// until it holds reprocessBatch rows or reprocessBatchBytes of bodies: the
// bodies are read before the transaction, but changing a row's status or
// key makes SQLite write the whole row again, body included.
const (
	reprocessBatch      = 100
	reprocessBatchBytes = 8 << 20
)

// Reprocess classifies the stored bodies of the selected parked rows again
// under their source's rules, with each row's recorded delivery timestamp
// (and, for a source other than DefaultSource, its recorded key and
// event), and applies the
// result the way a delivery would land, without ever dropping a body.
//
// The rows of one job are taken together, oldest first, and the job's own
// row (keyed by the job_id) before the others. A job row that is now
// storable becomes new where it is. A storable row beside it is then folded
// into the job's new or done row when that holds the same event and status
// (its deliveries added, the row removed), and otherwise stays parked
// conflict. When the job has no row the first storable row becomes it; when
// the job's row is parked and still not storable, the first storable row
// takes the job's key and the job row's body stays parked under its sha256
// key. The job row is classified again with its job even when it was not
// selected, as soon as a selected row of the job is storable. The rest stay
// parked with their reason as classified now.
//
// Bodies are read and classified through the read connections; each batch
// of whole jobs (at most reprocessBatch rows and reprocessBatchBytes of
// bodies) is then applied in one IMMEDIATE transaction, which skips any row
// that changed meanwhile. Because a job never spans two batches, a dry run
// (every transaction rolled back) counts what a real run would.
//
// It fails, changing nothing, when the selection is empty, or an id names
// no row, a row that is not parked, or a row of a source rules does not
// name. When a batch fails it is rolled back
// and the report counts the batches before it.
func (s *Store) Reprocess(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules, dryRun bool) (inbox.ReprocessReport, error) {
	rep := inbox.ReprocessReport{Parked: map[inbox.Reason]int{}, DryRun: dryRun}
	if s.write == nil {
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
// from events e, joined with its parked job row j if it has one. The job
// row's size counts, conservatively, with each of the job's rows: it may be
// classified along with them.
const selectColumns = `SELECT e.id, COALESCE(e.job_id, e.id), e.size + COALESCE(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id != e.id AND j.status = 'parked'`

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
	if len(sel.IDs) > 0 {
		return s.selectIDs(ctx, sel.UniqueIDs(), rules)
	}
	names := rules.Names()
	q := selectColumns + ` WHERE e.status = 'parked' AND e.source IN (?` + strings.Repeat(", ?", len(names)-1) + `)`
	args := make([]any, 0, len(names)+1)
	for _, n := range names {
		args = append(args, n)
	}
	if sel.Reason != "" {
		q, args = q+` AND e.reason = ?`, append(args, string(sel.Reason))
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY e.received_at, e.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	defer rows.Close()
	var out []inbox.Selected
	for rows.Next() {
		r, _, _, err := scanSelected(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("select parked rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// selectIDs checks that every id names a parked row of a source of rules
// and returns them, oldest first.
func (s *Store) selectIDs(ctx context.Context, ids []string, rules inbox.SourceRules) ([]inbox.Selected, error) {
	var out []inbox.Selected
	for _, id := range ids {
		r, status, source, err := scanSelected(s.read.QueryRowContext(ctx, selectColumns+` WHERE e.id = ?`, id).Scan)
		if errors.Is(err, sql.ErrNoRows) {
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

// planJobs reads and classifies the rows of jobs through the read
// connections, so that no body is read while the write lock is held.
func (s *Store) planJobs(ctx context.Context, jobs []inbox.JobRows, rules inbox.SourceRules) ([]inbox.JobPlan, error) {
	plans := make([]inbox.JobPlan, 0, len(jobs))
	for _, j := range jobs {
		p, err := inbox.PlanJob(j, rules, func(id string) (inbox.Event, bool, error) { return s.readParked(ctx, id) })
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// readParked reads the parked row id, body included; false when it is not
// there or not parked.
func (s *Store) readParked(ctx context.Context, id string) (inbox.Event, bool, error) {
	row := s.read.QueryRowContext(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = ? AND status = 'parked'`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return inbox.Event{}, false, nil
	}
	if err != nil {
		return inbox.Event{}, false, fmt.Errorf("read %s: %w", id, err)
	}
	return e, true, nil
}

// applyJobs applies plans in one IMMEDIATE transaction, rolled back when
// dryRun, and returns what it did.
func (s *Store) applyJobs(ctx context.Context, plans []inbox.JobPlan, dryRun bool) (inbox.ReprocessReport, error) {
	rep := inbox.ReprocessReport{Parked: map[inbox.Reason]int{}}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return rep, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	now := millis(s.now())
	for _, p := range plans {
		if err := applyJob(ctx, tx, p, now, &rep); err != nil {
			return inbox.ReprocessReport{}, err
		}
	}
	if !dryRun {
		if err := tx.Commit(); err != nil {
			return inbox.ReprocessReport{}, fmt.Errorf("commit: %w", err)
		}
	}
	return rep, nil
}

// applyJob applies one job's plan as inbox.JobPlan.Apply decides, with
// the statements of reprocessTx.
func applyJob(ctx context.Context, tx *sql.Tx, p inbox.JobPlan, now int64, rep *inbox.ReprocessReport) error {
	var current *inbox.Event
	row, err := readCurrent(ctx, tx, p.Job)
	if err == nil {
		current = &row
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read %s: %w", p.Job, err)
	}
	return p.Apply(ctx, reprocessTx{tx: tx, now: now}, current, rep)
}

// reprocessTx is inbox.ReprocessTx in tx, at now. Every statement names the
// row's id, its status parked and the sha256 it was classified by, so a
// row that changed since it was read is left alone (false).
type reprocessTx struct {
	tx  *sql.Tx
	now int64
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked and holds the body it was classified by.
const unchanged = ` AND status = 'parked' AND sha256 = ?`

// changedRows reports whether res touched a row.
func changedRows(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n == 1, err
}

// MakeNew makes the parked row r the job's new row, keyed by jobID, queued
// afresh for the dispatcher: no attempts, no lease, no error. Its body, size
// and sha256 stay as they are: only the columns classification decides
// change.
func (t reprocessTx) MakeNew(ctx context.Context, r inbox.Reclassified, jobID string) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE events SET id = ?, status = 'new', reason = NULL,
		event = ?, job_status = ?, result_url = NULL, updated_at = ?,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL
		WHERE id = ?`+unchanged,
		jobID, nullable(r.Delivery.Event), nullable(r.Delivery.JobStatus), t.now, r.ID, r.SHA256)
	if err != nil {
		return false, fmt.Errorf("make %s new as %s: %w", r.ID, jobID, err)
	}
	return changedRows(res)
}

// Park keeps r parked with reason; false when r changed meanwhile. An
// unchanged reason is only checked: an update would write the whole row.
func (t reprocessTx) Park(ctx context.Context, r inbox.Reclassified, reason inbox.Reason) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `UPDATE events SET reason = ?, updated_at = ?
		WHERE id = ? AND reason != ?`+unchanged, string(reason), t.now, r.ID, string(reason), r.SHA256)
	if err != nil {
		return false, fmt.Errorf("re-park %s as %s: %w", r.ID, reason, err)
	}
	if ok, err := changedRows(res); ok || err != nil {
		return ok, err
	}
	return t.StillParked(ctx, r)
}

// StillParked reports whether r is still parked with the body it was
// classified by.
func (t reprocessTx) StillParked(ctx context.Context, r inbox.Reclassified) (bool, error) {
	var one int
	err := t.tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ?`+unchanged, r.ID, r.SHA256).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
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
func foldRow(ctx context.Context, tx *sql.Tx, from, into, sha string) (bool, error) {
	var n, lastSeen int64
	err := tx.QueryRowContext(ctx, `SELECT deliveries, last_seen_at FROM events WHERE id = ?`+unchanged, from, sha).
		Scan(&n, &lastSeen)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id = ?`, from); err != nil {
		return false, err
	}
	if _, err := repeat(ctx, textExec{tx, repeatSQL}, into, n, lastSeen); err != nil {
		return false, err
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
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if _, err := t.tx.ExecContext(ctx, `UPDATE events SET id = ? WHERE id = ?`+unchanged, key, jobID, sha); err != nil {
		return fmt.Errorf("move %s aside as %s: %w", jobID, key, err)
	}
	return nil
}
