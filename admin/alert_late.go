package admin

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// late is what alert reports beside parked rows: keys refused and not
// delivered since --missed-after, expected jobs past their window,
// destinations with unfinished rows that no running dispatcher has, and
// running dispatchers that route by different destination tables.
type late struct {
	after    time.Duration
	missed   []inbox.Refusal
	overdue  []inbox.Expectation
	stranded []inbox.Stranded
	tables   []inbox.RoutingTable
}

func lateJobs(c *cli.Context, store inbox.Store) (late, error) {
	after, err := age(c, "missed-after")
	if err != nil {
		return late{}, err
	}
	now := time.Now()
	l := late{after: after}
	if l.missed, err = store.Missed(c.Context, now.Add(-after)); err != nil {
		return late{}, err
	}
	if l.overdue, err = store.Expected(c.Context, now, true); err != nil {
		return late{}, err
	}
	// Only while a dispatcher runs: with none, nothing is routed at all,
	// and which destinations are meant is not known.
	live, err := store.Routings(c.Context, now.Add(-inbox.RoutingLive))
	if err != nil || len(live) == 0 {
		return l, err
	}
	stats, err := store.Destinations(c.Context, now)
	if err != nil {
		return late{}, err
	}
	l.stranded = inbox.StrandedDestinations(stats, inbox.LiveNames(live))
	l.tables = inbox.ConflictingRoutings(live)
	return l, nil
}

// add adds what l holds to rep: a finding for each key missed, job
// overdue and destination no dispatcher has, and one for the routings.
func (l late) add(rep *report) error {
	for _, m := range l.missed {
		line := fmt.Sprintf("missed %s\t%s refused %d times, first %s, not delivered since\t(inbox missed; inbox redeliver --missed)",
			idCell(m.Key), cell(m.Source), m.Count, formatTime(m.First))
		if err := rep.add("missed "+idCell(m.Key), m.Count, map[string]any{"missed": m}, line); err != nil {
			return err
		}
	}
	for _, e := range l.overdue {
		line := fmt.Sprintf("overdue %s\texpected by %s, %d polls, %d redeliveries\t(inbox expected --overdue)",
			idCell(e.JobID), formatTime(e.DueAt), e.Polls, e.Redeliveries)
		if err := rep.add("overdue "+idCell(e.JobID), 1, map[string]any{"overdue": e}, line); err != nil {
			return err
		}
	}
	for _, d := range l.stranded {
		line := fmt.Sprintf("unconfigured %s\t%d unfinished rows wait and no running dispatcher has this destination\t(inbox stats; name it in a config again, or see inbox replay --help)",
			cell(d.Name), d.New)
		if err := rep.add("unconfigured "+idCell(d.Name), d.New, map[string]any{"unconfigured_destination": d}, line); err != nil {
			return err
		}
	}
	if len(l.tables) == 0 {
		return nil
	}
	var parts []string
	for _, t := range l.tables {
		parts = append(parts, fmt.Sprintf("%d routing by [%s]", len(t.Owners), cell(strings.Join(t.Destinations, ", "))))
	}
	line := fmt.Sprintf("routing\tthe running dispatchers route new rows by different destination tables: %s\t(give them the same; inbox replay --destination NAME --config FILE --missing-only)",
		strings.Join(parts, "; "))
	return rep.add("routing", 1, map[string]any{"routing_tables": l.tables}, line)
}
