package inbox

import (
	"context"
	"fmt"
	"time"
)

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

// The counts as every store makes them: a store implements only the
// statements (CountStore, Counts); turning what they count into Stats, a count of
// every status, and hour-long windows is here.

// CountStore is what a store implements of the counts, each one statement
// and its scan.
type CountStore interface {
	// CountRows counts the rows f selects, f.Limit aside.
	CountRows(ctx context.Context, f Filter) (int64, error)
	// CountReasons counts the rows f selects, f.Limit aside, per reason
	// they are parked with, their own or a pair's (only f.Destination's
	// when set; only f.Reason when set): a row parked with two reasons
	// counts under each. With the oldest and newest received_at of each:
	// most rows first, then by reason.
	CountReasons(ctx context.Context, f Filter) ([]ReasonCount, error)
	// CountGroups counts the rows of each source, status and reason ("" for
	// none), and the delivery attempts recorded on them, in one statement.
	CountGroups(ctx context.Context) ([]Group, error)
	// QueueNow reads the queue at the store's clock.
	QueueNow(ctx context.Context) (Queue, error)
	// CountStatuses counts the rows of each status that has any.
	CountStatuses(ctx context.Context) (map[Status]int64, error)
	// CountParkedAgo counts the rows f selects (f.Status parked) by when
	// they were parked (with f.Reason, at f.Destination, when set): the
	// row's updated_at, or its parked pair's, the latest of them. Only
	// those in [start, end), by how many whole hours before end: 0 for
	// [end-1h, end), 1 for the hour before, and so on.
	CountParkedAgo(ctx context.Context, f Filter, start, end time.Time) (map[int64]int64, error)
}

// Counts is what a Store answers of the counts, made from a store's
// statements: a store embeds it.
type Counts struct{ store CountStore }

// NewCounts returns the counts of store.
func NewCounts(store CountStore) Counts { return Counts{store} }

// Group is what CountGroups counts of one source, status and reason.
type Group struct {
	Source   string
	Status   Status
	Reason   Reason
	Rows     int64
	Attempts int64
}

// Count counts the store's rows f selects, f.Limit aside: what List
// would return without a limit. It fails only when the rows cannot be
// read.
func (c Counts) Count(ctx context.Context, f Filter) (int64, error) {
	n, err := c.store.CountRows(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// ParkedByReason counts the parked rows that f selects, one ReasonCount
// per reason, most rows first: a row parked by two destinations for two
// reasons counts under each. f.Status and f.Limit are ignored. It fails
// only when the rows cannot be read.
func (c Counts) ParkedByReason(ctx context.Context, f Filter) ([]ReasonCount, error) {
	f.Status = StatusParked
	out, err := c.store.CountReasons(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	return out, nil
}

// Stats counts the store's rows per status, reason and source in one
// statement, so the counts agree with each other, and reads the queue at
// the store's clock in another. It fails when either cannot be read.
func (c Counts) Stats(ctx context.Context) (Stats, error) {
	groups, err := c.store.CountGroups(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	st := newStats()
	for _, g := range groups {
		st.count(g)
	}
	if st.Queue, err = c.store.QueueNow(ctx); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// CountByStatus counts the store's rows of each status, every status included
// (zero when it has none). It fails when the rows cannot be counted.
func (c Counts) CountByStatus(ctx context.Context) (map[Status]int64, error) {
	got, err := c.store.CountStatuses(ctx)
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	counts := make(map[Status]int64, len(Statuses()))
	for _, st := range Statuses() {
		counts[st] = got[st]
	}
	return counts, nil
}

// ParkedPerHour counts the rows f selects that are parked and were parked
// (their updated_at: on receipt, or when the dispatcher gave up on them)
// in each of the hours hour-long windows that end at end, oldest first;
// an hour with none counts 0, and hours not above 0 count nothing.
// f.Status, f.Since, f.Before and f.Limit are ignored. A row parked again
// (reprocess) counts at its latest parking. It fails when the rows cannot
// be counted.
func (c Counts) ParkedPerHour(ctx context.Context, f Filter, end time.Time, hours int) ([]HourCount, error) {
	out := windows(end, hours)
	if out == nil {
		return nil, nil
	}
	f.Status, f.Since, f.Before, f.Limit = StatusParked, time.Time{}, time.Time{}, 0
	got, err := c.store.CountParkedAgo(ctx, f, out[0].Start, end)
	if err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	for ago, n := range got {
		if ago >= 0 && ago < int64(len(out)) {
			out[len(out)-1-int(ago)].Count = n
		}
	}
	return out, nil
}

// newStats returns Stats with every map made, counting nothing.
func newStats() Stats {
	return Stats{ByStatus: map[Status]int64{}, ByReason: map[Reason]int64{}, Attempts: map[Status]int64{},
		BySource: map[string]map[Status]int64{}}
}

// count adds g to st, which must come from newStats.
func (st *Stats) count(g Group) {
	if st.BySource[g.Source] == nil {
		st.BySource[g.Source] = map[Status]int64{}
	}
	st.BySource[g.Source][g.Status] += g.Rows
	st.ByStatus[g.Status] += g.Rows
	st.Attempts[g.Status] += g.Attempts
	// A dismissed row keeps its reason, but is no longer parked.
	if g.Status == StatusParked && g.Reason != "" {
		st.ByReason[g.Reason] += g.Rows
	}
}

// windows returns the hours hour-long windows that end at end, oldest
// first, each counting 0; nil when hours is not above 0. Times are kept to
// the millisecond, in UTC, as the stores keep them.
func windows(end time.Time, hours int) []HourCount {
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
