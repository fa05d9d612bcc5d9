package inbox

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Routing is the destination table one dispatcher routes new rows by, as
// it last recorded it (Store.RecordRouting): each dispatcher records its
// own at start, at each reload and every RoutingBeat, so that a
// destination no running dispatcher has, and two dispatchers routing by
// different tables, can be found and said.
type Routing struct {
	Owner  string    `json:"owner"`
	Routes []Route   `json:"routes"`
	SeenAt time.Time `json:"seen_at"`
}

// RoutingBeat is how often a running dispatcher records its routing
// again; a routing not recorded for RoutingLive is of a dispatcher gone
// (killed, or on a machine cut off).
const (
	RoutingBeat = 5 * time.Second
	RoutingLive = 30 * time.Second
)

// EncodeRoutes is routes as a store keeps them: JSON, sorted by name, each
// route's sources and events sorted, so that two equal tables encode the
// same.
func EncodeRoutes(routes []Route) string {
	rs := make([]Route, len(routes))
	for i, r := range routes {
		rs[i] = Route{Name: r.Name, Sources: slices.Sorted(slices.Values(r.Sources)), Events: slices.Sorted(slices.Values(r.Events))}
	}
	slices.SortFunc(rs, func(a, b Route) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(rs)
	if err != nil {
		panic(err) // strings only
	}
	return string(b)
}

// DecodeRoutes reads what EncodeRoutes wrote; it fails on anything else.
func DecodeRoutes(s string) ([]Route, error) {
	var rs []Route
	if err := json.Unmarshal([]byte(s), &rs); err != nil {
		return nil, fmt.Errorf("read a routing: %w", err)
	}
	return rs, nil
}

// ReadRouting is the routing a store read: owner, its routes as
// EncodeRoutes wrote them, and when it was seen in Unix milliseconds. It
// fails as DecodeRoutes does.
func ReadRouting(owner, routes string, seenAt int64) (Routing, error) {
	rs, err := DecodeRoutes(routes)
	if err != nil {
		return Routing{}, err
	}
	return Routing{Owner: owner, Routes: rs, SeenAt: time.UnixMilli(seenAt).UTC()}, nil
}

// RouteNames returns the names of routes, sorted.
func RouteNames(routes []Route) []string {
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Name
	}
	slices.Sort(names)
	return names
}

// Stranded is a destination with unfinished pairs that no running
// dispatcher routes to: its pairs wait until one has it again.
type Stranded struct {
	Name string `json:"destination"`
	New  int64  `json:"unfinished"`
}

// StrandedDestinations returns the destinations of stats with new pairs
// that none of names has, by name.
func StrandedDestinations(stats []DestinationStats, names []string) []Stranded {
	var out []Stranded
	for _, d := range stats {
		if n := d.ByStatus[StatusNew]; n > 0 && !slices.Contains(names, d.Name) {
			out = append(out, Stranded{Name: d.Name, New: n})
		}
	}
	return out
}

// RoutingTable is one destination table, each destination said with its
// filters ("crm (events job.completed)"), and the dispatchers routing by
// it. Two live dispatchers routing by different tables hand a row to the
// destinations of whichever routed it, so a destination only one of them
// has gets only some of the rows.
type RoutingTable struct {
	Destinations []string `json:"destinations"`
	Owners       []string `json:"dispatchers"`
}

// ConflictingRoutings returns the distinct tables of rs when there are
// more than one, tables sorted by their encoding; nil when every
// routing agrees.
func ConflictingRoutings(rs []Routing) []RoutingTable {
	by := map[string]*RoutingTable{}
	for _, r := range rs {
		enc := EncodeRoutes(r.Routes)
		t, ok := by[enc]
		if !ok {
			t = &RoutingTable{Destinations: describeRoutes(r.Routes)}
			by[enc] = t
		}
		t.Owners = append(t.Owners, r.Owner)
	}
	if len(by) < 2 {
		return nil
	}
	var out []RoutingTable
	for _, k := range slices.Sorted(maps.Keys(by)) {
		t := by[k]
		slices.Sort(t.Owners)
		out = append(out, *t)
	}
	return out
}

// describeRoutes says each route as its name and its filters.
func describeRoutes(routes []Route) []string {
	rs, _ := DecodeRoutes(EncodeRoutes(routes))
	out := make([]string, len(rs))
	for i, r := range rs {
		var f []string
		if len(r.Sources) > 0 {
			f = append(f, "sources "+strings.Join(r.Sources, ","))
		}
		if len(r.Events) > 0 {
			f = append(f, "events "+strings.Join(r.Events, ","))
		}
		out[i] = r.Name
		if len(f) > 0 {
			out[i] += " (" + strings.Join(f, "; ") + ")"
		}
	}
	return out
}

// LiveNames returns the destination names of the routings, sorted, each
// once.
func LiveNames(rs []Routing) []string {
	var names []string
	for _, r := range rs {
		names = append(names, RouteNames(r.Routes)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
