package inbox_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"inbox/inbox"
)

// TestStatsCount counts rows by status, source and reason, and their
// attempts; a row with no reason counts under none.
func TestStatsCount(t *testing.T) {
	st := inbox.NewStats()
	st.Count(inbox.Group{Source: "sume", Status: inbox.StatusNew, Reason: "", Rows: 3, Attempts: 1})
	st.Count(inbox.Group{Source: "sume", Status: inbox.StatusParked, Reason: inbox.ReasonConflict, Rows: 2, Attempts: 0})
	st.Count(inbox.Group{Source: "vibe", Status: inbox.StatusParked, Reason: inbox.ReasonConflict, Rows: 1, Attempts: 4})
	st.Count(inbox.Group{Source: "vibe", Status: inbox.StatusDone, Reason: "", Rows: 5, Attempts: 5})
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

// hoursAgo is a CountStore whose CountParkedAgo counts ago, and keeps
// what it was asked.
type hoursAgo struct {
	inbox.CountStore
	ago        map[int64]int64
	f          inbox.Filter
	start, end time.Time
}

func (h *hoursAgo) CountParkedAgo(_ context.Context, f inbox.Filter, start, end time.Time) (map[int64]int64, error) {
	h.f, h.start, h.end = f, start, end
	return h.ago, nil
}

// TestParkedPerHour lays out the windows that end at end, oldest first, to
// the millisecond in UTC, asks the store for the parked rows of the filter
// in them alone, and places each count by how many hours before the last
// window it lies, passing over what falls outside.
func TestParkedPerHour(t *testing.T) {
	ctx := context.Background()
	if got, err := inbox.NewCounts(&hoursAgo{}).ParkedPerHour(ctx, inbox.Filter{}, time.Now(), 0); got != nil || err != nil {
		t.Errorf("0 hours: got %v, %v; want nil", got, err)
	}
	end := time.Date(2025, 6, 1, 12, 30, 0, 1_500_000, time.FixedZone("X", 3600))
	store := &hoursAgo{ago: map[int64]int64{0: 7, 2: 5, 3: 99, -1: 99}}
	hs, err := inbox.NewCounts(store).ParkedPerHour(ctx, inbox.Filter{Source: "vibe", Since: end, Limit: 3}, end, 3)
	if err != nil || len(hs) != 3 {
		t.Fatalf("3 hours: got %d windows, %v", len(hs), err)
	}
	first := time.Date(2025, 6, 1, 8, 30, 0, 1_000_000, time.UTC)
	for i, h := range hs {
		if want := first.Add(time.Duration(i) * time.Hour); !h.Start.Equal(want) || h.Start.Location() != time.UTC {
			t.Errorf("window %d: got %v, want %v", i, h.Start, want)
		}
	}
	if got := []int64{hs[0].Count, hs[1].Count, hs[2].Count}; !reflect.DeepEqual(got, []int64{5, 0, 7}) {
		t.Errorf("counts: got %v, want [5 0 7]", got)
	}
	if want := (inbox.Filter{Source: "vibe", Status: inbox.StatusParked}); store.f != want || !store.start.Equal(first) || !store.end.Equal(end) {
		t.Errorf("asked for %+v in [%v, %v); want %+v in [%v, %v)", store.f, store.start, store.end, want, first, end)
	}
}
