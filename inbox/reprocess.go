package inbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Bounds on one reprocess transaction, so that a store's write lock is
// never held long enough to make the receiver answer 503. Whole jobs are
// added to a batch until it holds reprocessBatch rows or
// reprocessBatchBytes of bodies: the bodies are read before the
// transaction, but changing a row's status or key may make the database
// write the whole row again, body included (SQLite does).
const (
	reprocessBatch      = 100
	reprocessBatchBytes = 8 << 20
)

// Reprocess classifies the stored bodies of the selected parked rows of
// store again under their source's rules, with each row's recorded
// delivery timestamp (and, for a KindKeyed source, its recorded key and
// event: Reclassify), and applies the result the way a delivery would
// land, without ever dropping a body. It is every store's Reprocess.
//
// The rows of one job are taken together, oldest first, and the job's own
// row (keyed by the job_id) before the others. A job row that is now
// storable becomes new where it is. A storable row beside it is then
// folded into the job's new or done row when that holds the same event
// and status (its deliveries added, the row removed), and otherwise stays
// parked conflict. When the job has no row the first storable row becomes
// it; when the job's row is parked and still not storable, the first
// storable row takes the job's key and the job row's body stays parked
// under its sha256 key. The job row is classified again with its job even
// when it was not selected, as soon as a selected row of the job is
// storable. The rest stay parked with their reason as classified now.
// ReprocessJob.Decide holds these rules.
//
// Bodies are read and classified outside any write transaction; each
// batch of whole jobs (at most reprocessBatch rows and
// reprocessBatchBytes of bodies) is then applied in one transaction of
// the store, which skips any row that changed meanwhile (a delivery, a
// purge, another reprocess) and counts it as changed. Because a job never
// spans two batches, a dry run (every transaction rolled back) counts what
// a real run would.
//
// A dismissed row (inbox dismiss) is taken only by id, and is then read
// as the parked row it was: it ends new, folded or parked, its dismissal
// cleared; so does a dismissed job row read along with a storable row of
// its job. Selected by reason or all, dismissed rows are passed over.
//
// It fails, changing nothing, when the store is read-only, the selection
// is empty, or an id names no row, a row neither parked nor dismissed, or
// a row of a source rules does not name. When a batch fails it is rolled back and the
// report counts the batches before it.
func Reprocess(ctx context.Context, store ReprocessStore, sel Selection, rules SourceRules, dryRun bool) (ReprocessReport, error) {
	rep := ReprocessReport{Parked: map[Reason]int{}, DryRun: dryRun}
	if store.ReadOnly() {
		return rep, errors.New("reprocess: store is read-only")
	}
	rows, err := selectParked(ctx, store, sel, rules)
	if err != nil {
		return rep, fmt.Errorf("reprocess: %w", err)
	}
	for _, batch := range batches(rows, reprocessBatch, reprocessBatchBytes) {
		plans, err := planJobs(ctx, store, batch, rules)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		done, err := applyJobs(ctx, store, plans, dryRun)
		if err != nil {
			return rep, fmt.Errorf("reprocess: %w", err)
		}
		rep.Add(done)
	}
	return rep, nil
}

// Reprocessor is what a Store answers of reprocessing, made from a
// store's statements: a store embeds it.
type Reprocessor struct{ store ReprocessStore }

// NewReprocessor returns the reprocessing of store.
func NewReprocessor(store ReprocessStore) Reprocessor { return Reprocessor{store} }

// Reprocess classifies the selected parked rows again under rules and
// applies the result, as the function Reprocess does.
func (rp Reprocessor) Reprocess(ctx context.Context, sel Selection, rules SourceRules, dryRun bool) (ReprocessReport, error) {
	return Reprocess(ctx, rp.store, sel, rules, dryRun)
}

// ReprocessStore is what a store implements of Reprocess: the statements
// that must be SQL. Reprocess holds the sequence, the checks, the
// batching, the classifying and the counting.
type ReprocessStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// ParkedRows returns the parked rows of sources, only those parked
	// with reason when it is not "", oldest first and by id among rows
	// received at the same time (sortSelected's order).
	ParkedRows(ctx context.Context, sources []string, reason Reason) ([]Selected, error)
	// SelectedRow reads the row id as a selection sees it, with its
	// status and source; the status is "" when there is none.
	SelectedRow(ctx context.Context, id string) (r Selected, status Status, source string, err error)
	// ReadParked reads the parked (or dismissed) row id, body included;
	// false when it is not there or neither.
	ReadParked(ctx context.Context, id string) (Event, bool, error)
	// StoredText returns s as the store's text columns keep it.
	StoredText(s string) string
	// InReprocessTx runs fn in one write transaction, rolled back when
	// dryRun or when fn fails, and committed otherwise. A store may run fn
	// again in a new transaction when the first met a conflict a new run
	// cures.
	InReprocessTx(ctx context.Context, dryRun bool, fn func(ReprocessTx) error) error
}

