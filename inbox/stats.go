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

// NewStats returns Stats with every map made, counting nothing.
func NewStats() Stats {
	return Stats{ByStatus: map[Status]int64{}, ByReason: map[Reason]int64{}, Attempts: map[Status]int64{},
		BySource: map[string]map[Status]int64{}}
}

// Count counts n rows of source with status and reason ("" for none), on
// which attempts delivery attempts are recorded. st must come from
// NewStats.
func (st *Stats) Count(source string, status Status, reason Reason, n, attempts int64) {
	if st.BySource[source] == nil {
		st.BySource[source] = map[Status]int64{}
	}
	st.BySource[source][status] += n
	st.ByStatus[status] += n
	st.Attempts[status] += attempts
	if reason != "" {
		st.ByReason[reason] += n
	}
}

// Hours returns the hours hour-long windows that end at end, oldest
// first, each counting 0; nil when hours is not above 0. The first one's
// Start is where a store's count begins. Times are kept to the
// millisecond, in UTC, as the stores keep them.
func Hours(end time.Time, hours int) []HourCount {
	if hours <= 0 {
		return nil
	}
	end = time.UnixMilli(end.UnixMilli()).UTC()
	out := make([]HourCount, hours)
	start := end.Add(-time.Duration(hours) * time.Hour)
	for i := range out {
		out[i].Start = start.Add(time.Duration(i) * time.Hour)
	}
	return out
}

// CountAgo sets the count of the window ago hours before the last one of
// hs (0 for the last, [end-1h, end)) to n; an ago outside hs is passed
// over.
func CountAgo(hs []HourCount, ago, n int64) {
	if ago >= 0 && ago < int64(len(hs)) {
		hs[len(hs)-1-int(ago)].Count = n
	}
}
