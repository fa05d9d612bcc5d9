package inbox

import "time"

// Filter selects rows for List, Count and the parked counts. Zero fields
// do not filter.
type Filter struct {
	Source string
	Status Status
	Reason Reason
	Since  time.Time // received at or after
	Before time.Time // received before
	Limit  int
}