// ReprocessTx is a store's transaction applying reprocess plans: the
// statements of each step. Each that changes a row names it by its id, its
// status parked (or dismissed: read as parked) and the sha256 it was
// classified by; one that reports false found the row changed since it
// was read, and left it alone. Park and MakeNew leave no row dismissed.
type ReprocessTx interface {
	// Current reads (and, where the store locks rows, locks) what the
	// landing rules need of the row holding id; nil when none does.
	Current(ctx context.Context, id string) (*Event, error)
	// Park sets the parked row id's reason; false when nothing changed:
	// the row changed, or already had reason.
	Park(ctx context.Context, id, sha string, reason Reason) (bool, error)
	// StillParked reports whether id is still parked holding sha.
	StillParked(ctx context.Context, id, sha string) (bool, error)
	// Fold adds the deliveries of the parked row from, holding sha, to the
	// row into, which holds the same event, and removes from.
	Fold(ctx context.Context, from, into, sha string) (bool, error)
	// MakeNew makes the parked row id the job's new row under key, with
	// d's event and job status, queued afresh: no attempts, no lease, no
	// error; its body, size and sha256 stay as they are.
	MakeNew(ctx context.Context, id, sha, key string, d Delivery) (bool, error)
	// Rekey moves the parked row from, holding sha, to the id to, which no
	// row holds.
	Rekey(ctx context.Context, from, to, sha string) error
}

// Selection names the parked rows Reprocess works on: the rows with IDs,
// every parked row with Reason, or with All every parked row.
type Selection struct {
	IDs    []string
	Reason Reason
	All    bool
}

// SourceRules are the classification rules of the sources Reprocess may
// classify again, by source name. A KindBody source's row is read again
// by Classify; a KindKeyed source's keeps the key and the event recorded
// with the row at receipt (a key may come from a header, which is not
// stored), under that source's rules now. Rows of a source not named here
// are refused by id and passed over by reason or all.
type SourceRules map[string]Rules

