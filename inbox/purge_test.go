package inbox_test

import (
	"reflect"
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

// TestPurgeSteps: a purge deletes the parked rows of each reason first,
// then ignored, then done rows, each only when selected, and counts each
// pass under its status and, for parked rows, its reason.
func TestPurgeSteps(t *testing.T) {
	sel := inbox.PurgeSelection{Statuses: []inbox.Status{inbox.StatusDone, inbox.StatusIgnored},
		Reasons: []inbox.Reason{inbox.ReasonConflict, inbox.ReasonUnknownEvent}}
	var got []string
	for _, s := range sel.Steps() {
		got = append(got, s.String())
	}
	if want := []string{"parked conflict", "parked unknown_event", "ignored", "done"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Steps: got %q, want %q", got, want)
	}
	if got := (inbox.PurgeSelection{Statuses: []inbox.Status{inbox.StatusDone}}).Steps(); !reflect.DeepEqual(got, []inbox.PurgeStep{{Status: inbox.StatusDone}}) {
		t.Errorf("done only: got %v", got)
	}

	rep := inbox.NewPurgeReport(sel)
	rep.CountDeleted(inbox.PurgeStep{Status: inbox.StatusParked, Reason: inbox.ReasonConflict}, 3)
	rep.CountDeleted(inbox.PurgeStep{Status: inbox.StatusParked, Reason: inbox.ReasonConflict}, 2)
	rep.CountDeleted(inbox.PurgeStep{Status: inbox.StatusParked, Reason: inbox.ReasonUnknownEvent}, 1)
	rep.CountDeleted(inbox.PurgeStep{Status: inbox.StatusDone}, 4)
	if rep.DeletedParked[inbox.ReasonConflict] != 5 || rep.DeletedParked[inbox.ReasonUnknownEvent] != 1 || len(rep.DeletedParked) != 2 ||
		rep.Deleted[inbox.StatusParked] != 6 || rep.Deleted[inbox.StatusDone] != 4 || rep.Deleted[inbox.StatusIgnored] != 0 || len(rep.Deleted) != 3 {
		t.Errorf("got %+v", rep)
	}
}
