package inbox

import (
	"context"
	"errors"
	"time"
)

// Defaults a store applies to settings left zero.
const (
	// DefaultBusyTimeout is how long a write waits for a lock another
	// process (or replica) holds before it fails, and the receiver answers
	// 503.
	DefaultBusyTimeout = 3 * time.Second
	// DefaultMaxBatch bounds how many deliveries one group commit carries.
	DefaultMaxBatch = 256
)

// ErrUnconfirmed is what Put returns, wrapped, when the delivery was
// committed here but the commit did not reach where the store promises it
// too (a replica under --replica-sync): the answer is 503 and the key is
// remembered for inbox missed, although its row exists.
var ErrUnconfirmed = errors.New("stored, but not confirmed by the replica")

// Commit is what a store's writer reports of one group commit (the
// OnCommit of sqlite.Options and postgres.Options).
type Commit struct {
	// N is how many deliveries and other writes it carried; Ping's probe
	// is not counted, and a commit that carried only the probe is not
	// reported.
	N int
	// Largest is the size in bytes of the largest body it carried.
	Largest int
	// Took is how long it took, from its BEGIN to its end.
	Took time.Duration
	// Err is why it failed, nil when it committed. A commit fails only for
	// the store's reasons (the disk, the lock, the connection, the
	// database's refusal), never for a delivery's.
	Err error
}

// Sequences is what a Store answers through the sequences written once
// here, made from the store's statements: the counts, the secret uses, the
// reconciliation writes, the purge, the reprocessing, the replay and the
// dismissal. A store embeds it.
type Sequences struct {
	Counts
	Secrets
	Reconciler
	Purger
	Reprocessor
	Replayer
	Dismisser
}

// NewSequences returns the sequences run on a store's statements.
func NewSequences(counts CountStore, secrets SecretStore, rec ReconcileStore, purge PurgeStore, reprocess ReprocessStore, replay ReplayStore, dismiss DismissStore) Sequences {
	return Sequences{NewCounts(counts), NewSecrets(secrets), NewReconciler(rec), NewPurger(purge), NewReprocessor(reprocess), NewReplayer(replay),
		NewDismisser(dismiss)}
}

