package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	for _, batch := range batchJobs(groupJobs(rows)) {
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

// selectedRow is a parked row as the selection saw it.
type selectedRow struct {
	id         string
	job        string // the job_id, or the id when the row names no job
	size       int64  // its body's, plus its job row's when that is parked
	receivedAt int64
}

// selectColumns reads a selectedRow from events e, joined with its parked
// job row j if it has one. The job row's size counts, conservatively, with
// each of the job's rows: it may be classified along with them.
const selectColumns = `SELECT e.id, COALESCE(e.job_id, e.id), e.size + COALESCE(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id != e.id AND j.status = 'parked'`

// selectParked returns the selected parked rows of the sources of rules,
// oldest first.
func (s *Store) selectParked(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules) ([]selectedRow, error) {
	if len(sel.IDs) > 0 {
		return s.selectIDs(ctx, sel.IDs, rules)
	}
	if sel.Reason == "" && !sel.All {
		return nil, errors.New("no rows selected: name ids, a reason, or all")
	}
	names := rules.Names()
	if len(names) == 0 {
		return nil, errors.New("no source to classify rows of")
	}
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
	var out []selectedRow
	for rows.Next() {
		var r selectedRow
		var status, source string
		if err := rows.Scan(&r.id, &r.job, &r.size, &r.receivedAt, &status, &source); err != nil {
			return nil, fmt.Errorf("select parked rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// selectIDs checks that every id names a parked row and returns them, each
// once, oldest first: the order on the command line decides nothing.
func (s *Store) selectIDs(ctx context.Context, ids []string, rules inbox.SourceRules) ([]selectedRow, error) {
	seen := map[string]bool{}
	var out []selectedRow
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		var r selectedRow
		var status, source string
		err := s.read.QueryRowContext(ctx, selectColumns+` WHERE e.id = ?`, id).
			Scan(&r.id, &r.job, &r.size, &r.receivedAt, &status, &source)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%s: %w", id, inbox.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		if inbox.Status(status) != inbox.StatusParked {
			return nil, fmt.Errorf("%s is %s, not parked", id, status)
		}
		if _, ok := rules[source]; !ok {
			return nil, fmt.Errorf("%s is a row of source %s, which is not configured (give --config with its [[source]])", id, source)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b selectedRow) int {
		return cmp.Or(cmp.Compare(a.receivedAt, b.receivedAt), cmp.Compare(a.id, b.id))
	})
	return out, nil
}

// jobRows are the selected rows of one job, oldest first.
type jobRows struct {
	job  string
	ids  []string
	size int64
}

// groupJobs gathers rows by job, the jobs in the order of their oldest row.
func groupJobs(rows []selectedRow) []jobRows {
	var jobs []jobRows
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.job]
		if !ok {
			i = len(jobs)
			at[r.job] = i
			jobs = append(jobs, jobRows{job: r.job})
		}
		jobs[i].ids = append(jobs[i].ids, r.id)
		jobs[i].size += r.size
	}
	return jobs
}

// batchJobs fills batches with whole jobs; a job larger than a batch's
// bounds is a batch of its own.
func batchJobs(jobs []jobRows) [][]jobRows {
	var batches [][]jobRows
	var cur []jobRows
	var n int
	var size int64
	for _, j := range jobs {
		if len(cur) > 0 && (n+len(j.ids) > reprocessBatch || size+j.size > reprocessBatchBytes) {
			batches = append(batches, cur)
			cur, n, size = nil, 0, 0
		}
		cur = append(cur, j)
		n += len(j.ids)
		size += j.size
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// planned is a parked row read and classified again, without its body.
type planned struct {
	inbox.Event
	d        inbox.Delivery
	selected bool
}

// jobPlan is what reprocessing found for one job: its rows, the job's own
// row first, and how many selected rows were no longer parked when read.
type jobPlan struct {
	job     string
	rows    []planned
	changed int
}

// planJobs reads and classifies the rows of jobs through the read
// connections, so that no body is read while the write lock is held. A
// job's own parked row comes along, even when not selected, if another of
// its rows is now storable.
func (s *Store) planJobs(ctx context.Context, jobs []jobRows, rules inbox.SourceRules) ([]jobPlan, error) {
	plans := make([]jobPlan, 0, len(jobs))
	for _, j := range jobs {
		p := jobPlan{job: j.job}
		ownSelected, storable := false, false
		for _, id := range j.ids {
			r, err := s.readParked(ctx, id, rules)
			if errors.Is(err, sql.ErrNoRows) {
				p.changed++
				continue
			}
			if err != nil {
				return nil, err
			}
			r.selected = true
			storable = storable || r.d.Status == inbox.StatusNew
			if id == j.job {
				ownSelected = true
				p.rows = slices.Insert(p.rows, 0, r)
				continue
			}
			p.rows = append(p.rows, r)
		}
		if storable && !ownSelected {
			own, err := s.readParked(ctx, j.job, rules)
			if err == nil {
				p.rows = slices.Insert(p.rows, 0, own)
			} else if !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// readParked reads the parked row id and classifies its body again under
// its source's rules; sql.ErrNoRows when it is not there or not parked.
func (s *Store) readParked(ctx context.Context, id string, rules inbox.SourceRules) (planned, error) {
	row := s.read.QueryRowContext(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = ? AND status = 'parked'`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, sql.ErrNoRows) {
		return planned{}, err
	}
	if err != nil {
		return planned{}, fmt.Errorf("read %s: %w", id, err)
	}
	r, ok := rules[e.Source]
	if !ok {
		// A job row of an unconfigured source: left as it is.
		return planned{}, sql.ErrNoRows
	}
	d := inbox.Reclassify(e, r)
	e.Body, d.Body = nil, nil
	return planned{Event: e, d: d}, nil
}

// applyJobs applies plans in one IMMEDIATE transaction, rolled back when
// dryRun, and returns what it did.
func (s *Store) applyJobs(ctx context.Context, plans []jobPlan, dryRun bool) (inbox.ReprocessReport, error) {
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

// applyJob applies one job's plan, each row as inbox.ReprocessJob.Decide
// chooses. Every statement names the row's id, its status parked and the
// sha256 it was classified by, so a row that changed since it was read is
// left alone and counted as changed.
func applyJob(ctx context.Context, tx *sql.Tx, p jobPlan, now int64, rep *inbox.ReprocessReport) error {
	rep.Changed += p.changed
	job := inbox.ReprocessJob{Key: p.job}
	row, err := readCurrent(ctx, tx, p.job)
	if err == nil {
		job.Row = &row
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read %s: %w", p.job, err)
	}
	for _, r := range p.rows {
		if !r.selected {
			rep.JobRows++
		}
		dec, err := job.Decide(r.Event, r.d)
		if err != nil {
			return err
		}
		ok, err := apply(ctx, tx, &job, r, dec, now)
		if err != nil {
			return err
		}
		rep.Count(dec, ok)
		if ok {
			job = job.Applied(r.Event, r.d, dec)
		}
	}
	return nil
}

// apply runs dec's statements for r, a row of job; false when r, or the
// job's row it would land on, changed and it was left alone. For
// inbox.StepTakeOver it moves job's own row aside first, and updates job
// once it has.
func apply(ctx context.Context, tx *sql.Tx, job *inbox.ReprocessJob, r planned, dec inbox.Decision, now int64) (bool, error) {
	switch dec.Step {
	case inbox.StepChanged:
		return false, nil
	case inbox.StepPark:
		return stayParked(ctx, tx, r, dec.Reason, now)
	case inbox.StepFold:
		return fold(ctx, tx, r, job.Key)
	case inbox.StepTakeOver:
		if ok, err := stillParked(ctx, tx, r); !ok || err != nil {
			return ok, err
		}
		if err := moveAside(ctx, tx, job.Key, job.Own.Source, job.Own.SHA256); err != nil {
			return false, err
		}
		*job = job.MovedAside()
	}
	return makeNew(ctx, tx, r, job.Key, now)
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked and holds the body it was classified by.
const unchanged = ` AND status = 'parked' AND sha256 = ?`

// changedRows reports whether res touched a row.
func changedRows(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n == 1, err
}

// makeNew makes the parked row r the job's new row, keyed by jobID, queued
// afresh for the dispatcher: no attempts, no lease, no error. Its body, size
// and sha256 stay as they are: only the columns classification decides
// change.
func makeNew(ctx context.Context, tx *sql.Tx, r planned, jobID string, now int64) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE events SET id = ?, status = 'new', reason = NULL,
		event = ?, job_status = ?, result_url = NULL, updated_at = ?,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL
		WHERE id = ?`+unchanged,
		jobID, nullable(r.d.Event), nullable(r.d.JobStatus), now, r.ID, r.SHA256)
	if err != nil {
		return false, fmt.Errorf("make %s new as %s: %w", r.ID, jobID, err)
	}
	return changedRows(res)
}

// stayParked keeps r parked with reason; false when r changed meanwhile.
// An unchanged reason is only checked: an update would write the whole row.
func stayParked(ctx context.Context, tx *sql.Tx, r planned, reason inbox.Reason, now int64) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE events SET reason = ?, updated_at = ?
		WHERE id = ? AND reason != ?`+unchanged, string(reason), now, r.ID, string(reason), r.SHA256)
	if err != nil {
		return false, fmt.Errorf("re-park %s as %s: %w", r.ID, reason, err)
	}
	if ok, err := changedRows(res); ok || err != nil {
		return ok, err
	}
	return stillParked(ctx, tx, r)
}

// stillParked reports whether r is still parked with the body it was
// classified by.
func stillParked(ctx context.Context, tx *sql.Tx, r planned) (bool, error) {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ?`+unchanged, r.ID, r.SHA256).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r.ID, err)
	}
	return true, nil
}

// fold adds the deliveries of the parked row r to the row at into, which
// holds the same event, and removes r.
func fold(ctx context.Context, tx *sql.Tx, r planned, into string) (bool, error) {
	ok, err := foldRow(ctx, tx, r.ID, into, r.SHA256)
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

// moveAside re-keys the job's parked row by its body's sha256 within its
// source, as put keys a row parked beside a job, so another row can take the
// job's key without its body being lost. When a row with that key exists it
// holds the same bytes, and the job row's deliveries are counted on it
// instead.
func moveAside(ctx context.Context, tx *sql.Tx, jobID, source, sha string) error {
	key := inbox.RowID(source, inbox.BodyKey(sha))
	if _, err := readCurrent(ctx, tx, key); err == nil {
		if _, err := foldRow(ctx, tx, jobID, key, sha); err != nil {
			return fmt.Errorf("fold %s into %s: %w", jobID, key, err)
		}
		return nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE events SET id = ? WHERE id = ?`+unchanged, key, jobID, sha); err != nil {
		return fmt.Errorf("move %s aside as %s: %w", jobID, key, err)
	}
	return nil
}
