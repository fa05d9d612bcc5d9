package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"inbox/inbox"
)

// chartHours is how many hours the overview's chart covers.
const chartHours = 24

// listed is how many missed keys and overdue jobs the overview lists; the
// rest are counted.
const listed = 20

type overviewPage struct {
	Title       string
	Now         time.Time
	DB          string
	Destination string
	Replica     *Replica // nil without one
	Statuses    []statusCount
	Total       int64
	Sources     []sourceCounts
	Reasons     []inbox.ReasonCount
	Parked      int64
	// OldestParked is when the oldest parked row was received; zero when
	// none is parked.
	OldestParked time.Time
	Queue        inbox.Queue
	QueueAge     time.Duration
	// Destinations counts each destination's pairs of rows;
	// DestinationsLate says they could not be counted in time.
	Destinations     []destinationCounts
	DestinationsLate bool
	Chart            chart
	Secrets          []secretRow
	Rec              inbox.Reconciliation
	Missed           []inbox.Refusal
	Overdue          []inbox.Expectation
	// MoreMissed and MoreOverdue say the lists were cut at listed.
	MoreMissed, MoreOverdue bool
	// Attempts is set when the attempts per status were read; StatsLate
	// when the rows per source could not be counted in time.
	Attempts, StatsLate bool
}

type statusCount struct {
	Status   inbox.Status
	Rows     int64
	Attempts int64
	Link     string
}

type sourceCounts struct {
	Name   string
	Counts []int64 // in the order of inbox.Statuses
	Link   string
	// Configured is false for a source that has rows but that this
	// process does not receive.
	Configured   bool
	LastVerified time.Time
	// Unverified is the source's run of requests that failed verification
	// (Count 0: none); Broken when none verified since it began.
	Unverified inbox.Unverified
	Broken     bool
}

// destinationCounts is one destination's line of the overview: its pairs
// by status, as inbox stats counts them.
type destinationCounts struct {
	Name                                  string
	Paused                                bool
	DownSince                             time.Time // zero: not down
	New, InFlight, Retrying, Done, Parked int64
}

type secretRow struct {
	Source, Path, Scheme string
	Position             int
	Fingerprint          string
	Expires              time.Time
	Expired              bool
	LastVerified         time.Time
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.read(r)
	defer cancel()
	p, err := c.readOverview(ctx)
	if err != nil {
		c.storeFailed(w, err)
		return
	}
	c.render(w, http.StatusOK, "overview", p)
}

// readOverview reads what the overview shows, every read bounded by ctx.
func (c *Console) readOverview(ctx context.Context) (overviewPage, error) {
	now := c.now().UTC()
	p := overviewPage{Title: "Overview", Now: now, DB: c.db, Destination: c.dest}
	if c.replica != nil {
		rep := c.replica()
		p.Replica = &rep
	}
	byStatus, err := c.store.CountByStatus(ctx)
	if err != nil {
		return p, err
	}
	for _, s := range inbox.Statuses() {
		p.Statuses = append(p.Statuses, statusCount{Status: s, Rows: byStatus[s], Link: rowsLink(inbox.Filter{Status: s})})
		p.Total += byStatus[s]
	}
	if p.Queue, err = c.store.Queue(ctx, now); err != nil {
		return p, err
	}
	p.QueueAge = p.Queue.Age(now)
	if p.Reasons, err = c.store.ParkedByReason(ctx, inbox.Filter{}); err != nil {
		return p, err
	}
	// The rows parked themselves, as stats counts them; the reasons also
	// count a row under each reason a destination parked it with.
	p.Parked = byStatus[inbox.StatusParked]
	for _, rc := range p.Reasons {
		if p.OldestParked.IsZero() || rc.Oldest.Before(p.OldestParked) {
			p.OldestParked = rc.Oldest
		}
	}
	uses, err := c.store.SecretUses(ctx)
	if err != nil {
		return p, err
	}
	if c.uses != nil {
		uses = append(uses, c.uses()...)
	}
	runs, err := c.store.Unverified(ctx)
	if err != nil {
		return p, err
	}
	if p.Chart, err = c.readChart(ctx, now); err != nil {
		return p, err
	}
	if p.Rec, err = c.store.Reconciliation(ctx, now); err != nil {
		return p, err
	}
	missed, err := c.store.Missed(ctx, time.Time{})
	if err != nil {
		return p, err
	}
	p.Chart.addRefusals(missed)
	slices.SortFunc(missed, func(a, b inbox.Refusal) int { return a.First.Compare(b.First) })
	p.Missed, p.MoreMissed = missed[:min(len(missed), listed)], len(missed) > listed
	overdue, err := c.store.Expected(ctx, now, true)
	if err != nil {
		return p, err
	}
	slices.SortFunc(overdue, func(a, b inbox.Expectation) int { return a.DueAt.Compare(b.DueAt) })
	p.Overdue, p.MoreOverdue = overdue[:min(len(overdue), listed)], len(overdue) > listed
	// Last, as it reads every row: on a large inbox it may not finish in
	// time, and the page is shown without what only it counts (rows per
	// source, attempts).
	st, err := c.store.Stats(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		p.StatsLate = true
		st = inbox.Stats{} // reading its nil maps counts nothing
	case err != nil:
		return p, err
	default:
		p.Attempts = true
		for i := range p.Statuses {
			p.Statuses[i].Attempts = st.Attempts[p.Statuses[i].Status]
		}
	}
	p.Sources, p.Secrets = c.sourceRows(st, uses, runs, now)
	// As Stats does the rows, this reads every row's pairs: the page is
	// shown without them when it does not finish in time.
	dests, err := c.store.Destinations(ctx, now)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		p.DestinationsLate = true
	case err != nil:
		return p, err
	}
	for _, d := range dests {
		p.Destinations = append(p.Destinations, destinationCounts{Name: d.Name, Paused: d.Paused, DownSince: d.DownSince, New: d.ByStatus[inbox.StatusNew],
			InFlight: d.InFlight, Retrying: d.Retrying, Done: d.ByStatus[inbox.StatusDone], Parked: d.ByStatus[inbox.StatusParked]})
	}
	return p, nil
}

