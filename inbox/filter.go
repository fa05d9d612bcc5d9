package inbox

import "time"

// Filter selects rows for List, Count and the parked counts. Zero fields
// do not filter.
type Filter struct {
	Source    string
	Status    Status
	Reason    Reason
	Event     string    // the body's event name, exactly
	JobStatus string    // the job status the row holds (COMPLETED, ERROR, ...), exactly
	Since     time.Time // received at or after
	Before    time.Time // received before
	// Destination selects the rows routed to this destination: those with
	// a (row, destination) pair for it, whatever its state.
	Destination string
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