// Names returns the sources, sorted.
func (sr SourceRules) Names() []string {
	return slices.Sorted(maps.Keys(sr))
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

// Add adds b's counts to r's.
func (r *ReprocessReport) Add(b ReprocessReport) {
	if r.Parked == nil {
		r.Parked = map[Reason]int{}
	}
	r.Moved += b.Moved
	r.Folded += b.Folded
	r.Changed += b.Changed
	r.JobRows += b.JobRows
	for reason, n := range b.Parked {
		r.Parked[reason] += n
	}
}

// Count counts one row where it ended: as dec says when the store applied
// it (ok), else among the rows changed meanwhile.
func (r *ReprocessReport) Count(dec Decision, ok bool) {
	if r.Parked == nil {
		r.Parked = map[Reason]int{}
	}
	switch {
	case !ok || dec.Step == StepChanged:
		r.Changed++
	case dec.Step == StepPark:
		r.Parked[dec.Reason]++
	case dec.Step == StepFold:
		r.Folded++
	default:
		r.Moved++
	}
}

// Reclassify classifies the stored row e, body included, again under r, as
// Reprocess does: a KindBody source's body is read again; a KindKeyed
// source's row keeps the key and the event recorded at receipt (its
// job_id is the key's row id; none when the delivery named no usable key),
// so only the event set and the body limit decide anew.
func Reclassify(e Event, r Rules) Delivery {
	var n Named
	if r.Kind == KindKeyed {
		n.Event = e.Event
		// A row parked missing_key has no job_id: under rules that key by
		// the body, it is keyed again by its own sum.
		if e.JobID != "" {
			n.Key = KeyOf(e.Source, e.JobID)
			// A key of the body's own sum was the source's choice (a
			// sender's was refused at receipt, so has no job_id): the row
			// keeps it under rules that key otherwise now.
			if n.Key == BodyKey(e.SHA256) {
				r.ByBody = true
			}
		}
	}
	return Classify(e.Source, n, e.Body, e.DeliveryTS, r)
}

// Step is what reprocessing does with one parked row of a job.
type Step int

// The steps Decide chooses.
const (
	// StepPark: the row stays parked, with Decision.Reason.
	StepPark Step = iota
	// StepNew: the row becomes the job's new row, under the job's key,
	// queued afresh; its body stays as it is.
	StepNew
	// StepTakeOver: the job's own row, still parked, is moved aside (keyed
	// by its body's sha256 within its source, or folded into the row that
	// has that key), and the row then becomes the job's new row as with
	// StepNew.
	StepTakeOver
	// StepFold: the row's deliveries are added to the job's new or done
	// row, which holds the same event and status, and the row is removed.
	StepFold
	// StepChanged: the job's row changed since the rows were read; the row
	// is left as it is.
	StepChanged
)

// Decision is what Decide chose for one row.
type Decision struct {
	Step   Step
	Reason Reason // with StepPark
}

// ReprocessJob is one job while its parked rows are reprocessed, oldest
// first and the job's own row first: the row that holds the job's key as
// it stands, and the job's own row as it was kept parked.
type ReprocessJob struct {
	// Key is the job's key: the row id its storable rows land on.
	Key string
	// Row is the row holding Key now (Status, SHA256, Event, JobStatus,
	// Source and Reason are read); nil when none.
	Row *Event
	// Own is the job's own row, classified and kept parked unchanged in
	// this run, which a storable row may take over; nil when none.
	Own *Event
}

// Decide returns what reprocessing does with row, a parked row of the job
// that classified again as d. A row that is not storable stays parked
// with its reason now (a test ping keeps its recorded reason). A storable
// row is the job's: its own row becomes new where it is; a row beside it
// becomes the job's row when there is none, takes over a job row that
// stays parked, is folded into a new or done row that holds the same
// event and status (Land's repeat), and otherwise stays parked conflict.
// It fails when d names another job than the one the row was recorded
// with: the row's keys were built by other rules.
func (j ReprocessJob) Decide(row Event, d Delivery) (Decision, error) {
	if d.Status != StatusNew {
		reason := d.Reason
		if reason == "" {
			// Not storable, yet not parked either (a test ping): keep the
			// reason on record.
			reason = row.Reason
		}
		return Decision{Step: StepPark, Reason: reason}, nil
	}
	if d.Key != j.Key {
		return Decision{}, fmt.Errorf("%s names job %q, recorded as %q", row.ID, d.Key, j.Key)
	}
	switch {
	case row.ID == j.Key:
		// The job's own row, storable now: it becomes new where it is.
		if j.Row == nil || !j.Row.Status.SetAside() || j.Row.SHA256 != row.SHA256 {
			return Decision{Step: StepChanged}, nil
		}
		return Decision{Step: StepNew}, nil
	case j.Row == nil:
		// The job has no row: this one becomes it.
		return Decision{Step: StepNew}, nil
	case j.Row.Status.SetAside():
		// The job's row is parked and still not storable: this row takes
		// the job's key, and the job row's body stays parked beside it.
		if j.Own == nil || j.Own.SHA256 != j.Row.SHA256 {
			return Decision{Step: StepChanged}, nil
		}
		return Decision{Step: StepTakeOver}, nil
	case Land(*j.Row, d) == LandRepeat:
		return Decision{Step: StepFold}, nil
	}
	return Decision{Step: StepPark, Reason: ReasonConflict}, nil
}

// MovedAside returns the job once its own row was moved aside for
// StepTakeOver: no row holds its key.
func (j ReprocessJob) MovedAside() ReprocessJob {
	j.Row, j.Own = nil, nil
	return j
}

// Applied returns the job once the store applied dec to row, classified
// as d: the job's own row kept parked is what a later row may take over;
// a row made new is the job's row, which later rows land on.
func (j ReprocessJob) Applied(row Event, d Delivery, dec Decision) ReprocessJob {
	switch dec.Step {
	case StepPark:
		if row.ID == j.Key {
			own := row
			j.Own = &own
		}
	case StepNew, StepTakeOver:
		j.Own = nil
		j.Row = &Event{ID: j.Key, Source: SourceOf(d), Status: StatusNew, SHA256: row.SHA256,
			Event: d.Event, JobStatus: d.JobStatus}
	}
	return j
}
