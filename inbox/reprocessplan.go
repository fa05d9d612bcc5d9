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
// how they are gathered by job into batches, and how each job's rows are
// read and classified again. A store reads rows in its own way and asks
// here, so that every store plans alike; see ReprocessJob.Decide for what
// is done with each row.

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

// UniqueIDs returns sel.IDs, each once, in the order first given.
func (sel Selection) UniqueIDs() []string {
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

// CheckSelected refuses the row id, named by a selection, when it is not
// parked (status) or is a row of a source sr does not name.
func (sr SourceRules) CheckSelected(id string, status Status, source string) error {
	if status != StatusParked {
		return fmt.Errorf("%s is %s, not parked", id, status)
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

// SortSelected sorts rows oldest first, by ID among rows received at the
// same time: the order ids were named in decides nothing.
func SortSelected(rows []Selected) {
	slices.SortFunc(rows, func(a, b Selected) int {
		return cmp.Or(a.ReceivedAt.Compare(b.ReceivedAt), cmp.Compare(a.ID, b.ID))
	})
}

// JobRows are the selected rows of one job, oldest first, and their size.
type JobRows struct {
	Job  string
	IDs  []string
	Size int64
}

// Batches gathers rows, oldest first, by job, the jobs in the order of
// their oldest row, and fills batches with whole jobs until one would hold
// more than maxRows rows or maxBytes of bodies; a job larger than that is
// a batch of its own. A job never spans two batches, so a dry run counts
// what a real run would.
func Batches(rows []Selected, maxRows int, maxBytes int64) [][]JobRows {
	var jobs []JobRows
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.Job]
		if !ok {
			i = len(jobs)
			at[r.Job] = i
			jobs = append(jobs, JobRows{Job: r.Job})
		}
		jobs[i].IDs = append(jobs[i].IDs, r.ID)
		jobs[i].Size += r.Size
	}
	var batches [][]JobRows
	var cur []JobRows
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

// Reclassified is a parked row read and classified again, without its
// body: Event as stored, Delivery as Reclassify made it now.
type Reclassified struct {
	Event
	Delivery Delivery
	// Selected is false for the job's own row, read along with a selected
	// row of its job that is now storable.
	Selected bool
}

// JobPlan is what reprocessing found for one job: its rows, the job's own
// row first, and how many selected rows were no longer parked when read.
type JobPlan struct {
	Job     string
	Rows    []Reclassified
	Changed int
}

// PlanJob reads the rows of j through read and classifies each again under
// its source's rules (Reclassify). read returns the parked row id, body
// included; ok is false when it is not there or not parked. The job's own
// row comes first; when it was not selected it is read along, if it is
// parked and of a source rules name, as soon as a selected row is now
// storable. A selected row gone meanwhile, or now of a source rules do not
// name, counts as changed. PlanJob fails when read does.
func PlanJob(j JobRows, rules SourceRules, read func(id string) (Event, bool, error)) (JobPlan, error) {
	p := JobPlan{Job: j.Job}
	classify := func(id string) (Reclassified, bool, error) {
		e, ok, err := read(id)
		if err != nil || !ok {
			return Reclassified{}, false, err
		}
		r, ok := rules[e.Source]
		if !ok {
			return Reclassified{}, false, nil
		}
		d := Reclassify(e, r)
		e.Body, d.Body = nil, nil
		return Reclassified{Event: e, Delivery: d}, true, nil
	}
	ownSelected, storable := false, false
	for _, id := range j.IDs {
		r, ok, err := classify(id)
		if err != nil {
			return JobPlan{}, err
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
			return JobPlan{}, err
		}
		if ok {
			p.Rows = slices.Insert(p.Rows, 0, own)
		}
	}
	return p, nil
}

// ReprocessTx is a store's transaction applying reprocess plans: the
// statements of each step JobPlan.Apply takes. Each names a row by its id,
// its status parked and the sha256 it was classified by; one that reports
// false found the row changed since it was read, and left it alone.
type ReprocessTx interface {
	// Park keeps r parked with reason.
	Park(ctx context.Context, r Reclassified, reason Reason) (bool, error)
	// StillParked reports whether r is still parked as read.
	StillParked(ctx context.Context, r Reclassified) (bool, error)
	// Fold adds r's deliveries to the row at into, which holds the same
	// event, and removes r.
	Fold(ctx context.Context, r Reclassified, into string) (bool, error)
	// MakeNew makes r the job's new row under key, queued afresh: no
	// attempts, no lease, no error; its body stays as it is.
	MakeNew(ctx context.Context, r Reclassified, key string) (bool, error)
	// MoveAside re-keys the job's parked row from, holding sha, as to;
	// when a row holds to, it holds the same bytes, and from's deliveries
	// are added to it instead.
	MoveAside(ctx context.Context, from, to, sha string) error
}

// Apply carries p out in tx, each row as ReprocessJob.Decide chooses, on
// the job whose key current holds (nil when no row holds it), and counts
// each row in rep where it ended: a row tx found changed among the rows
// changed meanwhile. For StepTakeOver the job's own row is moved aside,
// keyed by its body's sha256 within its source as a delivery beside the
// job is, once the taking row is found still parked. Apply fails when a
// row names another job than recorded, or when tx fails.
func (p JobPlan) Apply(ctx context.Context, tx ReprocessTx, current *Event, rep *ReprocessReport) error {
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
func step(ctx context.Context, tx ReprocessTx, job *ReprocessJob, r Reclassified, dec Decision) (bool, error) {
	switch dec.Step {
	case StepChanged:
		return false, nil
	case StepPark:
		return tx.Park(ctx, r, dec.Reason)
	case StepFold:
		return tx.Fold(ctx, r, job.Key)
	case StepTakeOver:
		if ok, err := tx.StillParked(ctx, r); !ok || err != nil {
			return ok, err
		}
		own := job.Own
		if err := tx.MoveAside(ctx, job.Key, RowID(own.Source, BodyKey(own.SHA256)), own.SHA256); err != nil {
			return false, err
		}
		*job = job.MovedAside()
	}
	return tx.MakeNew(ctx, r, job.Key)
}
