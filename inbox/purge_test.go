package inbox_test

import (
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// TestPurgeSelectionCheck runs the selections a purge refuses, and takes,
// at one clock: every store refuses the same ones with the same words.
func TestPurgeSelectionCheck(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-inbox.MinRetention)
	tests := []struct {
		name string
		sel  inbox.PurgeSelection
		want string // "" for none
	}{
		{"the shortest retention", inbox.PurgeSelection{Before: old, Statuses: []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}}, ""},
		{"parked by reason", inbox.PurgeSelection{Before: old, Reasons: []inbox.Reason{inbox.ReasonConflict}}, ""},
		{"a retention a millisecond short", inbox.PurgeSelection{Before: old.Add(time.Millisecond), Statuses: []inbox.Status{inbox.StatusDone}}, "a retention under 7d"},
		{"new rows", inbox.PurgeSelection{Before: old, Statuses: []inbox.Status{inbox.StatusNew}}, "new rows are never purged"},
		{"parked by status", inbox.PurgeSelection{Before: old, Statuses: []inbox.Status{inbox.StatusParked}}, "parked rows are chosen by reason"},
		{"an unknown status", inbox.PurgeSelection{Before: old, Statuses: []inbox.Status{"gone"}}, `unknown status "gone"`},
		{"an unknown reason", inbox.PurgeSelection{Before: old, Reasons: []inbox.Reason{"lost"}}, `unknown reason "lost"`},
	}
	for _, tt := range tests {
		err := tt.sel.Check(now)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestPurgeReportCountParked counts parked rows under their reason and
// among the parked rows, from a report that lists every selected one.
func TestPurgeReportCountParked(t *testing.T) {
	rep := inbox.NewPurgeReport(inbox.PurgeSelection{Statuses: []inbox.Status{inbox.StatusDone},
		Reasons: []inbox.Reason{inbox.ReasonConflict, inbox.ReasonUnknownEvent}})
	rep.CountParked(inbox.ReasonConflict, 3)
	rep.CountParked(inbox.ReasonConflict, 2)
	rep.CountParked(inbox.ReasonUnknownEvent, 1)
	if rep.DeletedParked[inbox.ReasonConflict] != 5 || rep.DeletedParked[inbox.ReasonUnknownEvent] != 1 ||
		rep.Deleted[inbox.StatusParked] != 6 || rep.Deleted[inbox.StatusDone] != 0 || len(rep.Deleted) != 2 {
		t.Errorf("got %+v", rep)
	}
}
