package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

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
	for _, batch := range batchJobs(groupJobs(rows)) {
		plans, err := s.planJobs(ctx, batch, rules)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		done, err := s.applyJobs(ctx, plans, dryRun)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		rep.Moved += done.Moved
		rep.Folded += done.Folded
		rep.Changed += done.Changed
		rep.JobRows += done.JobRows
		for reason, n := range done.Parked {
			rep.Parked[reason] += n
		}
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
// job row j if it has one.
const selectColumns = `SELECT e.id, coalesce(e.job_id, e.id), e.size + coalesce(j.size, 0), e.received_at, e.status, e.source
	FROM events e LEFT JOIN events j ON j.id = e.job_id AND j.id <> e.id AND j.status = 'parked'`

// selectParked returns the selected parked rows of the sources of rules,
// oldest first.
func (s *Store) selectParked(ctx context.Context, sel inbox.Selection, rules inbox.SourceRules) ([]selectedRow, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	if len(sel.IDs) > 0 {
		return s.selectIDs(ctx, sel.IDs, rules)
	}
	if sel.Reason == "" && !sel.All {
		return nil, errors.New("no rows selected: name ids, a reason, or all")
	}
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, errors.New("no source to classify rows of")
	}
	q, args := selectColumns+` WHERE e.status = 'parked' AND e.source = ANY($1)`, []any{names}
	if sel.Reason != "" {
		q, args = q+` AND e.reason = $2`, append(args, string(sel.Reason))
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY e.received_at, e.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (selectedRow, error) {
		var sr selectedRow
		var status, source string
		err := r.Scan(&sr.id, &sr.job, &sr.size, &sr.receivedAt, &status, &source)
		return sr, err
	})
	if err != nil {
		return nil, fmt.Errorf("select parked rows: %w", err)
	}
	return out, nil
}

