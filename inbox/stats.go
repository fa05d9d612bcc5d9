package inbox

import "time"

// Stats counts rows per status and parked rows per reason, the delivery
// attempts recorded on rows, and the queue of new rows.
type Stats struct {
	ByStatus map[Status]int64 `json:"by_status"`
	ByReason map[Reason]int64 `json:"parked_by_reason"`
	// Attempts sums the delivery attempts recorded on rows, by their status
	// now: on done rows, what it took to hand them on; on parked rows, what
	// was tried before giving up.
	Attempts map[Status]int64 `json:"attempts_by_status"`
	// BySource counts rows per source and status.
	BySource map[string]map[Status]int64 `json:"by_source"`
	Queue    Queue                       `json:"queue"`
}

// ReasonCount is how many parked rows share a reason, and when the oldest
// and the newest of them were received.
type ReasonCount struct {
	Reason Reason    `json:"reason"`
	Count  int64     `json:"count"`
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`
}

// HourCount is how many rows were parked in one hour-long window, the hour
// starting at Start.
type HourCount struct {
	Start time.Time `json:"hour"`
	Count int64     `json:"count"`
}

// SecretUse is when one configured secret of a source last verified a
// delivery. The secret is named by its fingerprint, never by itself.
type SecretUse struct {
	Source       string    `json:"source"`
	Fingerprint  string    `json:"fingerprint"`
	LastVerified time.Time `json:"last_verified_at"`
}
