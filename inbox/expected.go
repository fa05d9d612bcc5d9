package inbox

import (
	"errors"
	"fmt"
	"time"
)

// ExpectState is where an expectation stands.
type ExpectState string

// The states of an expectation; schema.sql checks the same set.
const (
	ExpectWaiting ExpectState = "waiting" // no delivery of the job yet
	ExpectDone    ExpectState = "done"    // the job was delivered
	ExpectClosed  ExpectState = "closed"  // given up on, see Reason
)

// Expectation is a job the application started and expects a delivery
// for.
type Expectation struct {
	Source       string      `json:"source"`
	JobID        string      `json:"job_id"`
	StatusURL    string      `json:"status_url,omitempty"` // "" : the API URL + /v1/jobs/{job_id}
	ExpectedAt   time.Time   `json:"expected_at"`
	DueAt        time.Time   `json:"due_at"`
	State        ExpectState `json:"state"`
	Overdue      bool        `json:"overdue"` // waiting past DueAt, when read
	Reason       string      `json:"reason,omitempty"`
	SettledAt    time.Time   `json:"settled_at,omitzero"`
	NextPollAt   time.Time   `json:"next_poll_at,omitzero"`
	Polls        int64       `json:"polls"`
	Redeliveries int64       `json:"redeliveries"`
	JobStatus    string      `json:"job_status,omitempty"`
	PolledAt     time.Time   `json:"polled_at,omitzero"`
	LastError    string      `json:"last_error,omitempty"`
}

// ScanExpectation reads an Expectation through scan (a driver's Scan of
// one stored row) from the columns source, job_id, status_url,
// expected_at, due_at, state, reason, settled_at, next_poll_at, polls,
// redeliveries, job_status, polled_at and last_error, in that order: no
// NULL, the times in Unix milliseconds, a settled_at or polled_at of 0 for
// none. It fails with scan's error.
func ScanExpectation(scan func(dest ...any) error) (Expectation, error) {
	var e Expectation
	var state string
	var expected, due, settled, next, polled int64
	if err := scan(&e.Source, &e.JobID, &e.StatusURL, &expected, &due, &state, &e.Reason,
		&settled, &next, &e.Polls, &e.Redeliveries, &e.JobStatus, &polled, &e.LastError); err != nil {
		return Expectation{}, err
	}
	e.State = ExpectState(state)
	e.ExpectedAt, e.DueAt, e.NextPollAt = fromMillis(expected), fromMillis(due), fromMillis(next)
	if settled != 0 {
		e.SettledAt = fromMillis(settled)
	}
	if polled != 0 {
		e.PolledAt = fromMillis(polled)
	}
	return e, nil
}

// fromMillis is the time a store keeps as Unix milliseconds, in UTC.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// ErrInvalidJobID is returned by Expect for a job id no delivery could
// carry.
var ErrInvalidJobID = errors.New("invalid job id")

// CheckJobID returns ErrInvalidJobID, with the id quoted, for an id that a
// delivery could not be keyed by (empty, longer than 200 bytes, control
// characters, "sha256:..."), or that a URL path would resolve away.
func CheckJobID(id string) error {
	if !usableJobID(id) || id == "." || id == ".." {
		return fmt.Errorf("%w %q: want 1 to %d bytes, no control characters, not starting sha256:", ErrInvalidJobID, id, maxJobIDLen)
	}
	return nil
}

// Poll is a waiting expectation claimed by a poller.
type Poll struct {
	Source       string
	JobID        string
	StatusURL    string // "" : the API's own
	Attempt      int64  // the expectation's poll count with this claim: it names the claim
	Redeliveries int64  // redeliveries asked for before this poll
	DueAt        time.Time
}

// PollFate is what a poll made of its expectation.
type PollFate int

// The fates of a claimed expectation.
const (
	PollAgain       PollFate = iota + 1 // still running, or the poll failed: poll again at Next
	PollRedelivered                     // terminal, and a redelivery was asked for: poll again at Next if none arrives
	PollClose                           // nothing more to do (the provider does not know the job): closed with Reason
)

// PollResult records the fate of one claimed poll.
type PollResult struct {
	Poll      Poll
	Fate      PollFate
	At        time.Time // when the poll ended
	Next      time.Time // with PollAgain and PollRedelivered
	JobStatus string    // the status the provider reported, "" when none
	Reason    string    // with PollClose, for a person
	Error     string    // the poll's error, if any; never the API key
}

// Reconciliation is what the store holds of missed and expected jobs.
type Reconciliation struct {
	Missed       int64     // refused keys not delivered since
	OldestMissed time.Time // the first refusal of the oldest, zero when none
	Waiting      int64     // expectations waiting, not yet due
	Overdue      int64     // expectations waiting past their due time
	Done         int64
	Closed       int64
}

// Refusal is a key whose verified deliveries were answered 503 because the
// store could not take them, and that has not been delivered since: a job
// the provider may have given up on.
type Refusal struct {
	Source string    `json:"source"`
	Key    string    `json:"key"`              // the row id the delivery would have landed on
	JobID  string    `json:"job_id,omitempty"` // the job the body names; "" when none
	Event  string    `json:"event,omitempty"`
	First  time.Time `json:"first_refused_at"`
	Last   time.Time `json:"last_refused_at"`
	Count  int64     `json:"refusals"`
	// Stored says the delivery was stored here but answered 503 all the
	// same, its commit unconfirmed where the store promises it (a replica
	// under --replica-sync, see ErrUnconfirmed): its key is recorded
	// although its row exists, unless a delivery landed on the row after
	// Last.
	Stored bool `json:"-"`
}