// selectIDs checks that every id names a parked row and returns them, each
// once, oldest first.
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
		qctx, cancel := context.WithTimeout(ctx, s.busy)
		err := s.pool.QueryRow(qctx, selectColumns+` WHERE e.id = $1`, id).
			Scan(&r.id, &r.job, &r.size, &r.receivedAt, &status, &source)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) {
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

// errGone is readParked's answer for a row that is not there, not parked,
// or of a source the rules do not name.
var errGone = errors.New("not a parked row of a configured source")

// planJobs reads and classifies the rows of jobs outside any transaction.
// A job's own parked row comes along, even when not selected, if another
// of its rows is now storable.
func (s *Store) planJobs(ctx context.Context, jobs []jobRows, rules inbox.SourceRules) ([]jobPlan, error) {
	plans := make([]jobPlan, 0, len(jobs))
	for _, j := range jobs {
		p := jobPlan{job: j.job}
		ownSelected, storable := false, false
		for _, id := range j.ids {
			r, err := s.readParked(ctx, id, rules)
			if errors.Is(err, errGone) {
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
			} else if !errors.Is(err, errGone) {
				return nil, err
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// readParked reads the parked row id and classifies its body again under
// its source's rules; errGone when it is not there or not parked.
func (s *Store) readParked(ctx context.Context, id string, rules inbox.SourceRules) (planned, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	row := s.pool.QueryRow(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = $1 AND status = 'parked'`, id)
	e, err := scanEvent(row.Scan, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return planned{}, errGone
	}
	if err != nil {
		return planned{}, fmt.Errorf("read %s: %w", id, err)
	}
	r, ok := rules[e.Source]
	if !ok {
		return planned{}, errGone
	}
	d := inbox.Reclassify(e, r)
	d.JobID, d.Event, d.JobStatus, d.ResultURL = pgText(d.JobID), pgText(d.Event), pgText(d.JobStatus), pgText(d.ResultURL)
	e.Body, d.Body = nil, nil
	return planned{Event: e, d: d}, nil
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// applyJobs applies plans in one transaction, rolled back when dryRun, and
// returns what it did. A key that another replica's delivery took
// meanwhile (a unique violation) makes it run again: every statement
// checks the row it changes, so a new run skips what changed.
func (s *Store) applyJobs(ctx context.Context, plans []jobPlan, dryRun bool) (inbox.ReprocessReport, error) {
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

// jobApply is one job while its plan is applied: its row as it stands in
// the transaction, and what has been done.
type jobApply struct {
	tx     pgx.Tx
	id     string      // the job's key
	row    inbox.Event // Status, Reason, SHA256, Event, JobStatus, Source
	exists bool        // whether a row holds the key
	// own is the job's parked row, classified and unchanged, that a storable
	// row may take over.
	own *planned
	now int64
	rep *inbox.ReprocessReport
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

// applyJob applies one job's plan. Every statement names the row's id, its
// status parked and the sha256 it was classified by, so a row that changed
// since it was read is left alone and counted as changed.
func applyJob(ctx context.Context, tx pgx.Tx, p jobPlan, now int64, rep *inbox.ReprocessReport) error {
	rep.Changed += p.changed
	j := &jobApply{tx: tx, id: p.job, now: now, rep: rep}
	var err error
	j.row, err = readCurrent(ctx, tx, p.job)
	j.exists = err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read %s: %w", p.job, err)
	}
	for _, r := range p.rows {
		if !r.selected {
			rep.JobRows++
		}
		ok, err := j.apply(ctx, r)
		if err != nil {
			return err
		}
		if !ok {
			rep.Changed++
		}
	}
	return nil
}

// apply applies one row of the job; false when the row, or the job's row
// it would land on, changed and it was left alone.
func (j *jobApply) apply(ctx context.Context, r planned) (bool, error) {
	d := r.d
	if d.Status != inbox.StatusNew {
		reason := d.Reason
		if reason == "" {
			// Not storable, yet not parked either (a test ping): keep the reason on record.
			reason = r.Reason
		}
		ok, err := j.park(ctx, r, reason)
		if ok && r.ID == j.id {
			j.own = &r
		}
		return ok, err
	}
	if d.Key != j.id {
		return false, fmt.Errorf("%s names job %q, recorded as %q", r.ID, d.Key, j.id)
	}

	switch {
	case r.ID == j.id:
		// The job's own row, storable now: it becomes new where it is.
		if !j.exists || j.row.Status != inbox.StatusParked || j.row.SHA256 != r.SHA256 {
			return false, nil
		}
	case !j.exists:
		// The job has no row: this one becomes it.
	case j.row.Status == inbox.StatusParked:
		// The job's row is parked and still not storable: this row takes
		// the job's key, and the job row's body stays parked beside it.
		if j.own == nil || j.own.SHA256 != j.row.SHA256 {
			return false, nil
		}
		if ok, err := stillParked(ctx, j.tx, r); !ok || err != nil {
			return ok, err
		}
		if err := moveAside(ctx, j.tx, j.id, j.own.Source, j.own.SHA256); err != nil {
			return false, err
		}
		j.own, j.exists = nil, false
	case inbox.Land(j.row, d) == inbox.LandRepeat:
		ok, err := fold(ctx, j.tx, r, j.id)
		if ok {
			j.rep.Folded++
		}
		return ok, err
	default:
		return j.park(ctx, r, inbox.ReasonConflict)
	}
	ok, err := makeNew(ctx, j.tx, r, j.id, j.now)
	if !ok || err != nil {
		return ok, err
	}
	j.row = inbox.Event{Status: inbox.StatusNew, SHA256: r.SHA256, Event: d.Event, JobStatus: d.JobStatus, Source: r.Source}
	j.exists = true
	j.rep.Moved++
	return true, nil
}

// park keeps r parked with reason and counts it there.
func (j *jobApply) park(ctx context.Context, r planned, reason inbox.Reason) (bool, error) {
	ok, err := stayParked(ctx, j.tx, r, reason, j.now)
	if ok {
		j.rep.Parked[reason]++
	}
	return ok, err
}

// unchanged is the condition every reprocess statement adds: the row is
// still parked and holds the body it was classified by ($2).
const unchanged = ` AND status = 'parked' AND sha256 = $2`

// makeNew makes the parked row r the job's new row, keyed by jobID, queued
// afresh for the dispatcher: no attempts, no lease, no error.
func makeNew(ctx context.Context, tx pgx.Tx, r planned, jobID string, now int64) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE events SET id = $3, status = 'new', reason = NULL,
		event = $4, job_status = $5, result_url = NULL, updated_at = $6,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL
		WHERE id = $1`+unchanged,
		r.ID, r.SHA256, jobID, nullable(r.d.Event), nullable(r.d.JobStatus), now)
	if err != nil {
		return false, fmt.Errorf("make %s new as %s: %w", r.ID, jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// stayParked keeps r parked with reason; false when r changed meanwhile.
// An unchanged reason is only checked.
func stayParked(ctx context.Context, tx pgx.Tx, r planned, reason inbox.Reason, now int64) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE events SET reason = $3, updated_at = $4
		WHERE id = $1 AND reason <> $3`+unchanged, r.ID, r.SHA256, string(reason), now)
	if err != nil {
		return false, fmt.Errorf("re-park %s as %s: %w", r.ID, reason, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	return stillParked(ctx, tx, r)
}

// stillParked reports whether r is still parked with the body it was
// classified by, and locks it.
func stillParked(ctx context.Context, tx pgx.Tx, r planned) (bool, error) {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM events WHERE id = $1`+unchanged+` FOR UPDATE`, r.ID, r.SHA256).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r.ID, err)
	}
	return true, nil
}

// fold adds the deliveries of the parked row r to the row at into, which
// holds the same event, and removes r.
func fold(ctx context.Context, tx pgx.Tx, r planned, into string) (bool, error) {
	ok, err := foldRow(ctx, tx, r.ID, into, r.SHA256)
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

// moveAside re-keys the job's parked row by its body's sha256 within its
// source, as Put keys a row parked beside a job, so another row can take
// the job's key without its body being lost. When a row with that key
// exists it holds the same bytes, and the job row's deliveries are counted
// on it instead.
func moveAside(ctx context.Context, tx pgx.Tx, jobID, source, sha string) error {
	key := inbox.RowID(source, inbox.BodyKey(sha))
	if _, err := readCurrent(ctx, tx, key); err == nil {
		if _, err := foldRow(ctx, tx, jobID, key, sha); err != nil {
			return fmt.Errorf("fold %s into %s: %w", jobID, key, err)
		}
		return nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE events SET id = $3 WHERE id = $1`+unchanged, jobID, sha, key); err != nil {
		return fmt.Errorf("move %s aside as %s: %w", jobID, key, err)
	}
	return nil
}
