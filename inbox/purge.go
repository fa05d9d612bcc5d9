package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Retention bounds. A row is the acceptance record of its delivery: while
// it stays, a later delivery of the same job or run is a counted repeat,
// not new work. So it is kept at least as long as a delivery of it may
// still arrive and as long as the platform keeps the run's history: Vibe
// delivers a run's attempts for up to 96 hours and keeps history 90 days
// by default, at least 7 days; Sume makes up to 10 attempts, and a
// redelivery may be asked for days later.
const (
	// MinRetention is the shortest retention a purge takes: more than the
	// 96-hour delivery lifetime, and the platform's shortest history
	// retention.
	MinRetention = 7 * 24 * time.Hour
	// DefaultRetention is the platform's default history retention.
	DefaultRetention = 90 * 24 * time.Hour
)

// PurgeSelection says which rows a purge deletes: those last delivered
// before Before with one of Statuses (done, ignored, dismissed), and the
// parked ones with one of Reasons.
type PurgeSelection struct {
	Before   time.Time
	Statuses []Status
	Reasons  []Reason
}

// Check refuses a selection a purge must never run at now: a Before later
// than MinRetention ago, StatusNew or StatusParked in Statuses (new rows
// are still owed to the application; parked rows are chosen by reason),
// and unknown statuses or reasons.
func (sel PurgeSelection) Check(now time.Time) error {
	if floor := now.Add(-MinRetention); sel.Before.After(floor) {
		return fmt.Errorf("purge: a retention under %dd would delete rows whose deliveries may still arrive", MinRetention/(24*time.Hour))
	}
	for _, st := range sel.Statuses {
		switch {
		case st == StatusNew:
			return errors.New("purge: new rows are never purged")
		case st == StatusParked:
			return errors.New("purge: parked rows are chosen by reason")
		case !st.Valid():
			return fmt.Errorf("purge: unknown status %q", st)
		}
	}
	for _, r := range sel.Reasons {
		if !r.Valid() {
			return fmt.Errorf("purge: unknown reason %q", r)
		}
	}
	return nil
}

// ReceiptReasons returns the reasons a delivery is parked with on receipt:
// bodies that can never be processed as received. The dispatcher's
// (handler_failed, handler_rejected) are left out: those rows hold work
// the application never finished.
func ReceiptReasons() []Reason {
	return slices.DeleteFunc(Reasons(), Reason.ByHandler)
}

// PurgeReport is what Purge deleted, or Purgeable would delete.
type PurgeReport struct {
	// Deleted counts the rows deleted per status.
	Deleted map[Status]int64 `json:"deleted"`
	// DeletedParked counts the parked rows deleted per reason.
	DeletedParked map[Reason]int64 `json:"deleted_parked,omitempty"`
	// KeptDone counts the done rows past retention that were kept because
	// a parked row of their job stays.
	KeptDone int64 `json:"kept_done"`
	// KeptUnfinished counts the rows past retention kept because their
	// work is unfinished: new rows, and rows the dispatcher parked whose
	// reason was not selected.
	KeptUnfinished int64 `json:"kept_unfinished"`
}

// newPurgeReport is the report of a purge of sel that deleted nothing yet:
// every selected status and reason counted at zero.
func newPurgeReport(sel PurgeSelection) PurgeReport {
	rep := PurgeReport{Deleted: map[Status]int64{}, DeletedParked: map[Reason]int64{}}
	for _, st := range sel.Statuses {
		rep.Deleted[st] = 0
	}
	if len(sel.Reasons) > 0 {
		rep.Deleted[StatusParked] = 0
	}
	for _, r := range sel.Reasons {
		rep.DeletedParked[r] = 0
	}
	return rep
}

// PurgeStep is one pass of a purge: the rows of Status, and of those
// parked the ones with Reason.
type PurgeStep struct {
	Status Status
	Reason Reason // with StatusParked
}

// String names the rows of s: "done", "parked conflict".
func (s PurgeStep) String() string {
	if s.Status == StatusParked {
		return "parked " + string(s.Reason)
	}
	return string(s.Status)
}

// steps returns the passes a purge of sel makes, in order: the parked rows
// of each of sel.Reasons first, then the ignored rows, then the dismissed
// ones, then the done rows, each when selected. A done row stays while a
// parked or dismissed row of its job stays, so it goes only once the rows
// beside it have gone.
func (sel PurgeSelection) steps() []PurgeStep {
	var steps []PurgeStep
	for _, r := range sel.Reasons {
		steps = append(steps, PurgeStep{Status: StatusParked, Reason: r})
	}
	for _, st := range []Status{StatusIgnored, StatusDismissed, StatusDone} {
		if slices.Contains(sel.Statuses, st) {
			steps = append(steps, PurgeStep{Status: st})
		}
	}
	return steps
}

// countDeleted counts n rows deleted by step: under its status, and for
// parked rows under their reason too.
func (r *PurgeReport) countDeleted(step PurgeStep, n int64) {
	r.Deleted[step.Status] += n
	if step.Status == StatusParked {
		r.DeletedParked[step.Reason] += n
	}
}

// purgeBatch bounds how many rows one purge transaction deletes, so that
// the store's write lock (SQLite's) is never held long enough to make the
// receiver answer 503, and no transaction holds many rows that deliveries
// may be waiting to count a repeat on (PostgreSQL's).
const purgeBatch = 1000

