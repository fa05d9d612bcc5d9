package inbox

import (
	"fmt"
	"strings"
	"time"
)

// The rules of expectations as a store reads them and records their
// polls, so that every store keeps the same.

// MaxPollError bounds the bytes of a poll's error kept on its
// expectation.
const MaxPollError = 500

// asOf returns e as read at now: Overdue when it waits past its due time,
// and a next poll time only while it waits.
func (e Expectation) asOf(now time.Time) Expectation {
	e.Overdue = e.State == ExpectWaiting && !now.Before(e.DueAt)
	if e.State != ExpectWaiting {
		e.NextPollAt = time.Time{}
	}
	return e
}

// checkPollResults refuses results a store cannot record: one of an
// unknown fate.
func checkPollResults(results []PollResult) error {
	for _, r := range results {
		switch r.Fate {
		case PollAgain, PollRedelivered, PollClose:
		default:
			return fmt.Errorf("settle poll of %s: unknown fate %d", r.Poll.JobID, r.Fate)
		}
	}
	return nil
}

// KeptError is r's error as its expectation keeps it: at most
// MaxPollError bytes, cut on a character and marked "...".
func (r PollResult) KeptError() string {
	if len(r.Error) <= MaxPollError {
		return r.Error
	}
	return strings.ToValidUTF8(r.Error[:MaxPollError], "") + "..."
}

// CloseReason is the reason a PollClose result closes its expectation
// with: r.Reason, or "closed" when it gives none.
func (r PollResult) CloseReason() string {
	if r.Reason == "" {
		return "closed"
	}
	return r.Reason
}

// normalized returns r as a store records it: of DefaultSource when it
// names none, refused at least once, and last refused no earlier than
// first.
func (r Refusal) normalized() Refusal {
	if r.Source == "" {
		r.Source = DefaultSource
	}
	r.Count = max(r.Count, 1)
	if r.Last.Before(r.First) {
		r.Last = r.First
	}
	return r
}
