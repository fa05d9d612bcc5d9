package inbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Selection names the parked rows Reprocess works on: the rows with IDs,
// every parked row with Reason, or with All every parked row.
type Selection struct {
	IDs    []string
	Reason Reason
	All    bool
}

// SourceRules are the classification rules of the sources Reprocess may
// classify again, by source name. A DefaultSource row is classified by
// Classify; another source's by ClassifyKeyed, from the key and the event
// recorded with the row at receipt (a key may come from a header, which is
// not stored), under that source's rules now. Rows of a source not named
// here are refused by id and passed over by reason or all.
type SourceRules map[string]Rules

// names returns the sources, sorted.
func (sr SourceRules) names() []string {
	names := make([]string, 0, len(sr))
	for n := range sr {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ReprocessReport counts each reprocessed row once, by where it ended.
type ReprocessReport struct {
	// Moved counts the rows whose body is now a new row: revived where it
	// was, given its job's key, or taking over its job's parked row.
	Moved int `json:"moved"`
	// Folded counts the rows removed because the job's new or done row
	// holds the same event and status: their deliveries were added to it.
	Folded int `json:"folded"`
	// Parked counts the rows that stay parked, by their reason now.
	Parked map[Reason]int `json:"parked"`
	// Changed counts the rows that a delivery or another command changed
	// after they were selected; they were left as they are.
	Changed int `json:"changed"`
	// JobRows counts the parked job rows that were not selected but were
	// classified again, and counted above, because a selected row of their
	// job became storable and would otherwise have replaced their body.
	JobRows int `json:"job_rows"`
	// DryRun is set when every change was rolled back.
	DryRun bool `json:"dry_run"`
}

func (r *ReprocessReport) add(b ReprocessReport) {
	r.Moved += b.Moved
	r.Folded += b.Folded
	r.Changed += b.Changed
	r.JobRows += b.JobRows
	for reason, n := range b.Parked {
		r.Parked[reason] += n
	}
}

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
func (s *Store) Reprocess(ctx context.Context, sel Selection, rules SourceRules, dryRun bool) (ReprocessReport, error) {
	rep := ReprocessReport{Parked: map[Reason]int{}, DryRun: dryRun}
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
		rep.add(done)
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
func (s *Store) selectParked(ctx context.Context, sel Selection, rules SourceRules) ([]selectedRow, error) {
	if len(sel.IDs) > 0 {
		return s.selectIDs(ctx, sel.IDs, rules)
	}
	if sel.Reason == "" && !sel.All {
		return nil, errors.New("no rows selected: name ids, a reason, or all")
	}
	names := rules.names()
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
func (s *Store) selectIDs(ctx context.Context, ids []string, rules SourceRules) ([]selectedRow, error) {
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
			return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		if Status(status) != StatusParked {
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
	Event
	d        Delivery
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
func (s *Store) planJobs(ctx context.Context, jobs []jobRows, rules SourceRules) ([]jobPlan, error) {
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
			storable = storable || r.d.Status == StatusNew
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
func (s *Store) readParked(ctx context.Context, id string, rules SourceRules) (planned, error) {
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
	d := reclassify(e, r)
	e.Body, d.Body = nil, nil
	return planned{Event: e, d: d}, nil
}

// reclassify classifies the stored row e again under r: a DefaultSource
// body is read again; another source's row keeps the key and the event
// recorded at receipt (its job_id is the key's row id; none when the
// delivery named no usable key), so only the event set and the body limit
// decide anew.
func reclassify(e Event, r Rules) Delivery {
	if e.Source == DefaultSource {
		return Classify(e.Body, e.DeliveryTS, r)
	}
	key := strings.TrimPrefix(e.JobID, e.Source+"/")
	return ClassifyKeyed(e.Source, key, e.Event, e.Body, e.DeliveryTS, r)
}

// applyJobs applies plans in one IMMEDIATE transaction, rolled back when
// dryRun, and returns what it did.
func (s *Store) applyJobs(ctx context.Context, plans []jobPlan, dryRun bool) (ReprocessReport, error) {
	rep := ReprocessReport{Parked: map[Reason]int{}}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return rep, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	now := millis(s.now())
	for _, p := range plans {
		if err := applyJob(ctx, tx, p, now, &rep); err != nil {
			return ReprocessReport{}, err
		}
	}
	if !dryRun {
		if err := tx.Commit(); err != nil {
			return ReprocessReport{}, fmt.Errorf("commit: %w", err)
		}
	}
	return rep, nil
}

// jobApply is one job while its plan is applied: its row as it stands in
// the transaction, and what has been done.
type jobApply struct {
	tx     *sql.Tx
	id     string // the job's key
	row    current
	exists bool // whether a row holds the key
	// own is the job's parked row, classified and unchanged, that a storable
	// row may take over.
	own *planned
	now int64
	rep *ReprocessReport
}

// applyJob applies one job's plan. Every statement names the row's id, its
// status parked and the sha256 it was classified by, so a row that changed
// since it was read is left alone and counted as changed.
func applyJob(ctx context.Context, tx *sql.Tx, p jobPlan, now int64, rep *ReprocessReport) error {
	rep.Changed += p.changed
	j := &jobApply{tx: tx, id: p.job, now: now, rep: rep}
	var err error
	j.row, err = readCurrent(ctx, tx, p.job)
	j.exists = err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
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
	if d.Status != StatusNew {
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
		if !j.exists || j.row.status != StatusParked || j.row.sha != r.SHA256 {
			return false, nil
		}
	case !j.exists:
		// The job has no row: this one becomes it.
	case j.row.status == StatusParked:
		// The job's row is parked and still not storable: this row takes
		// the job's key, and the job row's body stays parked beside it.
		if j.own == nil || j.own.SHA256 != j.row.sha {
			return false, nil
		}
		if ok, err := stillParked(ctx, j.tx, r); !ok || err != nil {
			return ok, err
		}
		if err := moveAside(ctx, j.tx, j.id, j.own.Source, j.own.SHA256); err != nil {
			return false, err
		}
		j.own, j.exists = nil, false
	case landOn(j.row, d) == landRepeat:
		ok, err := fold(ctx, j.tx, r, j.id)
		if ok {
			j.rep.Folded++
		}
		return ok, err
	default:
		return j.park(ctx, r, ReasonConflict)
	}
	ok, err := makeNew(ctx, j.tx, r, j.id, j.now)
	if !ok || err != nil {
		return ok, err
	}
	j.row = current{status: StatusNew, sha: r.SHA256, event: d.Event, jobStatus: d.JobStatus}
	j.exists = true
	j.rep.Moved++
	return true, nil
}

// park keeps r parked with reason and counts it there.
func (j *jobApply) park(ctx context.Context, r planned, reason Reason) (bool, error) {
	ok, err := stayParked(ctx, j.tx, r, reason, j.now)
	if ok {
		j.rep.Parked[reason]++
	}
	return ok, err
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
func stayParked(ctx context.Context, tx *sql.Tx, r planned, reason Reason, now int64) (bool, error) {
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
	if _, err := repeat(ctx, tx, into, n, lastSeen); err != nil {
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
	key := RowID(source, BodyKey(sha))
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