// PurgeStore is what a store implements of Purge and Purgeable: the
// statements that must be SQL. Each reads the rows a purge of sel deletes
// as PurgeSelection says: retention counts from a row's last delivery, not
// its first (a row a redelivery landed on yesterday is what makes the next
// one a counted repeat), and a done row stays while a parked or dismissed
// row of its job stays and is not itself purged (were it gone,
// reprocessing that row would hand the job to the application again as
// new).
type PurgeStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// Clock reads the store's clock, which the retention is measured on.
	Clock(ctx context.Context) (time.Time, error)
	// CountPurgeable counts the rows of status st, never parked, that a
	// purge of sel deletes.
	CountPurgeable(ctx context.Context, sel PurgeSelection, st Status) (int64, error)
	// CountParkedPurgeable counts the parked rows a purge of sel deletes,
	// per reason.
	CountParkedPurgeable(ctx context.Context, sel PurgeSelection) (map[Reason]int64, error)
	// PurgeBatch deletes up to max of the rows of step that a purge of sel
	// deletes, and reports whether more may be left.
	PurgeBatch(ctx context.Context, sel PurgeSelection, step PurgeStep, max int) (n int64, more bool, err error)
	// KeptDone counts the done rows past retention a purge of sel keeps
	// beside parked rows.
	KeptDone(ctx context.Context, sel PurgeSelection) (int64, error)
	// KeptUnfinished counts the rows past retention whose work is
	// unfinished, which a purge keeps whatever it is asked: new rows
	// (waiting, retrying or in flight), and rows the dispatcher parked
	// unless their reason is in sel.Reasons.
	KeptUnfinished(ctx context.Context, sel PurgeSelection) (int64, error)
}

// Purger is what a Store answers of purging, made from a store's
// statements: a store embeds it.
type Purger struct{ store PurgeStore }

// NewPurger returns the purging of store.
func NewPurger(store PurgeStore) Purger { return Purger{store} }

// Purgeable counts what Purge would delete and keep, as the function
// Purgeable does.
func (p Purger) Purgeable(ctx context.Context, sel PurgeSelection) (PurgeReport, error) {
	return Purgeable(ctx, p.store, sel)
}

// Purge deletes the rows sel selects, as the function Purge does.
func (p Purger) Purge(ctx context.Context, sel PurgeSelection) (PurgeReport, error) {
	return Purge(ctx, p.store, sel)
}

// Purgeable counts, per status and per parked reason, the rows Purge would
// delete from store, and the rows it would keep. It fails as Purge does on
// a selection it refuses, and when the store cannot be read.
func Purgeable(ctx context.Context, store PurgeStore, sel PurgeSelection) (PurgeReport, error) {
	rep := newPurgeReport(sel)
	if err := checkPurge(ctx, store, sel); err != nil {
		return rep, err
	}
	for _, st := range sel.Statuses {
		n, err := store.CountPurgeable(ctx, sel, st)
		if err != nil {
			return rep, fmt.Errorf("count %s rows to purge: %w", st, err)
		}
		rep.Deleted[st] = n
	}
	if len(sel.Reasons) > 0 {
		counts, err := store.CountParkedPurgeable(ctx, sel)
		if err != nil {
			return rep, fmt.Errorf("count parked rows to purge: %w", err)
		}
		for r, n := range counts {
			rep.countDeleted(PurgeStep{Status: StatusParked, Reason: r}, n)
		}
	}
	return rep, kept(ctx, store, sel, &rep)
}

// Purge deletes the rows of store that sel selects, in transactions of at
// most purgeBatch rows, step by step (PurgeSelection.steps): parked rows
// past retention go first, and then the done rows they kept. It refuses
// what PurgeSelection.Check refuses at the store's clock, and a read-only
// store; on an error, the report says what earlier transactions deleted.
func Purge(ctx context.Context, store PurgeStore, sel PurgeSelection) (PurgeReport, error) {
	rep := newPurgeReport(sel)
	if err := checkPurge(ctx, store, sel); err != nil {
		return rep, err
	}
	if store.ReadOnly() {
		return rep, errors.New("purge: store is read-only")
	}
	for _, step := range sel.steps() {
		for more := true; more; {
			var n int64
			var err error
			n, more, err = store.PurgeBatch(ctx, sel, step, purgeBatch)
			rep.countDeleted(step, n)
			if err != nil {
				return rep, fmt.Errorf("purge %s rows: %w", step, err)
			}
		}
	}
	return rep, kept(ctx, store, sel, &rep)
}

// checkPurge refuses a selection a purge must never run
// (PurgeSelection.Check), at the store's clock: the clock of the machine
// the command runs on cannot shorten the retention.
func checkPurge(ctx context.Context, store PurgeStore, sel PurgeSelection) error {
	now, err := store.Clock(ctx)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return sel.Check(now)
}

// kept counts in rep the done rows past retention that a purge keeps
// beside parked rows, and the rows past retention it keeps as unfinished
// work.
func kept(ctx context.Context, store PurgeStore, sel PurgeSelection, rep *PurgeReport) error {
	if slices.Contains(sel.Statuses, StatusDone) {
		n, err := store.KeptDone(ctx, sel)
		if err != nil {
			return fmt.Errorf("count kept done rows: %w", err)
		}
		rep.KeptDone = n
	}
	n, err := store.KeptUnfinished(ctx, sel)
	if err != nil {
		return fmt.Errorf("count kept unfinished rows: %w", err)
	}
	rep.KeptUnfinished = n
	return nil
}
