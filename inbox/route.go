package inbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultDestination names the one destination the single-destination
// flags (--forward-url, --exec, --nats-url) configure, and the destination
// whose state an older database's rows keep when it migrates.
const DefaultDestination = "default"

// Route names a destination and the rows it takes: those of Sources and
// Events (an empty list takes all).
type Route struct {
	Name    string   `json:"name"`
	Sources []string `json:"sources,omitempty"`
	Events  []string `json:"events,omitempty"`
}

// Takes reports whether r's filters match a row of source and event.
func (r Route) Takes(source, event string) bool {
	if source == "" {
		source = DefaultSource
	}
	return (len(r.Sources) == 0 || slices.Contains(r.Sources, source)) &&
		(len(r.Events) == 0 || slices.Contains(r.Events, event))
}

// CheckRoutes refuses routes no store may take: none, a destination with
// no name or a name given twice.
func CheckRoutes(routes []Route) error {
	if len(routes) == 0 {
		return errors.New("no destination")
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Name == "" {
			return errors.New("a destination has no name")
		}
		if seen[r.Name] {
			return fmt.Errorf("destination %q is named twice", r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// Unrouted is a new row not yet matched to its destinations: a row stored
// (or revived, or reprocessed) since a dispatcher last routed.
type Unrouted struct {
	ID, Source, Event string
}

// Pair is one (row, destination) pair of the queue.
type Pair struct {
	ID, Destination string
}

// maxRoute bounds the rows one claim routes past those it takes.
const maxRoute = 512

// route matches unrouted rows to routes in tx, at now, oldest first: each
// gets a pair for every destination whose filters take it (a parked pair
// of a revived row becomes new again, a done one stays done). It routes
// as many rows as give dest want pairs, the claim beside it in the
// transaction, and when those give fewer (dest's filters pass over most
// rows, or dest is paused or gone from routes) up to maxRoute rows, so
// that rows only other destinations take, or none does, still leave at
// that pace. Routing no further ahead than the claim is what lets one
// mirror at the end of the transaction cover a row routed and claimed:
// a row routed ahead is mirrored again by the claim that takes it later,
// and a mirror writes the whole row. It returns the rows it routed, for
// the caller to mirror: a row no destination takes is then done, and each
// is marked routed. A destination configured later therefore gets only
// the rows routed after it was, and a revived or reprocessed row.
func route(tx QueueTx, routes []Route, now time.Time, dest string, want int) (ids []string, err error) {
	rows, err := tx.Unrouted(want)
	if err != nil {
		return nil, err
	}
	if len(rows) == want && want < maxRoute && pairsFor(rows, routes, dest) < want {
		// Unrouted reads from the oldest again, the rows above with them
		// (still unrouted until the mirror).
		if rows, err = tx.Unrouted(maxRoute); err != nil {
			return nil, err
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var pairs []Pair
	ids = make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
		for _, rt := range routes {
			if rt.Takes(r.Source, r.Event) {
				pairs = append(pairs, Pair{ID: r.ID, Destination: rt.Name})
			}
		}
	}
	if err := tx.AddPairs(pairs, now); err != nil {
		return nil, err
	}
	return ids, nil
}

// pairsFor counts the rows of rows that dest's route takes.
func pairsFor(rows []Unrouted, routes []Route, dest string) int {
	i := slices.IndexFunc(routes, func(r Route) bool { return r.Name == dest })
	if i < 0 {
		return 0
	}
	n := 0
	for _, r := range rows {
		if routes[i].Takes(r.Source, r.Event) {
			n++
		}
	}
	return n
}

// Pairing is where a row stands with one destination.
type Pairing struct {
	Destination   string    `json:"destination"`
	Status        Status    `json:"status"` // new, done or parked
	Reason        Reason    `json:"reason,omitempty"`
	Attempts      int64     `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	LeaseOwner    string    `json:"lease_owner,omitempty"`
	LeaseUntil    time.Time `json:"lease_until,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
	DoneAt        time.Time `json:"done_at,omitzero"`
	// Earlier holds the series a replay replaced, oldest first.
	Earlier []Series `json:"earlier,omitempty"`
}

// DestinationStats counts one destination's pairs by status, and says
// whether an operator paused it.
type DestinationStats struct {
	Name     string           `json:"name"`
	Paused   bool             `json:"paused"`
	ByStatus map[Status]int64 `json:"by_status"`
	InFlight int64            `json:"in_flight"`
	Retrying int64            `json:"retrying"`
}

// DestinationCount is one destination's pairs of one status, as a store
// counts them.
type DestinationCount struct {
	Name               string
	Status             Status
	N                  int64
	InFlight, Retrying int64
}

// TallyDestinations turns a store's counts and paused destinations into
// DestinationStats, by name.
func TallyDestinations(counts []DestinationCount, paused []string) []DestinationStats {
	by := map[string]*DestinationStats{}
	get := func(name string) *DestinationStats {
		d, ok := by[name]
		if !ok {
			d = &DestinationStats{Name: name, ByStatus: map[Status]int64{}}
			by[name] = d
		}
		return d
	}
	for _, c := range counts {
		d := get(c.Name)
		d.ByStatus[c.Status] += c.N
		d.InFlight += c.InFlight
		d.Retrying += c.Retrying
	}
	for _, p := range paused {
		get(p).Paused = true
	}
	out := make([]DestinationStats, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b DestinationStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}
