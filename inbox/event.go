// Package inbox is the domain of the webhook inbox: what a verified delivery
// is, how it is classified and keyed (Classify), what it does to the row
// already holding its key (Land), what reprocessing decides (Decide), and
// the contract every store keeps (Store). It holds no SQL: sqlite/ and
// postgres/ implement Store, and inbox/storetest is the suite both run.
package inbox

import (
	"errors"
	"slices"
	"time"
)

// Status is where a stored row stands.
type Status string

// The statuses a row can have; schema.sql checks the same set.
const (
	StatusNew     Status = "new"     // stored, waiting for the application
	StatusDone    Status = "done"    // handed on to the application
	StatusParked  Status = "parked"  // never processable as received; see Reason
	StatusIgnored Status = "ignored" // a test ping, kept visible but never handed on
	// StatusDismissed: a parked row a person decided needs nothing (inbox
	// dismiss). It keeps its body, key and Reason, and leaves the parked
	// counts and every alert; see Event.DismissedAt.
	StatusDismissed Status = "dismissed"
)

// Statuses returns every status, in the order tables show them. The slice
// is the caller's to change.
func Statuses() []Status {
	return []Status{StatusNew, StatusDone, StatusParked, StatusIgnored, StatusDismissed}
}

// SetAside reports whether s is parked or dismissed: a row taken out of
// the queue with a Reason, which only a person brings back (reprocess,
// replay) and which a delivery lands on as on a parked row (Land).
func (s Status) SetAside() bool { return s == StatusParked || s == StatusDismissed }

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses(), s) }

// Reason says why a row is parked. Operators group by it.
type Reason string

// The reasons a verified delivery is parked.
const (
	ReasonUnparseable     Reason = "unparseable"       // not JSON, empty, or not an object
	ReasonMissingJobID    Reason = "missing_job_id"    // no usable job_id and not a test event
	ReasonUnknownEvent    Reason = "unknown_event"     // event name outside the configured set
	ReasonPayloadTooLarge Reason = "payload_too_large" // the provider sent a result URL instead of the payload
	ReasonTooLarge        Reason = "too_large"         // body above the normal limit
	ReasonConflict        Reason = "conflict"          // a different event for a job already stored
	ReasonMissingKey      Reason = "missing_key"       // another source's delivery names no usable key
	ReasonUnknownJob      Reason = "unknown_job"       // a job no expectation names, at a source with expected_only

	// The reasons the dispatcher parks a row with. Only a person brings
	// such a row back (reprocess); a later delivery of the job is counted
	// on it, as on a new or done row.
	ReasonHandlerFailed   Reason = "handler_failed"   // the application failed every attempt of the schedule
	ReasonHandlerRejected Reason = "handler_rejected" // the application said never to retry
	// The destination can never take the row as it is (a NATS server's
	// max_payload below the message): parked at once, no retry.
	ReasonTooLargeForDestination Reason = "too_large_for_destination"
)

// Reasons returns every reason: the contract's, in its order, then the
// dispatcher's. The slice is the caller's to change.
func Reasons() []Reason {
	return []Reason{ReasonUnparseable, ReasonMissingJobID, ReasonUnknownEvent,
		ReasonPayloadTooLarge, ReasonTooLarge, ReasonConflict, ReasonMissingKey,
		ReasonUnknownJob, ReasonHandlerFailed, ReasonHandlerRejected, ReasonTooLargeForDestination}
}

// Valid reports whether r is one of Reasons.
func (r Reason) Valid() bool { return slices.Contains(Reasons(), r) }

// ByHandler reports whether r is one the dispatcher parks with: the row
// holds a storable job event the application did not take.
func (r Reason) ByHandler() bool {
	return r == ReasonHandlerFailed || r == ReasonHandlerRejected || r == ReasonTooLargeForDestination
}

// ErrNotFound is returned when no row has the requested id.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by a Store that has been closed.
var ErrClosed = errors.New("store closed")

// ErrGivenUp is the group commit's answer to a write whose caller's
// deadline passed before its commit began: it is not written.
var ErrGivenUp = errors.New("the caller's deadline passed before the commit began")

// Event is one row of the inbox.
type Event struct {
	ID         string    `json:"id"`
	Source     string    `json:"source"`
	JobID      string    `json:"job_id,omitempty"`
	Status     Status    `json:"status"`
	Reason     Reason    `json:"reason"`
	Event      string    `json:"event"`
	JobStatus  string    `json:"job_status,omitempty"`
	ResultURL  string    `json:"result_url,omitempty"`
	Body       []byte    `json:"-"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	DeliveryTS int64     `json:"delivery_ts"`
	ReceivedAt time.Time `json:"received_at"`
	Deliveries int64     `json:"deliveries"`
	LastSeenAt time.Time `json:"last_seen_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	// Handing the row to the application; zero until a dispatcher claims it.
	Attempts      int64     `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	LeaseOwner    string    `json:"lease_owner,omitempty"`
	LeaseUntil    time.Time `json:"lease_until,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	DoneAt        time.Time `json:"done_at,omitzero"`

	// Response is the answer body saved with the row (Vibe's), nil for none.
	Response []byte `json:"-"`

	// The dismissal (inbox dismiss): when, by whom (the OS user) and why.
	// Set on every dismissed row, and on a row still new or parked for
	// another destination whose parked pairs were dismissed; cleared when
	// a delivery, reprocess or replay brings the row back.
	DismissedAt time.Time `json:"dismissed_at,omitzero"`
	DismissedBy string    `json:"dismissed_by,omitempty"`
	DismissNote string    `json:"dismiss_note,omitempty"`
}

// Outcome is what storing one delivery did.
type Outcome string

// The outcomes of Store.Put.
const (
	OutcomeStored    Outcome = "stored"    // a new row with status new
	OutcomeRevived   Outcome = "revived"   // a parked row became new (contract row 17)
	OutcomeDuplicate Outcome = "duplicate" // a repeat, counted on the existing row
	OutcomeParked    Outcome = "parked"    // parked with a reason
	OutcomeIgnored   Outcome = "ignored"   // a test ping
)
