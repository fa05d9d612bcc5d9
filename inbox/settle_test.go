package inbox_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// TestCheckSettle runs the calls every store refuses before it writes.
func TestCheckSettle(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	claimed := inbox.Job{ID: "j1", Attempt: 1}
	started := inbox.MarkStarted(claimed)
	claim := inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: 10}
	tests := []struct {
		name  string
		owner string
		st    []inbox.Settlement
		claim inbox.Claim
		want  string // "" for none
	}{
		{"every fate", "d1", []inbox.Settlement{
			{Job: started, Fate: inbox.FateDone}, {Job: started, Fate: inbox.FateRetry},
			{Job: started, Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed},
			{Job: claimed, Fate: inbox.FateRelease},
		}, claim, ""},
		{"no claim, no lease", "d1", nil, inbox.Claim{}, ""},
		{"no owner", "", nil, claim, "no owner"},
		{"a lease ending at its start", "d1", nil, inbox.Claim{Now: now, Until: now, Max: 1}, "is not after"},
		{"an unknown fate", "d1", []inbox.Settlement{{Job: started, Fate: 99}}, claim, "settle j1: unknown fate 99"},
		{"a park without a reason", "d1", []inbox.Settlement{{Job: started, Fate: inbox.FatePark}}, claim, `park j1: unknown reason ""`},
		{"a park of an unknown reason", "d1", []inbox.Settlement{{Job: started, Fate: inbox.FatePark, Reason: "lost"}}, claim, `unknown reason "lost"`},
		{"a release of a started attempt", "d1", []inbox.Settlement{{Job: started, Fate: inbox.FateRelease}}, claim, "release j1: attempt 1 has started"},
	}
	for _, tt := range tests {
		err := inbox.CheckSettle(tt.owner, tt.st, tt.claim)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestStartable starts each row once, none started already, in the order
// given, and refuses a lease that does not end after now.
func TestStartable(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	a, b, c := inbox.Job{ID: "a", Attempt: 1}, inbox.Job{ID: "b", Attempt: 2}, inbox.Job{ID: "c", Attempt: 1}
	got, err := inbox.Startable([]inbox.Job{b, a, b, inbox.MarkStarted(c), a}, now, now.Add(time.Second))
	if err != nil || !reflect.DeepEqual(got, []inbox.Job{b, a}) {
		t.Errorf("got %v, %v; want [b a]", got, err)
	}
	if got, err := inbox.Startable(nil, now, now); got != nil || err != nil {
		t.Errorf("no jobs: got %v, %v", got, err)
	}
	if _, err := inbox.Startable([]inbox.Job{a}, now, now); err == nil || !strings.Contains(err.Error(), "is not after") {
		t.Errorf("a lease ending at now: got %v", err)
	}
}
