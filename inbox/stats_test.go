package inbox_test

import (
	"reflect"
	"testing"
	"time"

	"inbox/inbox"
)

// TestStatsCount counts rows by status, source and reason, and their
// attempts; a row with no reason counts under none.
func TestStatsCount(t *testing.T) {
	st := inbox.NewStats()
	st.Count("sume", inbox.StatusNew, "", 3, 1)
	st.Count("sume", inbox.StatusParked, inbox.ReasonConflict, 2, 0)
	st.Count("vibe", inbox.StatusParked, inbox.ReasonConflict, 1, 4)
	st.Count("vibe", inbox.StatusDone, "", 5, 5)
	want := inbox.Stats{
		ByStatus: map[inbox.Status]int64{inbox.StatusNew: 3, inbox.StatusParked: 3, inbox.StatusDone: 5},
		ByReason: map[inbox.Reason]int64{inbox.ReasonConflict: 3},
		Attempts: map[inbox.Status]int64{inbox.StatusNew: 1, inbox.StatusParked: 4, inbox.StatusDone: 5},
		BySource: map[string]map[inbox.Status]int64{
			"sume": {inbox.StatusNew: 3, inbox.StatusParked: 2},
			"vibe": {inbox.StatusParked: 1, inbox.StatusDone: 5},
		},
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("got %+v\nwant %+v", st, want)
	}
}

// TestHours lays out the windows that end at end, oldest first, to the
// millisecond in UTC, and places each count by how many hours before the
// last window it lies, passing over what falls outside.
func TestHours(t *testing.T) {
	if got := inbox.Hours(time.Now(), 0); got != nil {
		t.Errorf("Hours(0): got %v, want nil", got)
	}
	end := time.Date(2025, 6, 1, 12, 30, 0, 1_500_000, time.FixedZone("X", 3600))
	hs := inbox.Hours(end, 3)
	if len(hs) != 3 {
		t.Fatalf("Hours(3): got %d windows", len(hs))
	}
	first := time.Date(2025, 6, 1, 8, 30, 0, 1_000_000, time.UTC)
	for i, h := range hs {
		if want := first.Add(time.Duration(i) * time.Hour); !h.Start.Equal(want) || h.Start.Location() != time.UTC || h.Count != 0 {
			t.Errorf("window %d: got %v %d, want %v 0", i, h.Start, h.Count, want)
		}
	}
	inbox.CountAgo(hs, 0, 7)
	inbox.CountAgo(hs, 2, 5)
	inbox.CountAgo(hs, 3, 99)
	inbox.CountAgo(hs, -1, 99)
	if got := []int64{hs[0].Count, hs[1].Count, hs[2].Count}; !reflect.DeepEqual(got, []int64{5, 0, 7}) {
		t.Errorf("counts: got %v, want [5 0 7]", got)
	}
}
