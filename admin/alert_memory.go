package admin

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"inbox/inbox"
)

// alertMemory is what alert keeps of its findings in the store, with
// --notify or --on-change: what it last reported of each (inbox.Alert).
type alertMemory interface {
	// Alerts returns the open findings of scope, by finding.
	Alerts(ctx context.Context, scope string) ([]inbox.Alert, error)
	// SwapAlerts makes each swap in one transaction and says which held.
	SwapAlerts(ctx context.Context, swaps []inbox.AlertSwap) ([]bool, error)
}

// What a run says of a finding: the rule alert --notify and --on-change
// report by.
const (
	unchanged = "unchanged" // open, reported before, not grown, not due again: nothing
	opened    = "opened"    // new since the last run (or alert keeps no memory)
	grew      = "grew"      // its count at least doubled since it was last reported
	repeated  = "repeated"  // still open --repeat after it was last reported
	resolved  = "resolved"  // reported before, and not found now
)

// change is what a run says of a finding.
type change struct {
	kind string
	// open is whether the run found it (all but a resolved one).
	open bool
	finding
	// was is what was last reported of it (for one just opened, what is
	// recorded now); zero when alert keeps no memory.
	was inbox.Alert
}

// fresh is every finding as opened: what a run that keeps no memory
// reports.
func fresh(found []finding) []change {
	out := make([]change, len(found))
	for i, f := range found {
		out[i] = change{kind: opened, open: true, finding: f}
	}
	return out
}

// grown is the rule for growth: the count at least doubled since the
// last report (from 0, any count).
func grown(now, was int64) bool { return now >= 2*was && now > was }

// remember compares found with what was last reported of scope (read
// from mem), records what this run reports through the store write opens,
// and returns the changes, in found's order and then the resolved ones by
// key, with the swaps that undo the records (when the report does not
// reach its endpoints) on the store write opened. write is called only
// when there is something to record: a run that reports nothing writes
// nothing. Of two runs at once that see the same change, the one whose
// record holds reports it; the other's becomes unchanged.
//
// When mem cannot be read, the changes are fresh's; when the record
// cannot be written, every finding open is reported as opened, and every
// one resolved as resolved: never silence for want of a memory. err says
// why in both cases.
func remember(ctx context.Context, mem alertMemory, write func() (alertMemory, error), scope string, found []finding, now time.Time, repeat time.Duration) ([]change, []inbox.AlertSwap, alertMemory, error) {
	prev, err := mem.Alerts(ctx, scope)
	if err != nil {
		return fresh(found), nil, nil, err
	}
	changes, swaps, swapOf := compare(scope, found, prev, now, repeat)
	if len(swaps) == 0 {
		return changes, nil, nil, nil
	}
	// One order of rows for every run, so that two runs at once take
	// their locks alike.
	order := make([]int, len(swaps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(swapKey(swaps[i]), swapKey(swaps[j])) })
	sorted := make([]inbox.AlertSwap, len(swaps))
	for i, o := range order {
		sorted[i] = swaps[o]
	}
	w, err := write()
	var held []bool
	if err == nil {
		held, err = w.SwapAlerts(ctx, sorted)
	}
	if err != nil {
		for i := range changes {
			if changes[i].kind == unchanged {
				changes[i].kind = opened
			}
		}
		return changes, nil, nil, err
	}
	var undo []inbox.AlertSwap
	for i, o := range order {
		if !held[i] {
			// Another run recorded it first, and reports it.
			changes[swapOf[o]].kind = unchanged
			continue
		}
		undo = append(undo, inverse(sorted[i]))
	}
	return changes, undo, w, nil
}

// compare decides what a run says of each finding found and of each
// reported before (prev) and not found now, and returns the swaps that
// record it, swapOf[i] the change swaps[i] records.
func compare(scope string, found []finding, prev []inbox.Alert, now time.Time, repeat time.Duration) (changes []change, swaps []inbox.AlertSwap, swapOf []int) {
	was := map[string]inbox.Alert{}
	for _, a := range prev {
		was[a.Finding] = a
	}
	now = now.Truncate(time.Millisecond) // as the store keeps it
	seen := map[string]bool{}
	for _, f := range found {
		if seen[f.key] {
			continue // one finding a key: the first
		}
		seen[f.key] = true
		ch := change{kind: unchanged, open: true, finding: f}
		next := inbox.Alert{Scope: scope, Finding: f.key, OpenedAt: now, Count: f.count, ReportedAt: now, Rev: 1}
		a, ok := was[f.key]
		switch {
		case !ok:
			ch.kind, ch.was = opened, next
			swaps = append(swaps, inbox.AlertSwap{New: &next})
		case grown(f.count, a.Count), !now.Before(a.ReportedAt.Add(repeat)):
			ch.kind, ch.was = repeated, a
			if grown(f.count, a.Count) {
				ch.kind = grew
			}
			next.OpenedAt, next.Rev = a.OpenedAt, a.Rev+1
			swaps = append(swaps, inbox.AlertSwap{Old: &a, New: &next})
		default:
			ch.was = a
		}
		if ch.kind != unchanged {
			swapOf = append(swapOf, len(changes))
		}
		changes = append(changes, ch)
	}
	for _, a := range prev {
		if seen[a.Finding] {
			continue
		}
		swaps = append(swaps, inbox.AlertSwap{Old: &a})
		swapOf = append(swapOf, len(changes))
		changes = append(changes, change{kind: resolved, finding: finding{key: a.Finding, count: a.Count}, was: a})
	}
	return changes, swaps, swapOf
}

// swapKey is the finding a swap writes.
func swapKey(s inbox.AlertSwap) string {
	if s.New != nil {
		return s.New.Finding
	}
	return s.Old.Finding
}

// inverse is the swap that undoes s, once s held.
func inverse(s inbox.AlertSwap) inbox.AlertSwap {
	switch {
	case s.Old == nil:
		return inbox.AlertSwap{Old: s.New}
	case s.New == nil:
		return inbox.AlertSwap{New: s.Old}
	}
	back := *s.Old
	back.Rev = s.New.Rev + 1
	return inbox.AlertSwap{Old: s.New, New: &back}
}

// text is the line a change prints: the finding's, marked when it grew or
// repeated; a resolved one says so.
func (ch change) text() string {
	switch ch.kind {
	case grew:
		return fmt.Sprintf("%s\t(grew from %s; open since %s)", ch.line, thousands(ch.was.Count), formatTime(ch.was.OpenedAt))
	case repeated:
		return fmt.Sprintf("%s\t(still open, since %s)", ch.line, formatTime(ch.was.OpenedAt))
	case resolved:
		return fmt.Sprintf("resolved %s\t(open since %s)", ch.key, formatTime(ch.was.OpenedAt))
	}
	return ch.line
}

// resolvedFinding is what --json prints of a finding resolved.
type resolvedFinding struct {
	Finding  string    `json:"finding"`
	OpenedAt time.Time `json:"opened_at"`
	Count    int64     `json:"count"`
}

// object is the line of JSON a change prints.
func (ch change) object() ([]byte, error) {
	if ch.kind != resolved {
		return ch.json, nil
	}
	var b bytes.Buffer
	err := encodeExact(&b, map[string]any{"resolved": resolvedFinding{ch.key, ch.was.OpenedAt, ch.was.Count}})
	return b.Bytes(), err
}

// notice is what a post says of a change (notice.Changes).
func (ch change) notice() noticeChange {
	return noticeChange{Finding: ch.key, Change: ch.kind, Count: ch.count, OpenedAt: ch.was.OpenedAt}
}
