package inbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Replay hands rows on again, whatever their status: each (row,
// destination) pair it selects that is done, parked or dismissed becomes
// new, with no attempt, no lease and no error, due at its paced time, and
// the pair's old series (attempts, outcome, last error) is kept in its history. A
// pair already new (due, retrying or in flight) is left alone and counted
// as waiting. The row becomes new, its queue columns mirrored from its
// pairs, so the dispatchers take it up again as they would a delivery.
//
// A row with no pair at all that was handed on (done: no destination took
// it when it was routed) becomes unrouted again, for the dispatcher to
// route under the destinations it has now. A row parked on receipt
// (unparseable, unknown_event, conflict, ...), or dismissed so, holds no
// work a destination took and is skipped, counted by reason: Reprocess is
// for those; an ignored row (a test ping) is skipped too.
//
// With Filter.Destination only the rows routed to that destination are
// selected, and only their pair for it is reset: a row never reaches a
// destination whose filters did not take it. When ReplayOptions.Routes
// has that destination too (and the selection is not of parked rows), a
// row handed on already that has no pair for it and that its filters
// take is selected as well, and gets the pair, new: a destination
// configured after the row was routed, or missed because another
// dispatcher routed the row by a table without it, gets the rows it
// would have had (counted in Added).
//
// The rows are selected once, when it starts (their ids held in memory),
// then taken oldest first in batches of replayBatch, each in one
// transaction of the store (rolled back with DryRun) that reads them again,
// so a store's write lock is never held long. Row i of the run (counting the rows handed on)
// is due at the run's start plus i/Rate seconds: running dispatchers send
// them paced, with no process left running; the destinations' own rate
// ceilings apply on top.
//
// It fails, changing nothing, when the store is read-only, the selection
// is empty or searches bodies, Rate is negative, an id names no row, or
// at Rate the last row selected would be due more than MaxReplaySpan on.
// When a batch fails it is rolled back, and the report counts the batches
// before it.
func Replay(ctx context.Context, store ReplayStore, sel ReplaySelection, opts ReplayOptions) (ReplayReport, error) {
	rep := ReplayReport{Skipped: map[string]int{}, DryRun: opts.DryRun}
	if err := sel.Check(); err != nil {
		return rep, fmt.Errorf("replay: %w", err)
	}
	if opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0) {
		return rep, fmt.Errorf("replay: rate %v: want a positive number of rows a second, or 0 for none", opts.Rate)
	}
	if store.ReadOnly() {
		return rep, errors.New("replay: store is read-only")
	}
	sel.Filter.Limit, sel.Filter.ScanLimit = 0, 0
	if len(sel.IDs) > 0 {
		missing, err := store.Missing(ctx, sel.IDs)
		if err != nil {
			return rep, fmt.Errorf("replay: %w", err)
		}
		if len(missing) > 0 {
			return rep, fmt.Errorf("replay: no row with id %q", missing[0])
		}
	}
	// What the stores select: with pairs to add, every row of the other
	// filters, the route's filters and the status (addSelects) sifting
	// them in planReplay.
	stored := sel.Filter
	if addsPairs(sel.Filter, opts.Routes) {
		stored.Destination, stored.Status = "", ""
	}
	ids, err := store.Select(ctx, ReplaySelection{IDs: sel.IDs, Filter: stored})
	if err != nil {
		return rep, fmt.Errorf("replay: select the rows: %w", err)
	}
	if len(sel.IDs) > 0 {
		// Named, but not matching the other filters: said, not an error.
		rep.LeftOut = len(slices.Compact(slices.Sorted(slices.Values(sel.IDs)))) - len(ids)
	}
	if span := float64(len(ids)) / opts.Rate; opts.Rate > 0 && span > MaxReplaySpan.Seconds() {
		return rep, fmt.Errorf("replay: at %g rows a second the last of the %d rows selected would be due in %.1f days, more than %.0f: raise the rate, or select fewer rows",
			opts.Rate, len(ids), span/86400, MaxReplaySpan.Hours()/24)
	}
	var start time.Time
	for from := 0; from < len(ids); from += replayBatch {
		batch := ids[from:min(from+replayBatch, len(ids))]
		// fn may run again in a new transaction: it sets only b (and
		// start, the same each time).
		var b ReplayReport
		err := store.InReplayTx(ctx, opts.DryRun, func(tx ReplayTx, now time.Time) error {
			if from == 0 {
				start = now
			}
			rows, err := readRows(tx, batch, stored)
			if err != nil {
				return err
			}
			b, err = replayRows(tx, rows, sel.Filter, opts, start, rep.Rows-rep.Rerouted, now)
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("replay: %w", err)
		}
		rep.add(b, opts.Sample)
	}
	return rep, nil
}

// MaxReplaySpan bounds how long after its start a paced replay's last row
// is due: a rate that spaces the rows further is refused, rather than
// leaving them new for months (or past what a time.Duration holds).
const MaxReplaySpan = 30 * 24 * time.Hour

// replayBatch bounds the rows one replay transaction takes.
const replayBatch = 500

// readRows reads the rows of ids that f still selects, oldest first,
// each with all its pairs, in tx.
func readRows(tx ReplayTx, ids []string, f Filter) ([]ReplayRow, error) {
	events, err := tx.Rows(ids, f)
	if err != nil || len(events) == 0 {
		return nil, err
	}
	pairs, err := tx.Pairs(ids)
	if err != nil {
		return nil, err
	}
	out := make([]ReplayRow, len(events))
	for i, e := range events {
		out[i] = ReplayRow{Event: e, Pairs: pairs[e.ID]}
	}
	return out, nil
}

// replayRows plans and applies one batch of rows, selected by f, in tx at
// now, the rows handed on paced at rate from start, after the paced ones
// of the batches before.
func replayRows(tx ReplayTx, rows []ReplayRow, f Filter, opts ReplayOptions, start time.Time, paced int, now time.Time) (ReplayReport, error) {
	b := ReplayReport{Skipped: map[string]int{}}
	var reset, add []ReplayPair
	var reroute []string
	for _, r := range rows {
		p := planReplay(r, f, opts)
		b.Waiting += p.waiting
		b.Filtered += p.filtered
		b.Present += p.present
		switch {
		case p.skip != "":
			b.Skipped[p.skip]++
		case p.reroute:
			reroute = append(reroute, r.Event.ID)
		case len(p.reset) > 0 || p.add:
			due := start.Add(pace(paced, opts.Rate))
			if due.Before(now) {
				due = now
			}
			paced++
			for _, d := range p.reset {
				reset = append(reset, ReplayPair{Pair: Pair{ID: r.Event.ID, Destination: d.Destination}, Status: d.Status, Due: due})
			}
			if p.add {
				add = append(add, ReplayPair{Pair: Pair{ID: r.Event.ID, Destination: f.Destination}, Status: StatusNew, Due: due})
			}
		}
	}
	done, err := resetPairs(tx, reset, now)
	if err != nil {
		return b, err
	}
	b.Pairs, b.Changed = len(done), len(reset)-len(done)
	added, err := addPairs(tx, add, now)
	if err != nil {
		return b, err
	}
	b.Added, b.Changed = len(added), b.Changed+len(add)-len(added)
	done = append(done, added...)
	var rerouted []string
	if len(reroute) > 0 {
		if rerouted, err = tx.Reroute(reroute, now); err != nil {
			return b, err
		}
	}
	b.Rerouted = len(rerouted)
	var ids []string
	due := map[string]time.Time{}
	for _, p := range done {
		if _, ok := due[p.ID]; !ok {
			ids = append(ids, p.ID)
			due[p.ID] = p.Due
		}
	}
	if len(ids) > 0 {
		if err := tx.Mirror(slices.Sorted(slices.Values(ids)), now); err != nil {
			return b, err
		}
	}
	for _, id := range rerouted {
		due[id] = time.Time{}
	}
	// The rows handed on, in the order they were read.
	for _, r := range rows {
		at, ok := due[r.Event.ID]
		if !ok {
			continue
		}
		b.Rows++
		b.First = append(b.First, r.Event)
		if at.IsZero() {
			continue
		}
		if b.FirstDue.IsZero() || at.Before(b.FirstDue) {
			b.FirstDue = at
		}
		if at.After(b.LastDue) {
			b.LastDue = at
		}
	}
	return b, nil
}

// resetPairs keeps each pair's series in its history, then makes it new
// again, due at its time, and its row new, all in tx at now: only the
// pairs still of the status read, which it returns, in the order given.
func resetPairs(tx ReplayTx, pairs []ReplayPair, now time.Time) ([]ReplayPair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	if err := tx.KeepSeries(pairs, now); err != nil {
		return nil, err
	}
	got, err := tx.ResetPairs(pairs, now)
	if err != nil {
		return nil, err
	}
	return renewRows(tx, pairs, got, now)
}

// addPairs makes each pair (its Status new) new, due at its time, and its
// row new as resetPairs does, all in tx at now: only for a row handed on
// already (done, parked by the dispatcher, or new with a pair) that has
// no pair for the destination yet. It returns the pairs it made, in the
// order given.
func addPairs(tx ReplayTx, pairs []ReplayPair, now time.Time) ([]ReplayPair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	got, err := tx.AddPairs(pairs, now)
	if err != nil {
		return nil, err
	}
	return renewRows(tx, pairs, got, now)
}

// renewRows makes the rows of the pairs of pairs that got holds (those a
// statement changed) new, in tx at now, and returns those pairs, in the
// order given.
func renewRows(tx ReplayTx, pairs []ReplayPair, got map[Pair]bool, now time.Time) ([]ReplayPair, error) {
	var done []ReplayPair
	var ids []string
	for _, p := range pairs {
		if got[p.Pair] {
			done = append(done, p)
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return done, tx.Renew(ids, now)
}

// pace is how long after the first the row after taken others is due, at
// rate rows a second: at once with no rate. Rows no destination took
// (routed again) are not paced: they are routed, due, on the next claim.
func pace(taken int, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(taken) * float64(time.Second) / rate)
}

// replayPlan is what a replay does with one row: reset its pairs, route
// it again, or skip it (why), with how many of its pairs already wait.
type replayPlan struct {
	reset    []Pairing
	add      bool // a pair for the selection's destination, made new
	reroute  bool
	skip     string
	waiting  int
	filtered int
	present  int
}

// addsPairs reports whether a replay selected by f makes the missing pairs
// of f.Destination: when routes has it and f does not select parked or
// dismissed rows (a pair that does not exist was never parked).
func addsPairs(f Filter, routes []Route) bool {
	return f.Destination != "" && !f.Status.SetAside() && f.Reason == "" &&
		slices.ContainsFunc(routes, func(r Route) bool { return r.Name == f.Destination })
}

// planReplay returns what a replay does with row r, selected by f: reset
// the pairs that are done or parked (only f.Destination's when it is set)
// and leave the new ones waiting, and those of a destination of routes
// whose filters no longer take the row as they are; route again a row with
// no pair that was handed on; skip a row parked on receipt or ignored. A
// row selected as parked (f.Status parked, or f.Reason) has only its
// parked pairs of that reason reset: a destination that took the row is
// not handed it again; one selected as dismissed (f.Status dismissed),
// only its dismissed pairs. When the replay adds pairs (addsPairs), a row
// handed on with no pair for f.Destination whose filters in opts.Routes
// take it gets one; with opts.MissingOnly a row that has one is left as it
// is.
func planReplay(r ReplayRow, f Filter, opts ReplayOptions) replayPlan {
	routes := opts.Routes
	if addsPairs(f, routes) {
		if !addSelects(r, f) {
			return replayPlan{}
		}
		if p, ok := planAdd(r, f.Destination, routes, opts.MissingOnly); ok {
			return p
		}
	}
	pairs := r.Pairs
	keep := func(p Pairing) bool {
		if f.Destination != "" && p.Destination != f.Destination {
			return false
		}
		if f.Status.SetAside() {
			return p.Status == f.Status && (f.Reason == "" || p.Reason == f.Reason)
		}
		if f.Reason != "" {
			return p.Status == StatusParked && p.Reason == f.Reason
		}
		return true
	}
	if f.Destination != "" || f.Status.SetAside() || f.Reason != "" {
		pairs = slices.DeleteFunc(slices.Clone(pairs), func(p Pairing) bool { return !keep(p) })
		if len(pairs) == 0 && len(r.Pairs) > 0 {
			// None of its pairs is selected (the selection leaves such
			// rows out, or another session changed them since).
			return replayPlan{}
		}
	}
	if len(pairs) == 0 {
		switch {
		case r.Event.Status == StatusIgnored:
			return replayPlan{skip: "ignored"}
		case r.Event.Status.SetAside() && !r.Event.Reason.ByHandler():
			return replayPlan{skip: string(r.Event.Reason)}
		case r.Event.Status == StatusNew:
			// Not routed yet: it waits for its first claim.
			return replayPlan{waiting: 1}
		}
		return replayPlan{reroute: true}
	}
	var p replayPlan
	for _, d := range pairs {
		i := slices.IndexFunc(routes, func(rt Route) bool { return rt.Name == d.Destination })
		switch {
		case d.Status == StatusNew:
			p.waiting++
		case routes != nil && (i < 0 || !routes[i].Takes(r.Event.Source, r.Event.Event)):
			// Narrowed since, or no longer configured: no dispatcher
			// would take a pair made new for it, which would wait for good.
			p.filtered++
		default:
			p.reset = append(p.reset, d)
		}
	}
	return p
}

// addSelects reports whether a replay that adds pairs selects r by
// f.Status: the status of r's pair for f.Destination where it has one
// (as the stores select with a destination), r's own where it has none.
func addSelects(r ReplayRow, f Filter) bool {
	if f.Status == "" {
		return true
	}
	if i := slices.IndexFunc(r.Pairs, func(p Pairing) bool { return p.Destination == f.Destination }); i >= 0 {
		return r.Pairs[i].Status == f.Status
	}
	return r.Event.Status == f.Status
}

// planAdd is what a replay that adds pairs of dest does with r when r has
// no pair for dest (ok), or has one and missingOnly leaves it.
func planAdd(r ReplayRow, dest string, routes []Route, missingOnly bool) (replayPlan, bool) {
	if slices.ContainsFunc(r.Pairs, func(p Pairing) bool { return p.Destination == dest }) {
		if missingOnly {
			return replayPlan{present: 1}, true
		}
		return replayPlan{}, false
	}
	i := slices.IndexFunc(routes, func(rt Route) bool { return rt.Name == dest })
	if !routes[i].Takes(r.Event.Source, r.Event.Event) {
		return replayPlan{}, true // not the destination's: left out
	}
	switch {
	case r.Event.Status == StatusIgnored:
		return replayPlan{skip: "ignored"}, true
	case r.Event.Status.SetAside() && !r.Event.Reason.ByHandler():
		return replayPlan{skip: string(r.Event.Reason)}, true
	case r.Event.Status == StatusNew && len(r.Pairs) == 0:
		// Not routed yet: the dispatcher that routes it decides.
		return replayPlan{waiting: 1}, true
	}
	return replayPlan{add: true}, true
}

// ReplaySelection names the rows Replay hands on again: those of IDs (when
// given) that Filter selects. Filter.Destination narrows them to the rows
// routed to it, and the replay to their pair for it. Filter.Limit is not
// used, and Filter.Contains is refused.
type ReplaySelection struct {
	IDs    []string
	Filter Filter
}

// Check refuses a selection Replay must never run: one that selects
// nothing in particular (every row of the inbox, by accident), and one
// that searches bodies.
func (sel ReplaySelection) Check() error {
	f := sel.Filter
	if f.Contains != "" {
		return errors.New("replay does not search bodies: select rows by id, time, source, event, status, reason, job status or destination")
	}
	f.Limit, f.ScanLimit = 0, 0
	if len(sel.IDs) == 0 && f == (Filter{}) {
		return errors.New("no selection: name rows by id, or select them by time, source, event, status, reason, job status or destination")
	}
	return nil
}

// ReplayOptions say how Replay hands rows on.
type ReplayOptions struct {
	// Rate spaces the rows: row i is due i/Rate seconds after the run's
	// start. 0: every row due at once.
	Rate float64
	// DryRun rolls every transaction back: the report says what a real
	// run does.
	DryRun bool
	// Sample is how many of the rows taken the report lists in First.
	Sample int
	// Routes, when not nil, are the destinations' filters now: a pair of
	// one of them whose filters no longer take its row is left as it is,
	// counted in Filtered, so a replay never hands a row to a destination
	// narrowed since it was routed. A pair of a destination not among
	// them is reset, to wait for it. When it has Filter.Destination, the
	// rows handed on that have no pair for it and that its filters take
	// get one (see Replay).
	Routes []Route
	// MissingOnly, when Replay adds pairs, leaves the rows that have a
	// pair for the destination as they are (counted in Present): only the
	// missing pairs are made.
	MissingOnly bool
}

// ReplayRow is a row a replay selected, without its body, with every pair
// it has.
type ReplayRow struct {
	Event Event
	Pairs []Pairing
}

// ReplayPair is a pair a replay resets: read with Status, due at Due.
type ReplayPair struct {
	Pair
	Status Status
	Due    time.Time
}

// ReplayReport counts what Replay did, or with DryRun would do.
type ReplayReport struct {
	// Rows counts the rows handed on again, of which Rerouted had no pair
	// and are routed again.
	Rows     int `json:"rows"`
	Rerouted int `json:"rerouted"`
	// Pairs counts the pairs made new again.
	Pairs int `json:"pairs"`
	// Waiting counts the pairs (and rows not routed yet) already new,
	// left alone.
	Waiting int `json:"waiting"`
	// Changed counts the pairs a dispatcher or another command changed
	// between reading and resetting them, left as they are.
	Changed int `json:"changed"`
	// Added counts the pairs made for a destination the row had none of
	// (ReplayOptions.Routes), each new; Pairs does not count them.
	Added int `json:"added"`
	// Present counts, with ReplayOptions.MissingOnly, the rows left as
	// they are because they have a pair for the destination.
	Present int `json:"present"`
	// Filtered counts the pairs left as they are because their
	// destination's filters (ReplayOptions.Routes) no longer take the row,
	// or Routes no longer has their destination.
	Filtered int `json:"filtered"`
	// LeftOut counts the rows named by id that the selection's filters
	// leave out (not routed to its destination, of another status, ...).
	LeftOut int `json:"left_out"`
	// Skipped counts the rows not handed on, by why: the reason of a row
	// parked on receipt (see Reprocess), or "ignored".
	Skipped map[string]int `json:"skipped"`
	// FirstDue and LastDue are when the first and last pairs reset are
	// due.
	FirstDue time.Time `json:"first_due,omitzero"`
	LastDue  time.Time `json:"last_due,omitzero"`
	// First holds the first rows taken (ReplayOptions.Sample of them), as
	// they were before.
	First  []Event `json:"first,omitempty"`
	DryRun bool    `json:"dry_run"`
}

// add adds batch b's counts to r, keeping up to sample rows of First.
func (r *ReplayReport) add(b ReplayReport, sample int) {
	r.Rows += b.Rows
	r.Rerouted += b.Rerouted
	r.Pairs += b.Pairs
	r.Waiting += b.Waiting
	r.Changed += b.Changed
	r.Filtered += b.Filtered
	r.Added += b.Added
	r.Present += b.Present
	for k, n := range b.Skipped {
		r.Skipped[k] += n
	}
	if !b.FirstDue.IsZero() && (r.FirstDue.IsZero() || b.FirstDue.Before(r.FirstDue)) {
		r.FirstDue = b.FirstDue
	}
	if b.LastDue.After(r.LastDue) {
		r.LastDue = b.LastDue
	}
	if room := sample - len(r.First); room > 0 {
		r.First = append(r.First, b.First[:min(room, len(b.First))]...)
	}
}

// Replayer is what a Store answers of replaying, made from a store's
// statements: a store embeds it.
type Replayer struct{ store ReplayStore }

// NewReplayer returns the replaying of store.
func NewReplayer(store ReplayStore) Replayer { return Replayer{store} }

// Replay hands the selected rows on again, as the function Replay does.
func (rp Replayer) Replay(ctx context.Context, sel ReplaySelection, opts ReplayOptions) (ReplayReport, error) {
	return Replay(ctx, rp.store, sel, opts)
}

// ReplayStore is what a store implements of Replay: the statements that
// must be SQL. Replay holds the sequence, the checks, the batching, the
// pacing and the counting.
type ReplayStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// Missing returns the ids that name no row.
	Missing(ctx context.Context, ids []string) ([]string, error)
	// Select returns the ids of the rows sel selects, oldest first (by
	// received_at, then id), in one read: the rows a replay takes are
	// those there when it starts.
	Select(ctx context.Context, sel ReplaySelection) ([]string, error)
	// InReplayTx runs fn in one write transaction, at now on the store's
	// clock, rolled back when dryRun or when fn fails, and committed
	// otherwise. A store may run fn again in a new transaction.
	InReplayTx(ctx context.Context, dryRun bool, fn func(tx ReplayTx, now time.Time) error) error
}

// ReplayTx is a store's transaction of replay statements.
type ReplayTx interface {
	// Rows reads (and, where the store locks rows, locks) the rows of ids
	// that f still selects, oldest first (by received_at, then id),
	// without their bodies.
	Rows(ids []string, f Filter) ([]Event, error)
	// Pairs reads the pairs of the rows of ids, by row id, each row's by
	// destination.
	Pairs(ids []string) (map[string][]Pairing, error)
	// KeepSeries keeps the series of each pair whose status is still the
	// one read in its history, as replaced at now.
	KeepSeries(pairs []ReplayPair, now time.Time) error
	// ResetPairs makes each pair whose status is still the one read new
	// again, due at its Due, with no attempt, lease or error, and returns
	// those it reset.
	ResetPairs(pairs []ReplayPair, now time.Time) (map[Pair]bool, error)
	// AddPairs makes each pair (its Status new) new, due at its Due, with
	// no attempt, only where its row was handed on (done, parked by the
	// dispatcher, or new with a pair) and has no pair for the destination
	// yet, and returns those it made.
	AddPairs(pairs []ReplayPair, now time.Time) (map[Pair]bool, error)
	// Renew makes the rows of ids new with no error of their own (Mirror
	// gives them their pairs' again), their updated_at now where they
	// were not new.
	Renew(ids []string, now time.Time) error
	// Reroute makes the rows of ids (at least one) that are still done or
	// parked and have no pair new and not routed, to be routed again, and
	// returns those it changed.
	Reroute(ids []string, now time.Time) ([]string, error)
	// Mirror sets the queue columns of the new rows of ids from their
	// pairs, as QueueTx.Mirror does.
	Mirror(ids []string, now time.Time) error
}

// WithEarlier returns the pairs of the row id with the earlier series
// read returns of each, by destination; read is not called when there is
// no pair.
func WithEarlier(id string, pairs []Pairing, read func() (map[string][]Series, error)) ([]Pairing, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	earlier, err := read()
	if err != nil {
		return nil, fmt.Errorf("read the earlier series of %s: %w", id, err)
	}
	for i := range pairs {
		pairs[i].Earlier = earlier[pairs[i].Destination]
	}
	return pairs, nil
}

// Series is an earlier series of attempts of a (row, destination) pair,
// kept when a replay made the pair new again.
type Series struct {
	// N numbers the pair's series from 1, oldest first; the pair's current
	// one is the next.
	N          int64     `json:"series"`
	Status     Status    `json:"status"` // done, parked or dismissed
	Reason     Reason    `json:"reason,omitempty"`
	Attempts   int64     `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	DoneAt     time.Time `json:"done_at,omitzero"`
	ReplayedAt time.Time `json:"replayed_at"`
}
