package inbox_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"inbox/inbox"
)

// TestExpectationAsOf: overdue only while waiting at or past the due time;
// a next poll time only while waiting.
func TestExpectationAsOf(t *testing.T) {
	due := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	next := due.Add(time.Minute)
	tests := []struct {
		state       inbox.ExpectState
		now         time.Time
		overdue     bool
		keepsPollAt bool
	}{
		{inbox.ExpectWaiting, due.Add(-time.Millisecond), false, true},
		{inbox.ExpectWaiting, due, true, true},
		{inbox.ExpectWaiting, due.Add(time.Hour), true, true},
		{inbox.ExpectDone, due.Add(time.Hour), false, false},
		{inbox.ExpectClosed, due.Add(time.Hour), false, false},
	}
	for _, tt := range tests {
		e := inbox.Expectation{State: tt.state, DueAt: due, NextPollAt: next, Overdue: !tt.overdue}.AsOf(tt.now)
		if e.Overdue != tt.overdue || e.NextPollAt.Equal(next) != tt.keepsPollAt || !tt.keepsPollAt && !e.NextPollAt.IsZero() {
			t.Errorf("%s at %s: got overdue %v, next poll %v", tt.state, tt.now, e.Overdue, e.NextPollAt)
		}
	}
}

// TestPollResultRules: the fates a store takes, the error kept (bounded,
// cut on a character) and the reason a close records.
func TestPollResultRules(t *testing.T) {
	ok := []inbox.PollResult{{Fate: inbox.PollAgain}, {Fate: inbox.PollRedelivered}, {Fate: inbox.PollClose}}
	if err := inbox.CheckPollResults(ok); err != nil {
		t.Errorf("every fate: %v", err)
	}
	bad := append(ok, inbox.PollResult{Poll: inbox.Poll{JobID: "j9"}, Fate: 0})
	if err := inbox.CheckPollResults(bad); err == nil || !strings.Contains(err.Error(), "settle poll of j9: unknown fate 0") {
		t.Errorf("an unknown fate: got %v", err)
	}
	for _, tt := range []struct {
		err     string
		wantLen int
	}{
		{"", 0},
		{"timeout", 7},
		{strings.Repeat("a", inbox.MaxPollError), inbox.MaxPollError},
		{strings.Repeat("a", inbox.MaxPollError+1), inbox.MaxPollError + 3},
		// A three-byte character across the bound is dropped whole.
		{strings.Repeat("a", inbox.MaxPollError-1) + "€tail", inbox.MaxPollError - 1 + 3},
	} {
		got := inbox.PollResult{Error: tt.err}.KeptError()
		if len(got) != tt.wantLen || !utf8.ValidString(got) || len(tt.err) > inbox.MaxPollError && !strings.HasSuffix(got, "...") {
			t.Errorf("KeptError of %d bytes: got %d bytes %q..., want %d", len(tt.err), len(got), got[:min(len(got), 10)], tt.wantLen)
		}
	}
	if got := (inbox.PollResult{}).CloseReason(); got != "closed" {
		t.Errorf("CloseReason with none: got %q", got)
	}
	if got := (inbox.PollResult{Reason: "unknown job"}).CloseReason(); got != "unknown job" {
		t.Errorf("CloseReason: got %q", got)
	}
}

// TestRefusalNormalized: a refusal is recorded of the default source, at
// least once, never last before first.
func TestRefusalNormalized(t *testing.T) {
	first := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r := inbox.Refusal{Key: "j1", First: first, Last: first.Add(-time.Hour)}.Normalized()
	if r.Source != inbox.DefaultSource || r.Count != 1 || !r.Last.Equal(first) {
		t.Errorf("got %+v", r)
	}
	r = inbox.Refusal{Source: "vibe", Key: "k", First: first, Last: first.Add(time.Hour), Count: 4}.Normalized()
	if r.Source != "vibe" || r.Count != 4 || !r.Last.Equal(first.Add(time.Hour)) {
		t.Errorf("got %+v", r)
	}
}