// sourceRows returns the rows per source (the configured ones first, then
// any other the store has rows of), each with its run of failed
// verifications, and a line per configured secret, with when each last
// verified a delivery.
func (c *Console) sourceRows(st inbox.Stats, uses []inbox.SecretUse, runs []inbox.Unverified, now time.Time) ([]sourceCounts, []secretRow) {
	run := map[string]inbox.Unverified{}
	for _, r := range runs {
		run[r.Source] = r
	}
	broken := map[string]bool{}
	for _, b := range inbox.BrokenRotations(runs, uses, time.Time{}, 1) {
		broken[b.Source] = true
	}
	last := map[[2]string]time.Time{}
	lastBySource := map[string]time.Time{}
	for _, u := range uses {
		if k := [2]string{u.Source, u.Fingerprint}; u.LastVerified.After(last[k]) {
			last[k] = u.LastVerified
		}
		if u.LastVerified.After(lastBySource[u.Source]) {
			lastBySource[u.Source] = u.LastVerified
		}
	}
	counts := func(name string, configured bool) sourceCounts {
		sc := sourceCounts{Name: name, Link: rowsLink(inbox.Filter{Source: name}), Configured: configured, LastVerified: lastBySource[name],
			Unverified: run[name], Broken: broken[name]}
		for _, s := range inbox.Statuses() {
			sc.Counts = append(sc.Counts, st.BySource[name][s])
		}
		return sc
	}
	var sources []sourceCounts
	var secrets []secretRow
	seen := map[string]bool{}
	for _, src := range c.sources {
		seen[src.name] = true
		sources = append(sources, counts(src.name, true))
		for _, s := range src.secrets {
			secrets = append(secrets, secretRow{Source: src.name, Path: src.path, Scheme: src.scheme, Position: s.position,
				Fingerprint: s.fingerprint, Expires: s.expires, Expired: !s.expires.IsZero() && !now.Before(s.expires),
				LastVerified: last[[2]string{src.name, s.fingerprint}]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.BySource)) {
		if !seen[name] {
			sources = append(sources, counts(name, false))
		}
	}
	return sources, secrets
}

// readChart counts the last chartHours hours, the current one last: the
// rows received in each (one count per status and hour, so each uses the
// store's status index) and the rows parked in each.
func (c *Console) readChart(ctx context.Context, now time.Time) (chart, error) {
	end := now.Truncate(time.Hour).Add(time.Hour)
	parked, err := c.store.ParkedPerHour(ctx, inbox.Filter{}, end, chartHours)
	if err != nil {
		return chart{}, err
	}
	ch := chart{Hours: make([]hour, len(parked))}
	for i, h := range parked {
		ch.Hours[i] = hour{Start: h.Start, Parked: h.Count}
		for _, s := range inbox.Statuses() {
			n, err := c.store.Count(ctx, inbox.Filter{Status: s, Since: h.Start, Before: h.Start.Add(time.Hour)})
			if err != nil {
				return chart{}, fmt.Errorf("count rows received from %s: %w", h.Start.Format(time.RFC3339), err)
			}
			ch.Hours[i].Arrived += n
		}
	}
	return ch, nil
}
