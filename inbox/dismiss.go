package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dismiss marks the parked rows sel selects as needing nothing: a person
// read them and decided (a test event, a job that no longer exists). It is
// every store's Dismiss.
//
// A row is taken when it is parked, or has a parked (row, destination)
// pair: with Filter.Destination only its pair for that destination, with
// Filter.Reason only its pairs parked with that reason. Each pair taken
// becomes dismissed, keeping its reason. The row then becomes dismissed
// when it was parked and has no pair left new or parked; a row parked on
// receipt (no pair) always does. It keeps its body, key and reason, and
// records when, by whom and why (Event.DismissedAt, DismissedBy,
// DismissNote); so does a row that stays new or parked for another
// destination, counted as waiting. A dismissed row or pair is in no
// parked count and no alert; a delivery lands on it as on the parked row
// it was (Land), a purge deletes it as a done row, and reprocess (by id)
// or replay brings it back.
//
// The rows are selected once, oldest first, then taken in batches of
// dismissBatch, each in one transaction of the store that reads them
// again: a row no longer selected (a delivery revived it, a reprocess or
// another dismiss took it) is left as it is and counted as changed. With
// DryRun every transaction is rolled back and the report says what a real
// run would do.
//
// Ids that name no row, and rows named by id that are not parked (or that
// the filter leaves out), are reported, not an error. It fails, changing
// nothing, when the store is read-only, the selection selects every row
// (no id, no filter), searches bodies or names a status other than
// parked, or the dismissal has no note or no one who made it. When a
// batch fails it is rolled back, and the report counts the batches before
// it.
func Dismiss(ctx context.Context, store DismissStore, sel DismissSelection, opts DismissOptions) (DismissReport, error) {
	rep := DismissReport{DryRun: opts.DryRun}
	if err := sel.Check(); err != nil {
		return rep, fmt.Errorf("dismiss: %w", err)
	}
	if err := opts.Dismissal.Check(); err != nil {
		return rep, fmt.Errorf("dismiss: %w", err)
	}
	if store.ReadOnly() {
		return rep, errors.New("dismiss: store is read-only")
	}
	f := sel.Filter
	f.Status, f.Limit, f.ScanLimit = StatusParked, 0, 0
	named := slices.Compact(slices.Sorted(slices.Values(sel.IDs)))
	if len(named) > 0 {
		missing, err := store.Missing(ctx, named)
		if err != nil {
			return rep, fmt.Errorf("dismiss: %w", err)
		}
		rep.Missing = missing
	}
	ids, err := store.Select(ctx, ReplaySelection{IDs: named, Filter: f})
	if err != nil {
		return rep, fmt.Errorf("dismiss: select the rows: %w", err)
	}
	for _, id := range named {
		if !slices.Contains(rep.Missing, id) && !slices.Contains(ids, id) {
			rep.NotParked = append(rep.NotParked, id)
		}
	}
	for from := 0; from < len(ids); from += dismissBatch {
		batch := ids[from:min(from+dismissBatch, len(ids))]
		// fn may run again in a new transaction: it sets only b.
		var b DismissReport
		err := store.InDismissTx(ctx, opts.DryRun, func(tx DismissTx, now time.Time) error {
			var err error
			b, err = dismissRows(tx, batch, f, opts.Dismissal, now)
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("dismiss: %w", err)
		}
		rep.add(b, opts.Sample)
	}
	return rep, nil
}

// dismissBatch bounds the rows one dismiss transaction takes.
const dismissBatch = 500

// dismissRows dismisses, in tx at now, the rows of ids that f still
// selects: their pairs f takes, then the rows.
func dismissRows(tx DismissTx, ids []string, f Filter, d Dismissal, now time.Time) (DismissReport, error) {
	b := DismissReport{}
	rows, err := tx.Rows(ids, f)
	if err != nil {
		return b, err
	}
	b.Changed = len(ids) - len(rows)
	if len(rows) == 0 {
		return b, nil
	}
	taken := make([]string, len(rows))
	for i, r := range rows {
		taken[i] = r.ID
	}
	pairs, err := tx.Pairs(taken)
	if err != nil {
		return b, err
	}
	var dismiss []Pair
	for _, id := range taken {
		for _, p := range pairs[id] {
			if p.Status == StatusParked && (f.Destination == "" || p.Destination == f.Destination) &&
				(f.Reason == "" || p.Reason == f.Reason) {
				dismiss = append(dismiss, Pair{ID: id, Destination: p.Destination})
			}
		}
	}
	if len(dismiss) > 0 {
		got, err := tx.DismissPairs(dismiss, now)
		if err != nil {
			return b, err
		}
		b.Pairs = len(got)
	}
	after, err := tx.DismissRows(taken, d, now)
	if err != nil {
		return b, err
	}
	for _, r := range rows {
		if after[r.ID] == StatusDismissed {
			b.Rows++
		} else {
			b.Waiting++
		}
	}
	b.First = rows
	return b, nil
}

// DismissSelection names the rows Dismiss takes: the parked ones of IDs
// (when given) that Filter selects. Filter.Status is parked whatever it
// holds (""), Filter.Limit is not used, and Filter.Contains is refused.
type DismissSelection struct {
	IDs    []string
	Filter Filter
}

// Check refuses a selection Dismiss must never run: one that selects
// every parked row by accident (no id, no filter), one that searches
// bodies, and one of another status than parked.
func (sel DismissSelection) Check() error {
	f := sel.Filter
	if f.Contains != "" {
		return errors.New("dismiss does not search bodies: select rows by id, time, source, event, reason, job status or destination")
	}
	if f.Status != "" && f.Status != StatusParked {
		return fmt.Errorf("only parked rows are dismissed, not %s ones", f.Status)
	}
	f.Status, f.Limit, f.ScanLimit = "", 0, 0
	if len(sel.IDs) == 0 && f == (Filter{}) {
		return errors.New("no selection: name rows by id, or select them by time, source, event, reason, job status or destination; a dismiss never takes every parked row at once by accident")
	}
	return nil
}

// Dismissal is what a dismiss records on each row: who made it (the OS
// user) and the note they gave. When is the store's clock.
type Dismissal struct {
	By   string
	Note string
}

// Check refuses a dismissal with no note or no one who made it.
func (d Dismissal) Check() error {
	switch {
	case strings.TrimSpace(d.Note) == "":
		return errors.New("no note: say why the rows need nothing")
	case d.By == "":
		return errors.New("no one to record as having dismissed the rows")
	}
	return nil
}

// DismissOptions say how Dismiss runs.
type DismissOptions struct {
	Dismissal
	// DryRun rolls every transaction back: the report says what a real
	// run does.
	DryRun bool
	// Sample is how many of the rows taken the report lists in First.
	Sample int
}

// DismissReport counts what Dismiss did, or with DryRun would do.
type DismissReport struct {
	// Rows counts the rows now dismissed.
	Rows int `json:"rows"`
	// Pairs counts the (row, destination) pairs dismissed.
	Pairs int `json:"pairs"`
	// Waiting counts the rows whose parked pairs were dismissed that stay
	// new or parked for another destination.
	Waiting int `json:"waiting"`
	// Changed counts the rows selected that were no longer parked when
	// their batch took them, left as they are.
	Changed int `json:"changed"`
	// Missing are the ids named that name no row.
	Missing []string `json:"missing,omitempty"`
	// NotParked are the ids named of rows neither parked nor with a
	// parked pair (or that the filter leaves out), left as they are.
	NotParked []string `json:"not_parked,omitempty"`
	// First holds the first rows taken (DismissOptions.Sample of them), as
	// they were before.
	First  []Event `json:"first,omitempty"`
	DryRun bool    `json:"dry_run"`
}

// Refused counts what was asked for and not dismissed: ids that name no
// row, rows not parked, rows changed meanwhile.
func (r DismissReport) Refused() int { return len(r.Missing) + len(r.NotParked) + r.Changed }

// add adds batch b's counts to r, keeping up to sample rows of First.
func (r *DismissReport) add(b DismissReport, sample int) {
	r.Rows += b.Rows
	r.Pairs += b.Pairs
	r.Waiting += b.Waiting
	r.Changed += b.Changed
	if room := sample - len(r.First); room > 0 {
		r.First = append(r.First, b.First[:min(room, len(b.First))]...)
	}
}

// Dismisser is what a Store answers of dismissing, made from a store's
// statements: a store embeds it.
type Dismisser struct{ store DismissStore }

// NewDismisser returns the dismissing of store.
func NewDismisser(store DismissStore) Dismisser { return Dismisser{store} }

// Dismiss dismisses the selected parked rows, as the function Dismiss
// does.
func (d Dismisser) Dismiss(ctx context.Context, sel DismissSelection, opts DismissOptions) (DismissReport, error) {
	return Dismiss(ctx, d.store, sel, opts)
}

// DismissStore is what a store implements of Dismiss: the statements that
// must be SQL. Dismiss holds the sequence, the checks, the batching and
// the counting.
type DismissStore interface {
	// ReadOnly reports whether the store was opened without writes.
	ReadOnly() bool
	// Missing returns the ids that name no row.
	Missing(ctx context.Context, ids []string) ([]string, error)
	// Select returns the ids of the rows sel selects, oldest first, in one
	// read, as ReplayStore's does.
	Select(ctx context.Context, sel ReplaySelection) ([]string, error)
	// InDismissTx runs fn in one write transaction, at now on the store's
	// clock, rolled back when dryRun or when fn fails, and committed
	// otherwise. A store may run fn again in a new transaction.
	InDismissTx(ctx context.Context, dryRun bool, fn func(tx DismissTx, now time.Time) error) error
}

// DismissTx is a store's transaction of dismiss statements.
type DismissTx interface {
	// Rows reads (and, where the store locks rows, locks) the rows of ids
	// that f still selects, oldest first, without their bodies.
	Rows(ids []string, f Filter) ([]Event, error)
	// Pairs reads the pairs of the rows of ids, by row id, each row's by
	// destination.
	Pairs(ids []string) (map[string][]Pairing, error)
	// DismissPairs makes each pair that is still parked dismissed, at
	// now, keeping its reason, and returns those it changed.
	DismissPairs(pairs []Pair, now time.Time) (map[Pair]bool, error)
	// DismissRows records d at now on each row of ids, makes dismissed
	// each that is parked and has no pair new or parked, and gives one
	// that stays parked the reason of a pair still parked (as Mirror
	// does); it returns each row's status after.
	DismissRows(ids []string, d Dismissal, now time.Time) (map[string]Status, error)
}
