package inbox_test

import (
	"testing"

	"inbox/inbox"
)

func TestRoutingTables(t *testing.T) {
	a := []inbox.Route{{Name: "crm", Events: []string{"job.failed", "job.completed"}}, {Name: "app", Sources: []string{"sume"}}}
	// The same table, written in another order.
	b := []inbox.Route{{Name: "app", Sources: []string{"sume"}}, {Name: "crm", Events: []string{"job.completed", "job.failed"}}}
	if inbox.EncodeRoutes(a) != inbox.EncodeRoutes(b) {
		t.Fatalf("equal tables encode apart: %s, %s", inbox.EncodeRoutes(a), inbox.EncodeRoutes(b))
	}
	if c := inbox.ConflictingRoutings([]inbox.Routing{{Owner: "x", Routes: a}, {Owner: "y", Routes: b}}); c != nil {
		t.Errorf("equal tables conflict: %+v", c)
	}
	// A filter changed is a different table, as a name is.
	narrowed := []inbox.Route{{Name: "app", Sources: []string{"sume"}}, {Name: "crm", Events: []string{"job.completed"}}}
	c := inbox.ConflictingRoutings([]inbox.Routing{{Owner: "x", Routes: a}, {Owner: "y", Routes: narrowed}, {Owner: "z", Routes: b}})
	if len(c) != 2 {
		t.Fatalf("conflicts = %+v, want two tables", c)
	}
	var owners []string
	for _, tb := range c {
		owners = append(owners, tb.Owners...)
		for _, d := range tb.Destinations {
			if d == "crm (events job.completed)" && len(tb.Owners) != 1 {
				t.Errorf("the narrowed table's dispatchers = %v, want y alone", tb.Owners)
			}
		}
	}
	if len(owners) != 3 {
		t.Errorf("owners = %v, want x, y and z", owners)
	}
	stats := []inbox.DestinationStats{
		{Name: "app", ByStatus: map[inbox.Status]int64{inbox.StatusNew: 3}},
		{Name: "gone", ByStatus: map[inbox.Status]int64{inbox.StatusNew: 20, inbox.StatusDone: 5}},
		{Name: "old", ByStatus: map[inbox.Status]int64{inbox.StatusDone: 9}},
	}
	got := inbox.StrandedDestinations(stats, inbox.LiveNames([]inbox.Routing{{Owner: "x", Routes: a}}))
	if len(got) != 1 || got[0] != (inbox.Stranded{Name: "gone", New: 20}) {
		t.Errorf("stranded = %+v, want gone with 20", got)
	}
}
