package inbox

import "time"

// Filter selects rows for List, Count and the parked counts. Zero fields
// do not filter.
//
// Status and Reason look at each (row, destination) pair's own state
// wherever a row has pairs: every destination parks its own pair, and
// the row itself holds the reason of the pair that settled last, so a
// reason one destination parked with would be hidden by another's.
//
//   - With Destination, Status and Reason are the row's pair for it: a
//     row matches when that pair is of Status and parked with Reason.
//   - Without, Status parked or a Reason matches a row that is itself
//     parked (with Reason) or any of whose pairs is parked (with Reason),
//     a row still new for another destination included. A reason only a
//     landing parks with (Reason.OnReceipt) is the row's alone.
//   - Any other Status, without Destination, is the row's own; with
//     Status dismissed, Reason is the one the row kept.
type Filter struct {
	Source    string
	Status    Status
	Reason    Reason
	Event     string    // the body's event name, exactly
	JobStatus string    // the job status the row holds (COMPLETED, ERROR, ...), exactly
	Since     time.Time // received at or after
	Before    time.Time // received before
	// Destination selects the rows routed to this destination: those with
	// a (row, destination) pair for it, of Status and Reason when given.
	Destination string
	// Job selects the rows of the job whose row id is Job (an Event's
	// JobID): its own row and the rows kept beside it, a delivery that
	// could not take it (a conflict, a poison repeat) keyed by its bytes.
	Job string
	// Contains selects the rows whose body holds these bytes, compared
	// byte for byte: no wildcard, no case folding, any byte (NUL, bytes
	// that are not UTF-8). Only the newest ScanLimit rows the other fields
	// select are searched, so a search on a large inbox stays bounded;
	// ScanLimit 0 searches them all.
	Contains  string // a string for its bytes: Filter stays comparable
	ScanLimit int
	Limit     int
}

// Scan returns f without Contains: the rows a search by f looks through,
// of which it searches the newest f.ScanLimit.
func (f Filter) Scan() Filter {
	f.Contains, f.ScanLimit = "", 0
	return f
}

// ByParkedPairs reports whether f, without Destination, selects rows by
// their pairs' parked state as well as their own: Status parked, or a
// Reason a pair may be parked with and no Status dismissed (a dismissed
// row keeps its reason, its own).
func (f Filter) ByParkedPairs() bool {
	return f.Destination == "" && (f.Status == StatusParked || f.Reason != "" && f.Status != StatusDismissed) && !f.Reason.OnReceipt()
}

// OnReceipt reports whether r is a reason only a landing parks a row with
// (Classify's), before any destination has it: no (row, destination)
// pair is ever parked with it. A reason not known here is taken as one a
// pair may hold.
func (r Reason) OnReceipt() bool {
	switch r {
	case ReasonUnparseable, ReasonMissingJobID, ReasonUnknownEvent, ReasonPayloadTooLarge,
		ReasonTooLarge, ReasonConflict, ReasonMissingKey:
		return true
	}
	return false
}
