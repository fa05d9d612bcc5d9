package inbox

import (
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
// before Before with one of Statuses (done, ignored), and the parked ones
// with one of Reasons.
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

// NewPurgeReport is the report of a purge of sel that deleted nothing yet:
// every selected status and reason counted at zero.
func NewPurgeReport(sel PurgeSelection) PurgeReport {
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

// Steps returns the passes a purge of sel makes, in order: the parked rows
// of each of sel.Reasons first, then the ignored rows, then the done rows,
// each when selected. A done row stays while a parked row of its job
// stays, so it goes only once the parked rows beside it have gone.
func (sel PurgeSelection) Steps() []PurgeStep {
	var steps []PurgeStep
	for _, r := range sel.Reasons {
		steps = append(steps, PurgeStep{Status: StatusParked, Reason: r})
	}
	for _, st := range []Status{StatusIgnored, StatusDone} {
		if slices.Contains(sel.Statuses, st) {
			steps = append(steps, PurgeStep{Status: st})
		}
	}
	return steps
}

// CountDeleted counts n rows deleted by step: under its status, and for
// parked rows under their reason too.
func (r *PurgeReport) CountDeleted(step PurgeStep, n int64) {
	r.Deleted[step.Status] += n
	if step.Status == StatusParked {
		r.DeletedParked[step.Reason] += n
	}
}
