package inbox

import "time"

// Job is a new row claimed for delivery to the application.
type Job struct {
	ID string // the row's id: unique across sources (RowID of Source and Key)
	// Source is the configured source the row came through.
	Source string
	// Key is the provider's own key of the row (Sume's job_id, Vibe's
	// runId, GitHub's delivery id, ...): the idempotency key for the
	// application's external effects, with Source to tell sources apart.
	Key     string
	Event   string
	Body    []byte
	Attempt int // this attempt's number, from 1; counted as it starts (Store.Start)
	// Destination is the destination the claim is for; "" is
	// DefaultDestination.
	Destination string
	// started is set by Start (markStarted): the row's attempts already
	// count Attempt.
	started bool
}

// Origin returns j's source and provider key, worked out from its ID for a
// Job made without them: the default source's, whose keys are the ids.
func (j Job) Origin() (source, key string) {
	source, key = j.Source, j.Key
	if source == "" {
		source = DefaultSource
	}
	if key == "" {
		key = KeyOf(source, j.ID)
	}
	return source, key
}

// Dest returns j's destination, DefaultDestination for "".
func (j Job) Dest() string {
	if j.Destination == "" {
		return DefaultDestination
	}
	return j.Destination
}

// held is the attempt count of the row while j's claim holds: Attempt once
// Start counted it, one less before.
func (j Job) held() int {
	if j.started {
		return j.Attempt
	}
	return j.Attempt - 1
}

// Claim asks for up to Max rows that are due at Now for Destination,
// leased until Until. Before it claims, it routes the rows not yet
// matched to their destinations by Routes.
type Claim struct {
	Now, Until time.Time
	Max        int
	// Destination is whose pairs to claim; "" is DefaultDestination. A
	// paused destination claims none.
	Destination string
	// Routes are every configured destination and its filters; nil is
	// Destination alone, taking every row.
	Routes []Route
	// Start counts, as Store.Start does from Now to Until, the attempts of
	// up to Start of the rows claimed (none when 0), in the same
	// transaction, and Settle returns those marked started: a dispatcher
	// that is to send them at once waits for no commit of its own.
	Start int
	// LastAttempt, above 0, leaves uncounted the rows claimed whose attempt
	// would be past it.
	LastAttempt int
}

// Counts reports whether c counts the attempt of a row it claims, whose
// next attempt is attempt, when it counted n of the rows it took before
// it (oldest due first): up to Start rows, none past LastAttempt. A store
// whose claim is one SQL statement writes the same rule in it.
func (c Claim) Counts(attempt, n int) bool {
	return n < c.Start && (c.LastAttempt <= 0 || attempt <= c.LastAttempt)
}

// Dest returns c's destination, DefaultDestination for "".
func (c Claim) Dest() string {
	if c.Destination == "" {
		return DefaultDestination
	}
	return c.Destination
}

// routes returns c's routes, Destination alone for none.
func (c Claim) routes() []Route {
	if len(c.Routes) == 0 {
		return []Route{{Name: c.Dest()}}
	}
	return c.Routes
}

// Fate is what an attempt made of a claimed row.
type Fate int

// The fates of a claimed row.
const (
	FateDone    Fate = iota + 1 // the application took it: done, at At
	FateRetry                   // it failed: new again, claimable from RetryAt
	FatePark                    // it failed for good: parked with Reason
	FateRelease                 // it was never attempted: claimable at once, no attempt counted
	// Start counted its attempt, yet no request was sent (the dispatcher
	// stopped, or the destination went away, first): the count is undone
	// and the row is claimable at once, as after FateRelease, or from
	// RetryAt when set (the destination was down: the request was sent,
	// and failed for the destination, not the row).
	FateUnsent
)

// Settlement records the fate of one claimed row.
type Settlement struct {
	Job     Job // its ID and Attempt name the claim
	Fate    Fate
	At      time.Time // when the attempt ended
	RetryAt time.Time // with FateRetry, and FateUnsent when set
	Reason  Reason    // with FatePark
	Error   string    // with FateRetry and FatePark, and FateUnsent when set: the error, never the body
}

// Due returns when the row of st is claimable again, of a FateRelease,
// FateRetry or FateUnsent.
func (st Settlement) Due() time.Time {
	if st.Fate == FateRelease || st.RetryAt.IsZero() {
		return st.At
	}
	return st.RetryAt
}

// Queue describes the new rows: what the application still has to take.
type Queue struct {
	Depth    int64     `json:"depth"`     // new rows, claimed or not
	InFlight int64     `json:"in_flight"` // claimed, the lease still running
	Retrying int64     `json:"retrying"`  // failed at least once, waiting for the next attempt
	Oldest   time.Time `json:"oldest_received_at,omitzero"`
}

// Age is how long the oldest new row has waited at now; zero when none.
func (q Queue) Age(now time.Time) time.Duration {
	if q.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(q.Oldest), 0)
}
