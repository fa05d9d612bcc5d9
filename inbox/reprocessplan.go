package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The planning of a reprocess run: which parked rows a selection takes,
// how they are gathered by job into batches, how each job's rows are read
// and classified again, and how each plan is carried out through a
// store's ReprocessTx. Reprocess runs these steps in order; see
// ReprocessJob.Decide for what is done with each row.

// Check refuses a selection that names no rows (no ids, no reason, not
// all), and one by reason or all when rules name no source to classify
// rows of.
func (sel Selection) Check(rules SourceRules) error {
	if len(sel.IDs) > 0 {
		return nil
	}
	if sel.Reason == "" && !sel.All {
		return errors.New("no rows selected: name ids, a reason, or all")
	}
	if len(rules) == 0 {
		return errors.New("no source to classify rows of")
	}
	return nil
}

// uniqueIDs returns sel.IDs, each once, in the order first given.
func (sel Selection) uniqueIDs() []string {
	seen := make(map[string]bool, len(sel.IDs))
	var out []string
	for _, id := range sel.IDs {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// checkSelected refuses the row id, named by a selection, when it is
// neither parked nor dismissed (status) or is a row of a source sr does
// not name.
func (sr SourceRules) checkSelected(id string, status Status, source string) error {
	if !status.SetAside() {
		return fmt.Errorf("%s is %s, not parked or dismissed", id, status)
	}
	if _, ok := sr[source]; !ok {
		return fmt.Errorf("%s is a row of source %s, which is not configured (give --config with its [[source]])", id, source)
	}
	return nil
}

// Selected is a parked row as a reprocess selection saw it.
type Selected struct {
	ID string
	// Job is the row's job_id, or its ID when it names no job.
	Job string
	// Size is the row's body's, plus its job row's when that is parked:
	// the job row may be classified along with it.
	Size       int64
	ReceivedAt time.Time
}

// ScanSelected reads a Selected, and the row's status and source, through
// scan (a driver's Scan of one stored row) from the columns id, job (the
// job_id, or the id when it has none), size, received_at (Unix
// milliseconds), status and source, in that order. It fails with scan's
// error.
func ScanSelected(scan func(dest ...any) error) (r Selected, status Status, source string, err error) {
	var received int64
	err = scan(&r.ID, &r.Job, &r.Size, &received, &status, &source)
	r.ReceivedAt = fromMillis(received)
	return r, status, source, err
}

// sortSelected sorts rows oldest first, by ID among rows received at the
// same time: the order ids were named in decides nothing.
func sortSelected(rows []Selected) {
	slices.SortFunc(rows, func(a, b Selected) int {
		return cmp.Or(a.ReceivedAt.Compare(b.ReceivedAt), cmp.Compare(a.ID, b.ID))
	})
}

// jobRows are the selected rows of one job, oldest first, and their size.
type jobRows struct {
	Job  string
	IDs  []string
	Size int64
}

// batches gathers rows, oldest first, by job, the jobs in the order of
// their oldest row, and fills batches with whole jobs until one would hold
// more than maxRows rows or maxBytes of bodies; a job larger than that is
// a batch of its own. A job never spans two batches, so a dry run counts
// what a real run would.
func batches(rows []Selected, maxRows int, maxBytes int64) [][]jobRows {
	var jobs []jobRows
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.Job]
		if !ok {
			i = len(jobs)
			at[r.Job] = i
			jobs = append(jobs, jobRows{Job: r.Job})
		}
		jobs[i].IDs = append(jobs[i].IDs, r.ID)
		jobs[i].Size += r.Size
	}
	var batches [][]jobRows
	var cur []jobRows
	var n int
	var size int64
	for _, j := range jobs {
		if len(cur) > 0 && (n+len(j.IDs) > maxRows || size+j.Size > maxBytes) {
			batches = append(batches, cur)
			cur, n, size = nil, 0, 0
		}
		cur = append(cur, j)
		n += len(j.IDs)
		size += j.Size
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// reclassified is a parked row read and classified again, without its
// body: Event as stored, Delivery as Reclassify made it now.
type reclassified struct {
	Event
	Delivery Delivery
	// Selected is false for the job's own row, read along with a selected
	// row of its job that is now storable.
	Selected bool
}

// jobPlan is what reprocessing found for one job: its rows, the job's own
// row first, and how many selected rows were no longer parked when read.
type jobPlan struct {
	Job     string
	Rows    []reclassified
	Changed int
}

// planJob reads the rows of j through read and classifies each again under
// its source's rules (Reclassify). read returns the parked row id, body
// included; ok is false when it is not there or not parked. The job's own
// row comes first; when it was not selected it is read along, if it is
// parked and of a source rules name, as soon as a selected row is now
// storable. A selected row gone meanwhile, or now of a source rules do not
// name, counts as changed. planJob fails when read does.
func planJob(j jobRows, rules SourceRules, read func(id string) (Event, bool, error)) (jobPlan, error) {
	p := jobPlan{Job: j.Job}
	classify := func(id string) (reclassified, bool, error) {
		e, ok, err := read(id)
		if err != nil || !ok {
			return reclassified{}, false, err
		}
		r, ok := rules[e.Source]
		if !ok {
			return reclassified{}, false, nil
		}
		d := Reclassify(e, r)
		e.Body, d.Body = nil, nil
		return reclassified{Event: e, Delivery: d}, true, nil
	}
	ownSelected, storable := false, false
	for _, id := range j.IDs {
		r, ok, err := classify(id)
		if err != nil {
			return jobPlan{}, err
		}
		if !ok {
			p.Changed++
			continue
		}
		r.Selected = true
		storable = storable || r.Delivery.Status == StatusNew
		if id == j.Job {
			ownSelected = true
			p.Rows = slices.Insert(p.Rows, 0, r)
			continue
		}
		p.Rows = append(p.Rows, r)
	}
	if storable && !ownSelected {
		own, ok, err := classify(j.Job)
		if err != nil {
			return jobPlan{}, err
		}
		if ok {
			p.Rows = slices.Insert(p.Rows, 0, own)
		}
	}
	return p, nil
}

// selectParked returns the selected parked rows of the sources of rules,
// oldest first: by id, each checked (checkSelected), or every parked row
// of those sources, with sel.Reason when given.
func selectParked(ctx context.Context, store ReprocessStore, sel Selection, rules SourceRules) ([]Selected, error) {
	if err := sel.Check(rules); err != nil {
		return nil, err
	}
	if len(sel.IDs) == 0 {
		return store.ParkedRows(ctx, rules.Names(), sel.Reason)
	}
	var out []Selected
	for _, id := range sel.uniqueIDs() {
		r, status, source, err := store.SelectedRow(ctx, id)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", id, err)
		case status == "":
			return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		if err := rules.checkSelected(id, status, source); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sortSelected(out)
	return out, nil
}

// planJobs reads and classifies the rows of jobs through store.ReadParked,
// outside any write transaction, so that no body is read while a write
// lock is held. The columns classification fills are made text as the
// store keeps it, so the landing rules compare them with stored rows'.
func planJobs(ctx context.Context, store ReprocessStore, jobs []jobRows, rules SourceRules) ([]jobPlan, error) {
	plans := make([]jobPlan, 0, len(jobs))
	read := func(id string) (Event, bool, error) {
		e, ok, err := store.ReadParked(ctx, id)
		if err != nil {
			return Event{}, false, fmt.Errorf("read %s: %w", id, err)
		}
		return e, ok, nil
	}
	for _, j := range jobs {
		p, err := planJob(j, rules, read)
		if err != nil {
			return nil, err
		}
		for i := range p.Rows {
			d := &p.Rows[i].Delivery
			d.JobID, d.Event = store.StoredText(d.JobID), store.StoredText(d.Event)
			d.JobStatus, d.ResultURL = store.StoredText(d.JobStatus), store.StoredText(d.ResultURL)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// applyJobs carries plans out in one transaction of store, rolled back
// when dryRun, and returns what it did. A store may run the transaction
// again: the report is counted afresh in each run.
func applyJobs(ctx context.Context, store ReprocessStore, plans []jobPlan, dryRun bool) (ReprocessReport, error) {
	var rep ReprocessReport
	err := store.InReprocessTx(ctx, dryRun, func(tx ReprocessTx) error {
		rep = ReprocessReport{Parked: map[Reason]int{}}
		for _, p := range plans {
			current, err := tx.Current(ctx, p.Job)
			if err != nil {
				return fmt.Errorf("read %s: %w", p.Job, err)
			}
			if err := p.apply(ctx, tx, current, &rep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ReprocessReport{}, err
	}
	return rep, nil
}

// apply carries p out in tx, each row as ReprocessJob.Decide chooses, on
// the job whose key current holds (nil when no row holds it), and counts
// each row in rep where it ended: a row tx found changed among the rows
// changed meanwhile. For StepTakeOver the job's own row is moved aside,
// keyed by its body's sha256 within its source as a delivery beside the
// job is, once the taking row is found still parked. apply fails when a
// row names another job than recorded, or when tx fails.
func (p jobPlan) apply(ctx context.Context, tx ReprocessTx, current *Event, rep *ReprocessReport) error {
	rep.Changed += p.Changed
	job := ReprocessJob{Key: p.Job, Row: current}
	for _, r := range p.Rows {
		if !r.Selected {
			rep.JobRows++
		}
		dec, err := job.Decide(r.Event, r.Delivery)
		if err != nil {
			return err
		}
		ok, err := step(ctx, tx, &job, r, dec)
		if err != nil {
			return err
		}
		rep.Count(dec, ok)
		if ok {
			job = job.Applied(r.Event, r.Delivery, dec)
		}
	}
	return nil
}

// step runs dec's statements for r, a row of job, in tx; false when r, or
// the row it would land on, changed. Once StepTakeOver has moved the job's
// own row aside, job says so.
func step(ctx context.Context, tx ReprocessTx, job *ReprocessJob, r reclassified, dec Decision) (bool, error) {
	switch dec.Step {
	case StepChanged:
		return false, nil
	case StepPark:
		ok, err := tx.Park(ctx, r.ID, r.SHA256, dec.Reason)
		if err != nil {
			return false, fmt.Errorf("re-park %s as %s: %w", r.ID, dec.Reason, err)
		}
		if ok {
			return true, nil
		}
		// Nothing written: the reason was already so, or r changed.
		return stillParked(ctx, tx, r)
	case StepFold:
		ok, err := tx.Fold(ctx, r.ID, job.Key, r.SHA256)
		if err != nil {
			return false, fmt.Errorf("fold %s into %s: %w", r.ID, job.Key, err)
		}
		return ok, nil
	case StepTakeOver:
		if ok, err := stillParked(ctx, tx, r); !ok || err != nil {
			return ok, err
		}
		own := job.Own
		if err := moveAside(ctx, tx, job.Key, RowID(own.Source, BodyKey(own.SHA256)), own.SHA256); err != nil {
			return false, err
		}
		*job = job.MovedAside()
	}
	ok, err := tx.MakeNew(ctx, r.ID, r.SHA256, job.Key, r.Delivery)
	if err != nil {
		return false, fmt.Errorf("make %s new as %s: %w", r.ID, job.Key, err)
	}
	return ok, nil
}

// stillParked reports whether r is still parked with the body it was
// classified by.
func stillParked(ctx context.Context, tx ReprocessTx, r reclassified) (bool, error) {
	ok, err := tx.StillParked(ctx, r.ID, r.SHA256)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r.ID, err)
	}
	return ok, nil
}

// moveAside re-keys the job's parked row from, holding sha, as to, so
// another row can take the job's key without its body being lost. When a
// row holds to it holds the same bytes (to is their sha256 key), and
// from's deliveries are counted on it instead.
func moveAside(ctx context.Context, tx ReprocessTx, from, to, sha string) error {
	cur, err := tx.Current(ctx, to)
	if err != nil {
		return fmt.Errorf("read %s: %w", to, err)
	}
	if cur != nil {
		if _, err := tx.Fold(ctx, from, to, sha); err != nil {
			return fmt.Errorf("fold %s into %s: %w", from, to, err)
		}
		return nil
	}
	if err := tx.Rekey(ctx, from, to, sha); err != nil {
		return fmt.Errorf("move %s aside as %s: %w", from, to, err)
	}
	return nil
}