// Store is what serve, the dispatcher and the operator's commands use of
// the database that keeps the rows: sqlite.Store on one machine,
// postgres.Store shared by several. inbox/storetest is the suite every
// implementation passes. Unless said otherwise, a method fails only when
// the database cannot be read or written, and a write that fails changed
// nothing.
type Store interface {
	// Put stores one classified delivery under the landing rules (Land)
	// and returns once the transaction that holds it has committed.
	Put(ctx context.Context, d Delivery) (Result, error)
	// Settle records the settlements of rows that owner claimed, then
	// claims rows as claim asks (none when claim.Max is 0), in one
	// transaction. A settlement whose claim is gone changes nothing and is
	// counted in stale.
	Settle(ctx context.Context, owner string, settled []Settlement, claim Claim) (jobs []Job, stale int, err error)
	// Start counts the attempts of jobs as they start and renews owner's
	// lease on each to run out at until; it returns the jobs it counted,
	// marked started (Job.Started). A job left out must not be attempted.
	Start(ctx context.Context, owner string, jobs []Job, now, until time.Time) ([]Job, error)
	// NextDue returns when the first new row becomes claimable; ok is
	// false when there is no new row.
	NextDue(ctx context.Context) (due time.Time, ok bool, err error)
	// Queue reads the queue's state at now.
	Queue(ctx context.Context, now time.Time) (Queue, error)

	// Deliveries returns where the row id stands with each destination it
	// was routed to, by destination, with the earlier series a replay
	// kept; none for a row not routed yet.
	Deliveries(ctx context.Context, id string) ([]Pairing, error)
	// Destinations counts each destination's pairs by status at now, and
	// says which are paused, by name.
	Destinations(ctx context.Context, now time.Time) ([]DestinationStats, error)
	// PausedDestinations returns the destinations an operator paused.
	PausedDestinations(ctx context.Context) ([]string, error)
	// SetPaused pauses or resumes a destination for every dispatcher on
	// the store: a paused one's pairs are not claimed, so they wait with
	// no attempt counted.
	SetPaused(ctx context.Context, name string, paused bool) error
	// DownDestinations returns the destinations a dispatcher found down
	// (an outage: its rows wait with no attempt counted), by name.
	DownDestinations(ctx context.Context) ([]DownDestination, error)
	// SetDown records that the destination name is down since since, for
	// cause (bounded by the caller); a zero since records it up again.
	SetDown(ctx context.Context, name string, since time.Time, cause string) error
	// RecordRouting records that the dispatcher owner routes new rows by
	// routes, seen at now; routes nil forgets owner (it stopped).
	RecordRouting(ctx context.Context, owner string, routes []Route, now time.Time) error
	// Routings returns the routings recorded at or after since, by owner.
	Routings(ctx context.Context, since time.Time) ([]Routing, error)

	// Get returns the row with the given id, body included, or an error
	// wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Event, error)
	// List returns the rows f selects without their bodies, newest first.
	List(ctx context.Context, f Filter) ([]Event, error)
	// Each calls fn with each row List would return, in its order, as the
	// rows are read rather than once all are: a read of a million rows
	// holds one at a time. It stops at fn's first error and returns it.
	Each(ctx context.Context, f Filter, fn func(Event) error) error
	// Count counts the rows f selects, f.Limit aside.
	Count(ctx context.Context, f Filter) (int64, error)
	// Stats counts rows per status, reason and source, and reads the queue.
	Stats(ctx context.Context) (Stats, error)
	// CountByStatus counts the rows of each status, every status included.
	CountByStatus(ctx context.Context) (map[Status]int64, error)
	// ParkedByReason counts the parked rows f selects, per reason, most
	// rows first.
	ParkedByReason(ctx context.Context, f Filter) ([]ReasonCount, error)
	// ParkedPerHour counts the parked rows f selects per hour they were
	// parked, in the hours hour-long windows that end at end, oldest
	// first.
	ParkedPerHour(ctx context.Context, f Filter, end time.Time, hours int) ([]HourCount, error)

	// Purgeable counts what Purge would delete and keep; it refuses what
	// Purge refuses.
	Purgeable(ctx context.Context, sel PurgeSelection) (PurgeReport, error)
	// Purge deletes the rows sel selects that hold no unfinished work; it
	// refuses a selection PurgeSelection.Check refuses.
	Purge(ctx context.Context, sel PurgeSelection) (PurgeReport, error)
	// Reprocess classifies the selected parked rows again under rules and
	// applies what ReprocessJob.Decide chooses; with dryRun it changes
	// nothing and reports what a real run would do.
	Reprocess(ctx context.Context, sel Selection, rules SourceRules, dryRun bool) (ReprocessReport, error)
	// Replay hands the rows sel selects on again, whatever their status:
	// each of their pairs (only Filter.Destination's when set) that is
	// done or parked becomes new, due at its paced time, its old series
	// kept (Pairing.Earlier); see the function Replay. With DryRun it
	// changes nothing and reports what a real run would do.
	Replay(ctx context.Context, sel ReplaySelection, opts ReplayOptions) (ReplayReport, error)
	// Dismiss marks the parked rows (and parked pairs) sel selects as
	// needing nothing, recording who, when and why; see the function
	// Dismiss. With DryRun it changes nothing and reports what a real run
	// would do.
	Dismiss(ctx context.Context, sel DismissSelection, opts DismissOptions) (DismissReport, error)

	// RecordSecretUses saves when each secret last verified a delivery,
	// keeping the later time.
	RecordSecretUses(ctx context.Context, uses []SecretUse) error
	// SecretUses returns every recorded secret use.
	SecretUses(ctx context.Context) ([]SecretUse, error)
	// RecordUnverified adds runs of failed verifications to each source's
	// saved run, which a delivery verified since it began ends.
	RecordUnverified(ctx context.Context, runs []Unverified) error
	// Unverified returns each source's saved run of failed verifications.
	Unverified(ctx context.Context) ([]Unverified, error)

	// RecordRefusals adds refusals remembered while the store was down to
	// what each key has; a key whose row exists by now is left out.
	RecordRefusals(ctx context.Context, refusals []Refusal) error
	// Missed returns the refused keys not delivered since, only those
	// first refused earlier than before (every one when before is zero).
	Missed(ctx context.Context, before time.Time) ([]Refusal, error)
	// Expect records that a delivery of each job is expected by due; it
	// fails, recording nothing, on an invalid job id (ErrInvalidJobID).
	Expect(ctx context.Context, jobs []string, statusURL string, due time.Time) ([]Expectation, error)
	// Expected returns the expectations at now, only the overdue ones with
	// overdue.
	Expected(ctx context.Context, now time.Time, overdue bool) ([]Expectation, error)
	// ClaimPolls leases up to max waiting expectations due at now to owner,
	// the leases running out at until.
	ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]Poll, error)
	// SettlePolls records the results of polls owner claimed; a result
	// whose claim is gone is counted in stale.
	SettlePolls(ctx context.Context, owner string, results []PollResult) (stale int, err error)
	// NextPoll returns when the first waiting expectation is due a poll.
	NextPoll(ctx context.Context) (at time.Time, ok bool, err error)
	// Reconciliation counts the missed keys and the expectations at now.
	Reconciliation(ctx context.Context, now time.Time) (Reconciliation, error)

	// Ping reports whether the store can commit now: Probe with nothing
	// beyond its own row.
	Ping(ctx context.Context) error
	// Probe reports whether the store can commit now what a delivery of
	// size bytes commits, and what the dispatcher's claim writes: it
	// writes and undoes a probe row in the events table itself, in the
	// transaction that commits the store's probe row, so a commit fails it
	// as it fails them (a full disk, a table lock, a revoked privilege).
	Probe(ctx context.Context, size int) error
	// Close finishes what the store started and releases it; a second call
	// returns the first's error.
	Close() error
}

// Collect returns the rows each (a Store's Each) calls back with, in its
// order: a store's List.
func Collect(ctx context.Context, f Filter, each func(context.Context, Filter, func(Event) error) error) ([]Event, error) {
	var out []Event
	err := each(ctx, f, func(e Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}
